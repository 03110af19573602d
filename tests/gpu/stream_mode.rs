//! Stream mode on the GPU: every policy and order, grids several waves deep, consumers launched
//! before producers, repeated launches without clearing, results bitwise equal to StreamSync
//! (the same kernel code, one stream, no synchronization).

use crate::chain::{all_equal, Chain, StagePlan};
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{validate, Dependency, PolicyKind};
use cusync::stream::WaitKernelPolicy;
use cusync::Context;
use cusync_tests::{ensure, fail, fresh_rng, GpuTest};
use rand::seq::SliceRandom;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "stream_mode::policies_and_orders_match_streamsync_bitwise",
        run: policies_and_orders,
    },
    GpuTest {
        name: "stream_mode::consumer_launched_first_with_wait_kernel",
        run: consumer_first,
    },
    GpuTest {
        name: "stream_mode::relaunch_without_clearing_and_trace",
        run: relaunch_and_trace,
    },
    GpuTest {
        name: "stream_mode::optimization_w_skips_the_wait_kernel_for_one_wave",
        run: optimization_w,
    },
    GpuTest {
        name: "stream_mode::programmatic_launch_three_stage_chain_many_waves_bitwise_equal",
        run: programmatic_chain,
    },
];

fn builtin(order: TileOrder) -> StagePlan {
    StagePlan {
        order,
        custom_order: None,
    }
}

/// Every valid (policy, order) combination on 4096x128 -> 1024 -> 512: 4096 and 2048 tiles,
/// several waves of the H200 each.
fn policies_and_orders(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("policies_and_orders");
    let chain = Chain::new(cx, &mut rng, 4096, &[128, 1024, 512])?;
    let want = chain.stream_sync(cx)?;
    chain.check_reference(want.last().unwrap())?;
    let (g1, g2) = (chain.grid(0), chain.grid(1));
    let mut perm = |n: u32| {
        let mut v: Vec<u32> = (0..n).collect();
        v.shuffle(&mut rng);
        v
    };
    let policies = [
        PolicyKind::TileSync,
        PolicyKind::RowSync,
        PolicyKind::StridedSync { stride: 4 },
    ];
    let orders = [
        (TileOrder::RowMajor, TileOrder::RowMajor),
        (TileOrder::ColumnMajor, TileOrder::ColumnMajor),
        (TileOrder::StridedRowMajor { stride: 4 }, TileOrder::RowMajor),
    ];
    let mut ran = 0;
    for policy in policies {
        if validate(policy, Dependency::GemmRow, g1, g2).is_err() {
            println!(
                "    {} does not fit a GeMM row dependency: refused by validate",
                policy.name()
            );
            continue;
        }
        let mut cases: Vec<(Vec<StagePlan>, String)> = orders
            .iter()
            .map(|&(a, b)| (vec![builtin(a), builtin(b)], format!("{a:?}/{b:?}")))
            .collect();
        let random = vec![
            StagePlan {
                order: TileOrder::RowMajor,
                custom_order: Some(perm(g1.count())),
            },
            StagePlan {
                order: TileOrder::RowMajor,
                custom_order: Some(perm(g2.count())),
            },
        ];
        cases.push((random, "random permutations".into()));
        for (plans, label) in cases {
            let mut g = chain.graph(cx, &plans, &[policy])?;
            let mut outs = chain.outputs(cx)?;
            let run = chain.run(cx, &mut g, &mut outs).map_err(fail)?;
            let what = format!("{} {label}", policy.name());
            all_equal(&what, &outs, &want)?;
            println!(
                "    {what}: bitwise equal, {:.3} ms, wait kernels {:?}",
                run.elapsed_ms, run.wait_kernels
            );
            ran += 1;
        }
    }
    ensure(ran >= 8, || format!("only {ran} combinations ran"))
}

/// The consumer is launched before its producer; the wait kernel keeps its blocks off the SMs
/// until the producer's blocks are resident, so nothing deadlocks even though the consumer alone
/// fills the GPU many times over.
fn consumer_first(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("consumer_first");
    let chain = Chain::new(cx, &mut rng, 8192, &[64, 512, 512])?;
    let want = chain.stream_sync(cx)?;
    let mut g = chain.graph(
        cx,
        &[builtin(TileOrder::RowMajor), builtin(TileOrder::RowMajor)],
        &[PolicyKind::RowSync],
    )?;
    g.set_consumers_first(true);
    g.set_wait_kernel(WaitKernelPolicy::Always);
    let mut outs = chain.outputs(cx)?;
    let run = chain.run(cx, &mut g, &mut outs).map_err(fail)?;
    ensure(run.wait_kernels == vec![false, true], || {
        format!("wait kernels {:?}", run.wait_kernels)
    })?;
    all_equal("consumer first", &outs, &want)?;
    println!("    consumer-first launch: {:.3} ms", run.elapsed_ms);
    Ok(())
}

/// Three launches of one graph without clearing anything, tracing on: every launch is right and
/// every tile of both stages leaves a trace event with ordered timestamps on a real SM.
fn relaunch_and_trace(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("relaunch_and_trace");
    let chain = Chain::new(cx, &mut rng, 2048, &[64, 512, 256])?;
    let want = chain.stream_sync(cx)?;
    let mut g = chain.graph(
        cx,
        &[builtin(TileOrder::RowMajor), builtin(TileOrder::RowMajor)],
        &[PolicyKind::TileSync],
    )?;
    g.set_trace(true).map_err(fail)?;
    for epoch in 0..3u32 {
        let mut outs = chain.outputs(cx)?;
        let run = chain.run(cx, &mut g, &mut outs).map_err(fail)?;
        ensure(run.epoch == epoch, || format!("epoch {} expected {epoch}", run.epoch))?;
        all_equal(&format!("epoch {epoch}"), &outs, &want)?;
        for (stage, events) in run.traces.iter().enumerate() {
            let tiles = chain.grid(stage).count() as usize;
            ensure(events.len() == tiles, || {
                format!("stage {stage}: {} events for {tiles} tiles", events.len())
            })?;
            for (i, e) in events.iter().enumerate() {
                let ok = e.stage == stage as u32
                    && e.tile == i as u32
                    && e.sm < cx.info().sm_count
                    && e.t_dispatch > 0
                    && e.t_dispatch <= e.t_ready
                    && e.t_ready <= e.t_end
                    && e.t_start <= e.t_end;
                ensure(ok, || {
                    format!("epoch {epoch} stage {stage} tile {i}: bad trace event {e:?}")
                })?;
            }
        }
    }
    let sems = g.semaphores(0).ok_or("no semaphores")?.download().map_err(fail)?;
    ensure(sems.iter().all(|&s| s == 3), || {
        format!("TileSync semaphores after 3 launches: {:?}", &sems[..4])
    })
}

/// Optimization W: small grids that fit in one wave together get no wait kernel; large ones do.
fn optimization_w(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("optimization_w");
    let plans = [builtin(TileOrder::RowMajor), builtin(TileOrder::RowMajor)];
    let small = Chain::new(cx, &mut rng, 128, &[64, 128, 128])?; // 16 + 16 tiles
    let mut g = small.graph(cx, &plans, &[PolicyKind::TileSync])?;
    let mut outs = small.outputs(cx)?;
    let run = small.run(cx, &mut g, &mut outs).map_err(fail)?;
    ensure(run.wait_kernels == vec![false, false], || {
        format!("small grids: wait kernels {:?}", run.wait_kernels)
    })?;
    all_equal("small", &outs, &small.stream_sync(cx)?)?;
    let big = Chain::new(cx, &mut rng, 8192, &[32, 512, 512])?; // 4096 + 4096 tiles
    let mut g = big.graph(cx, &plans, &[PolicyKind::RowSync])?;
    let mut outs = big.outputs(cx)?;
    let run = big.run(cx, &mut g, &mut outs).map_err(fail)?;
    ensure(run.wait_kernels == vec![false, true], || {
        format!("large grids: wait kernels {:?}", run.wait_kernels)
    })?;
    all_equal("large", &outs, &big.stream_sync(cx)?)
}

/// Programmatic dependent launch (sm_90): a three-stage chain, 4096 + 4096 + 2048 tiles (many
/// waves each), every stage on one stream, each consumer launched programmatically with no wait
/// kernel; consumers-first asked for and ignored (a programmatic launch follows its producer).
/// TileSync then RowSync edges, three launches of each graph without clearing: every layer
/// bitwise equal to StreamSync. A consumer block that took an SM before its producer's last
/// blocks started would deadlock here, as it does without the wait kernel.
fn programmatic_chain(cx: &Context) -> Result<(), String> {
    if !cusync::ops::gemm_sm90::device_supports(cx) {
        return Err(cusync_tests::skip(
            "programmatic dependent launch needs an sm_90 device and build",
        ));
    }
    let mut rng = fresh_rng("programmatic_chain");
    let chain = Chain::new(cx, &mut rng, 8192, &[32, 512, 512, 256])?;
    let want = chain.stream_sync(cx)?;
    chain.check_reference(want.last().unwrap())?;
    let plans = [
        builtin(TileOrder::RowMajor),
        builtin(TileOrder::ColumnMajor),
        builtin(TileOrder::RowMajor),
    ];
    for policies in [
        [PolicyKind::TileSync, PolicyKind::TileSync],
        [PolicyKind::RowSync, PolicyKind::RowSync],
    ] {
        let mut g = chain.graph(cx, &plans, &policies)?;
        g.set_wait_kernel(WaitKernelPolicy::Programmatic);
        g.set_consumers_first(true);
        for launch in 0..3 {
            let mut outs = chain.outputs(cx)?;
            let run = chain.run(cx, &mut g, &mut outs).map_err(fail)?;
            ensure(run.wait_kernels.iter().all(|&w| !w), || {
                format!("programmatic run had wait kernels {:?}", run.wait_kernels)
            })?;
            let what = format!("{} programmatic launch {launch}", policies[0].name());
            all_equal(&what, &outs, &want)?;
            println!("    {what}: bitwise equal, {:.3} ms", run.elapsed_ms);
        }
    }
    Ok(())
}
