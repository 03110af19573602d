//! Persistent mode on the GPU (issue 5): the megakernel against StreamSync (the same scalar
//! tile code, unsynchronized, one kernel per layer on one stream) bitwise, over chains of 2 to
//! 4 stages, every policy the planner derives dependency arrays from, built-in and random tile
//! orders, fan-out and fan-in, grids many times larger than the resident blocks, relaunches
//! without clearing (with traces), both overhead-benchmark modes, a never-filled queue that
//! must time out and leave the graph usable, and the tensor-core worker on a 2-layer bf16 chain
//! against the single-GeMM kernel (bitwise) and the f64 reference; injected post delays are
//! wired (the stress test and the skipped-post fault test are in `reliability`).

use crate::chain::{all_equal, bitwise_equal, Chain, TILE};
use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::ops::gemm::{Gemm, TimingOptions};
use cusync::persistent::bench::GemmStack;
use cusync::persistent::{
    time_persistent_chain, time_persistent_variants, PersistentGraph, PersistentOptions, PersistentSpec,
    PersistentVariant, StageWork,
};
use cusync::plan::{StageId, StageOrder};
use cusync::runtime::Element;
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{validate, Dependency, PolicyKind};
use cusync::stream::DebugInjection;
use cusync::{Context, DeviceBuffer, Error, Stream};
use cusync_tests::{ensure, fail, fresh_rng, relative_error, GpuTest};
use half::bf16;
use rand::seq::SliceRandom;
use rand::Rng;
use std::time::{Duration, Instant};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "persistent::chains_of_2_3_4_stages_match_streamsync_bitwise",
        run: chains,
    },
    GpuTest {
        name: "persistent::every_policy_and_tile_order_matches_streamsync_bitwise",
        run: policies_and_orders,
    },
    GpuTest {
        name: "persistent::fan_out_and_fan_in_match_streamsync_bitwise",
        run: fan_out_fan_in,
    },
    GpuTest {
        name: "persistent::grids_far_larger_than_the_resident_blocks",
        run: many_waves,
    },
    GpuTest {
        name: "persistent::relaunch_three_times_without_clearing_with_traces",
        run: relaunch_and_trace,
    },
    GpuTest {
        name: "persistent::withheld_prefill_times_out_and_the_graph_recovers",
        run: withheld_prefill,
    },
    GpuTest {
        name: "persistent::injected_post_delays_slow_the_launch_and_keep_results",
        run: injected_delays,
    },
    GpuTest {
        name: "persistent::no_dependencies_and_no_protocol_modes_run_every_tile",
        run: overhead_modes,
    },
    GpuTest {
        name: "persistent::refuses_plans_that_cannot_make_progress",
        run: refusals,
    },
    GpuTest {
        name: "persistent::tensor_core_2layer_bf16_matches_gemm_and_f64_reference",
        run: tensor_core_chain,
    },
    GpuTest {
        name: "persistent::timing_helpers_run_every_variant",
        run: timing,
    },
];

/// Sets every byte of `buf` to 0xFF (NaN in f32 and bf16) on `stream`, through a shared borrow:
/// the graphs under test hold the outputs borrowed.
fn poison<T: Element>(cx: &Context, stream: &Stream, buf: &DeviceBuffer<T>) -> Result<(), String> {
    cx.cuda().bind_to_thread().map_err(fail)?;
    let bytes = buf.len() * std::mem::size_of::<T>();
    // SAFETY: the range is exactly the buffer's allocation; nothing else uses it on another
    // stream (the stream is synchronized before the next launch reads or writes it).
    unsafe { cusync::cudarc::driver::result::memset_d8_async(buf.addr(), 0xFF, bytes, stream.raw().cu_stream()) }
        .map_err(fail)?;
    stream.synchronize().map_err(fail)
}

pub(crate) fn poison_all<T: Element>(cx: &Context, bufs: &[DeviceBuffer<T>]) -> Result<(), String> {
    let s = cx.new_stream().map_err(fail)?;
    bufs.iter().try_for_each(|b| poison(cx, &s, b))
}

/// The chain as a persistent graph: one scalar GeMM stage per layer, `policies[i]` between
/// layers `i` and `i + 1`.
pub(crate) fn chain_spec<'b>(
    chain: &'b Chain,
    outs: &'b [DeviceBuffer<f32>],
    policies: &[PolicyKind],
) -> Result<(PersistentSpec<'b>, Vec<StageId>), String> {
    let mut spec = PersistentSpec::new();
    let mut ids = Vec::new();
    for l in 0..chain.layers() {
        let a = if l == 0 { &chain.x } else { &outs[l - 1] };
        let (m, n, k) = (chain.m, chain.dims[l + 1], chain.dims[l]);
        let work = StageWork::scalar_gemm(a, &chain.weights[l], &outs[l], m, n, k).map_err(fail)?;
        ids.push(spec.stage(format!("layer{l}"), work));
    }
    for (l, &policy) in policies.iter().enumerate() {
        spec.edge(ids[l], ids[l + 1], Dependency::GemmRow, policy);
    }
    Ok((spec, ids))
}

fn graph<'cx, 'b>(
    cx: &'cx Context,
    spec: &PersistentSpec<'b>,
    options: PersistentOptions,
) -> Result<PersistentGraph<'cx, 'b>, String> {
    PersistentGraph::new(cx, spec, options).map_err(fail)
}

/// Chains of 2, 3 and 4 stages (RowSync), each bitwise equal to StreamSync.
fn chains(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_chains");
    let dims = [96u32, 256, 160, 288, 64];
    for stages in 2..=4 {
        let chain = Chain::new(cx, &mut rng, 1000, &dims[..=stages])?;
        let want = chain.stream_sync(cx)?;
        chain.check_reference(want.last().unwrap())?;
        let outs = chain.outputs(cx)?;
        let (spec, _) = chain_spec(&chain, &outs, &vec![PolicyKind::RowSync; stages - 1])?;
        let mut g = graph(cx, &spec, PersistentOptions::default())?;
        let run = g.run().map_err(fail)?;
        all_equal(&format!("{stages} stages"), &outs, &want)?;
        println!(
            "    {stages} stages, {} tiles on {} blocks: bitwise equal, {:.3} ms",
            g.total_tiles(),
            run.ctas,
            run.elapsed_ms
        );
    }
    Ok(())
}

/// TileSync, RowSync and StridedSync (those `validate` accepts for a GeMM row dependency) with
/// row-major, column-major, strided and random first-stage orders, on 4096 + 2048 tiles.
fn policies_and_orders(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_policies_and_orders");
    let chain = Chain::new(cx, &mut rng, 4096, &[128, 1024, 512])?;
    let want = chain.stream_sync(cx)?;
    let (g1, g2) = (chain.grid(0), chain.grid(1));
    let policies = [
        PolicyKind::TileSync,
        PolicyKind::RowSync,
        PolicyKind::StridedSync { stride: 4 },
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
        let mut random: Vec<u32> = (0..g1.count()).collect();
        random.shuffle(&mut rng);
        let orders = [
            ("row-major", StageOrder::Builtin(TileOrder::RowMajor)),
            ("column-major", StageOrder::Builtin(TileOrder::ColumnMajor)),
            ("strided", StageOrder::Builtin(TileOrder::StridedRowMajor { stride: 4 })),
            ("random", StageOrder::Custom(random)),
        ];
        for (label, order) in orders {
            let outs = chain.outputs(cx)?;
            let (mut spec, ids) = chain_spec(&chain, &outs, &[policy])?;
            spec.set_order(ids[0], order);
            let mut g = graph(cx, &spec, PersistentOptions::default())?;
            let run = g.run().map_err(fail)?;
            let what = format!("{} {label}", policy.name());
            all_equal(&what, &outs, &want)?;
            println!(
                "    {what}: bitwise equal, {:.3} ms on {} blocks",
                run.elapsed_ms, run.ctas
            );
            ran += 1;
        }
    }
    ensure(ran >= 8, || format!("only {ran} combinations ran"))
}

/// `scalar_gemm_nosync` of `a [m,k] x b [k,n]` into `c` on `s` (the StreamSync reference).
#[allow(clippy::too_many_arguments)]
fn nosync_gemm(
    cx: &Context,
    s: &Stream,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    m: u32,
    n: u32,
    k: u32,
) -> Result<(), String> {
    let f = cx.function("scalar_gemm_nosync").map_err(fail)?;
    let grid = cusync::shared::Grid::covering(m, n, TILE, TILE, 1);
    let mut lb = s.raw().launch_builder(&f);
    lb.arg(a.slice())
        .arg(b.slice())
        .arg(c.slice_mut())
        .arg(&m)
        .arg(&n)
        .arg(&k);
    // SAFETY: argument types and order match `scalar_gemm_nosync`; the buffers hold the shapes.
    unsafe {
        lb.launch(LaunchConfig {
            grid_dim: (grid.x, grid.y, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map(|_| ())
    .map_err(fail)
}

/// H = X W1; P = H Wp and Q = H Wq (fan-out of H); S = P + Q (fan-in): H, P, Q bitwise equal to
/// the unsynchronized kernels, S to their sum computed on the host (one f32 addition each).
fn fan_out_fan_in(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_fan_out_fan_in");
    let (m, k, n1, n2) = (1500u32, 96u32, 320u32, 224u32);
    let rand = |rng: &mut rand::rngs::StdRng, n: u32| cusync_tests::random_f32(rng, n as usize);
    let up = |v: Vec<f32>| cx.upload(&v).map_err(fail);
    let x = up(rand(&mut rng, m * k))?;
    let w1 = up(rand(&mut rng, k * n1))?;
    let wp = up(rand(&mut rng, n1 * n2))?;
    let wq = up(rand(&mut rng, n1 * n2))?;
    let nan = |n: u32| cx.upload(&vec![f32::NAN; n as usize]).map_err(fail);
    // StreamSync reference.
    let s = cx.new_stream().map_err(fail)?;
    let (mut h_ref, mut p_ref, mut q_ref) = (nan(m * n1)?, nan(m * n2)?, nan(m * n2)?);
    nosync_gemm(cx, &s, &x, &w1, &mut h_ref, m, n1, k)?;
    nosync_gemm(cx, &s, &h_ref, &wp, &mut p_ref, m, n2, n1)?;
    nosync_gemm(cx, &s, &h_ref, &wq, &mut q_ref, m, n2, n1)?;
    s.synchronize().map_err(fail)?;
    let (h_want, p_want, q_want) = (
        h_ref.download().map_err(fail)?,
        p_ref.download().map_err(fail)?,
        q_ref.download().map_err(fail)?,
    );
    let s_want: Vec<f32> = p_want.iter().zip(&q_want).map(|(p, q)| p + q).collect();
    // The persistent diamond.
    let (h, p, q, sum) = (nan(m * n1)?, nan(m * n2)?, nan(m * n2)?, nan(m * n2)?);
    let mut spec = PersistentSpec::new();
    let sh = spec.stage("h", StageWork::scalar_gemm(&x, &w1, &h, m, n1, k).map_err(fail)?);
    let sp = spec.stage("p", StageWork::scalar_gemm(&h, &wp, &p, m, n2, n1).map_err(fail)?);
    let sq = spec.stage("q", StageWork::scalar_gemm(&h, &wq, &q, m, n2, n1).map_err(fail)?);
    let ss = spec.stage("s", StageWork::sum(&p, &q, &sum, m, n2).map_err(fail)?);
    spec.edge(sh, sp, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(sh, sq, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(sp, ss, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(sq, ss, Dependency::GemmRow, PolicyKind::RowSync);
    let mut g = graph(cx, &spec, PersistentOptions::default())?;
    for launch in 0..2 {
        for b in [&h, &p, &q, &sum] {
            poison(cx, &s, b)?;
        }
        let run = g.run().map_err(fail)?;
        bitwise_equal(&format!("launch {launch}: H"), &h.download().map_err(fail)?, &h_want)?;
        bitwise_equal(&format!("launch {launch}: P"), &p.download().map_err(fail)?, &p_want)?;
        bitwise_equal(&format!("launch {launch}: Q"), &q.download().map_err(fail)?, &q_want)?;
        bitwise_equal(
            &format!("launch {launch}: S = P + Q"),
            &sum.download().map_err(fail)?,
            &s_want,
        )?;
        println!(
            "    diamond launch {launch}: {} tiles on {} blocks, {:.3} ms",
            g.total_tiles(),
            run.ctas,
            run.elapsed_ms
        );
    }
    Ok(())
}

/// 8192 + 8192 tiles on one and two blocks per SM: 30 to 120 tiles per block.
fn many_waves(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_many_waves");
    let chain = Chain::new(cx, &mut rng, 8192, &[32, 1024, 1024])?;
    let want = chain.stream_sync(cx)?;
    let sms = cx.info().sm_count;
    for cap in [sms, 2 * sms] {
        let outs = chain.outputs(cx)?;
        let (spec, _) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
        let options = PersistentOptions {
            max_ctas: Some(cap),
            ..PersistentOptions::default()
        };
        let mut g = match PersistentGraph::new(cx, &spec, options) {
            Ok(g) => g,
            Err(Error::InvalidArgument(msg)) if cap > sms => {
                println!("    {cap} blocks are not all resident here ({msg}); skipped");
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        ensure(g.ctas() == cap && g.total_tiles() == 16384, || {
            format!("{} blocks for {} tiles", g.ctas(), g.total_tiles())
        })?;
        let run = g.run().map_err(fail)?;
        all_equal(&format!("{cap} blocks"), &outs, &want)?;
        println!(
            "    16384 tiles on {cap} blocks ({} per block): bitwise equal, {:.3} ms",
            16384 / cap,
            run.elapsed_ms
        );
    }
    Ok(())
}

/// Three launches without clearing anything, tracing on: every launch right, every tile of
/// both stages traced once per launch with ordered timestamps on a real SM, launch `e + 1`'s
/// tiles after launch `e`'s, the counters at exactly three launches' worth.
fn relaunch_and_trace(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_relaunch_and_trace");
    let chain = Chain::new(cx, &mut rng, 2048, &[64, 512, 256])?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let (spec, ids) = chain_spec(&chain, &outs, &[PolicyKind::TileSync])?;
    let options = PersistentOptions {
        trace: true,
        ..PersistentOptions::default()
    };
    let mut g = graph(cx, &spec, options)?;
    let mut last_end = 0u64;
    for epoch in 0..3u32 {
        poison_all(cx, &outs)?;
        let run = g.run().map_err(fail)?;
        ensure(run.epoch == epoch, || format!("epoch {} expected {epoch}", run.epoch))?;
        all_equal(&format!("epoch {epoch}"), &outs, &want)?;
        let mut first_dispatch = u64::MAX;
        let mut end = 0;
        for (stage, events) in run.traces.iter().enumerate() {
            let tiles = chain.grid(stage).count() as usize;
            ensure(events.len() == tiles, || {
                format!("stage {stage}: {} events for {tiles} tiles", events.len())
            })?;
            for (i, e) in events.iter().enumerate() {
                let ok = e.stage == stage as u32
                    && e.tile == i as u32
                    && e.sm < cx.info().sm_count
                    && e.cta < run.ctas
                    && e.t_dispatch > 0
                    && e.t_dispatch == e.t_ready
                    && e.t_dispatch <= e.t_start
                    && e.t_start <= e.t_end;
                ensure(ok, || {
                    format!("epoch {epoch} stage {stage} tile {i}: bad trace event {e:?}")
                })?;
                first_dispatch = first_dispatch.min(e.t_dispatch);
                end = end.max(e.t_end);
            }
        }
        ensure(first_dispatch >= last_end, || {
            format!("epoch {epoch} dispatched a tile at {first_dispatch}, before the last launch ended at {last_end}")
        })?;
        last_end = end;
        ensure(g.done_count().map_err(fail)? == (epoch + 1) * g.total_tiles(), || {
            "tiles-done counter".to_string()
        })?;
    }
    // Every queue's head and tail at exactly three launches of its tiles.
    let words = g.protocol_words().map_err(fail)?;
    let word = |addr: u64| words[((addr - g.image().base) / 4) as usize];
    for &id in &ids {
        let q = g.image().stages[id.0].queue;
        let tiles = g.plan().stages[id.0].tiles();
        ensure(
            word(q.counters) == 3 * tiles && word(q.counters + 128) == 3 * tiles,
            || {
                format!(
                    "stage {}: head {} tail {}",
                    id.0,
                    word(q.counters),
                    word(q.counters + 128)
                )
            },
        )?;
    }
    Ok(())
}

const TIMEOUT: Duration = Duration::from_millis(100);

/// The first stage's prefill is withheld: nothing is ever ready, every block's wait must time
/// out within the bound and the report must name the first stage's queue; then the same graph,
/// fault removed, runs right from epoch 0.
fn withheld_prefill(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_withheld_prefill");
    let chain = Chain::new(cx, &mut rng, 1024, &[64, 256, 256])?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let (spec, ids) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    let options = PersistentOptions {
        timeout: TIMEOUT,
        ..PersistentOptions::default()
    };
    let mut g = graph(cx, &spec, options)?;
    g.run().map_err(fail)?; // a good launch first: the fault hits epoch 1
    g.set_withheld_prefill(Some(ids[0])).map_err(fail)?;
    let t0 = Instant::now();
    let result = g.run();
    let waited = t0.elapsed();
    let tail = g.queue_tail_addr(ids[0]).ok_or("no queue")?;
    match result {
        Err(Error::SyncTimeout {
            stage,
            what: "workqueue",
            address,
            seen,
            expected,
            tile,
            ..
        }) => {
            println!(
                "    reported after {:.1} ms: stage {stage} tile {tile:#x} queue tail {address:#x} saw {seen} expected {expected}",
                waited.as_secs_f64() * 1e3
            );
            let tiles = chain.grid(0).count();
            ensure(stage == 0 && address == tail, || {
                format!("stage {stage} at {address:#x}, expected stage 0's tail {tail:#x}")
            })?;
            ensure(seen == tiles && expected == tiles + 1, || {
                format!("seen {seen} expected {expected} (epoch 1 of {tiles} tiles)")
            })?;
        }
        other => {
            return Err(format!(
                "expected a workqueue timeout, got {:?}",
                other.map(|r| r.epoch)
            ))
        }
    }
    ensure(waited < TIMEOUT + Duration::from_secs(2), || {
        format!("the timeout took {waited:?}")
    })?;
    ensure(g.next_epoch() == 0, || {
        format!("next epoch {} after the reset", g.next_epoch())
    })?;
    g.set_withheld_prefill(None).map_err(fail)?;
    for _ in 0..2 {
        poison_all(cx, &outs)?;
        g.run().map_err(fail)?;
        all_equal("after recovery", &outs, &want)?;
    }
    Ok(())
}

/// The delay injection the stress test relies on is wired: on one block, delays of up to
/// 400 µs before each of the first stage's 32 posts make the launch take at least a quarter of
/// their expected sum (32 x 200 µs) longer than without, the outputs stay bitwise right, and
/// removing the injection makes the launch fast again.
fn injected_delays(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_injected_delays");
    let chain = Chain::new(cx, &mut rng, 256, &[32, 128, 64])?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let (spec, ids) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    let options = PersistentOptions {
        max_ctas: Some(1),
        ..PersistentOptions::default()
    };
    let mut g = graph(cx, &spec, options)?;
    let timed = |g: &mut PersistentGraph, what: &str| -> Result<f32, String> {
        poison_all(cx, &outs)?;
        let run = g.run().map_err(fail)?;
        all_equal(what, &outs, &want)?;
        Ok(run.elapsed_ms)
    };
    let plain = timed(&mut g, "no delay")?;
    let max_ns = 400_000u32;
    g.set_debug(ids[0], DebugInjection::RandomDelay(max_ns)).map_err(fail)?;
    let delayed = timed(&mut g, "delayed")?;
    g.set_debug(ids[0], DebugInjection::None).map_err(fail)?;
    let again = timed(&mut g, "delay removed")?;
    let tiles = chain.grid(0).count();
    let floor_ms = (tiles as f64 * max_ns as f64 / 2.0) / 4.0 / 1e6;
    println!(
        "    {tiles} delayed posts on 1 block: {plain:.3} ms plain, {delayed:.3} ms delayed (floor {floor_ms:.2} ms), {again:.3} ms after"
    );
    ensure((delayed - plain) as f64 >= floor_ms, || {
        format!(
            "delays of up to {max_ns} ns on {tiles} posts added only {:.3} ms",
            delayed - plain
        )
    })?;
    ensure(again < delayed / 2.0, || {
        format!("{again:.3} ms after removing the delays (delayed {delayed:.3} ms)")
    })
}

/// The overhead benchmark's two modes on a chain: with every dependency satisfied up front
/// (all prefilled, no scoreboard walk) and without any protocol (one counter), every tile runs
/// once per launch (the counters say so) and the first layer, which reads only X, is right; a
/// pipelined launch of the same graph afterwards is right everywhere.
fn overhead_modes(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_overhead_modes");
    let chain = Chain::new(cx, &mut rng, 2048, &[64, 256, 256])?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let (spec, _) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    let options = PersistentOptions {
        no_dependencies: true,
        ..PersistentOptions::default()
    };
    let mut free = graph(cx, &spec, options)?;
    for _ in 0..2 {
        poison_all(cx, &outs)?;
        let run = free.run().map_err(fail)?;
        bitwise_equal("no dependencies: layer 0", &outs[0].download().map_err(fail)?, &want[0])?;
        println!("    no dependencies: {:.3} ms", run.elapsed_ms);
    }
    let mut g = graph(cx, &spec, PersistentOptions::default())?;
    for _ in 0..2 {
        poison_all(cx, &outs)?;
        let run = g.run_noprotocol().map_err(fail)?;
        bitwise_equal("no protocol: layer 0", &outs[0].download().map_err(fail)?, &want[0])?;
        println!("    no protocol: {:.3} ms", run.elapsed_ms);
    }
    poison_all(cx, &outs)?;
    let run = g.run().map_err(fail)?;
    all_equal("pipelined after the no-protocol launches", &outs, &want)?;
    println!("    pipelined: {:.3} ms", run.elapsed_ms);
    Ok(())
}

/// Plans that could not run are refused before anything is launched, with the reason.
fn refusals(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_refusals");
    let chain = Chain::new(cx, &mut rng, 256, &[32, 64, 64])?;
    let outs = chain.outputs(cx)?;
    let (spec, _) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    let g = graph(cx, &spec, PersistentOptions::default())?;
    let too_many = PersistentOptions {
        max_ctas: Some(100_000),
        ..PersistentOptions::default()
    };
    match PersistentGraph::new(cx, &spec, too_many) {
        Err(Error::InvalidArgument(msg)) if msg.contains("can be resident") => println!("    refused: {msg}"),
        other => return Err(format!("100000 blocks accepted: {:?}", other.map(|g| g.ctas()))),
    }
    // A cycle.
    let (mut cyclic, ids) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    cyclic.edge(ids[1], ids[0], Dependency::GemmRow, PolicyKind::RowSync);
    match PersistentGraph::new(cx, &cyclic, PersistentOptions::default()) {
        Err(Error::InvalidArgument(msg)) if msg.contains("cycle") => println!("    refused: {msg}"),
        other => return Err(format!("a cycle was accepted: {:?}", other.map(|g| g.ctas()))),
    }
    ensure(g.ctas() <= g.total_tiles(), || format!("{} blocks", g.ctas()))
}

fn bf16_values(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// The tensor-core worker on a 2-layer bf16 chain (80 tiles on 24 blocks, launched twice):
/// bitwise equal to the single-GeMM kernel of the same tile (H = X W1, then Y = H W2), and
/// within 1e-2 of the f64 reference of X W1 W2 on sampled rows.
fn tensor_core_chain(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_tensor_core_chain");
    let seed = rng.random();
    let stack = GemmStack::new(cx, 1024, &[512, 768, 512], seed).map_err(fail)?;
    let spec = stack.spec(PolicyKind::RowSync).map_err(fail)?;
    let options = PersistentOptions {
        max_ctas: Some(24),
        ..PersistentOptions::default()
    };
    let mut g = graph(cx, &spec, options)?;
    // Single-GeMM references (same mainloop, one tile per block).
    let s = cx.new_stream().map_err(fail)?;
    let mut h_ref = cx.alloc_zeros::<bf16>(1024 * 768).map_err(fail)?;
    let mut y_ref = cx.alloc_zeros::<bf16>(1024 * 512).map_err(fail)?;
    Gemm::new(cx, stack.config(0))
        .and_then(|k| k.launch(&s, &stack.x, &stack.weights[0], &mut h_ref, None))
        .map_err(fail)?;
    Gemm::new(cx, stack.config(1))
        .and_then(|k| k.launch(&s, &h_ref, &stack.weights[1], &mut y_ref, None))
        .map_err(fail)?;
    s.synchronize().map_err(fail)?;
    let (h_want, y_want) = (h_ref.download().map_err(fail)?, y_ref.download().map_err(fail)?);
    for launch in 0..2 {
        poison_all(cx, &stack.outputs)?;
        let run = g.run().map_err(fail)?;
        let h = stack.outputs[0].download().map_err(fail)?;
        let y = stack.outputs[1].download().map_err(fail)?;
        for (what, got, want) in [("H", &h, &h_want), ("Y", &y, &y_want)] {
            if let Some(i) = got
                .iter()
                .zip(want.iter())
                .position(|(a, b)| a.to_bits() != b.to_bits())
            {
                return Err(format!(
                    "launch {launch}: {what}[{i}] = {}, the single GeMM gave {}",
                    got[i], want[i]
                ));
            }
        }
        println!(
            "    launch {launch}: {} tiles on {} blocks, bitwise equal to the single GeMMs, {:.3} ms",
            g.total_tiles(),
            run.ctas,
            run.elapsed_ms
        );
    }
    // f64 reference of the whole chain on sampled rows.
    let x = bf16_values(&stack.x.download().map_err(fail)?);
    let w1 = bf16_values(&stack.weights[0].download().map_err(fail)?);
    let w2 = bf16_values(&stack.weights[1].download().map_err(fail)?);
    let y = bf16_values(&stack.outputs[1].download().map_err(fail)?);
    let (k0, n1, n2) = (512, 768, 512);
    let (mut got, mut reference) = (Vec::new(), Vec::new());
    for r in (0..1024).step_by(37) {
        let h: Vec<f64> = (0..n1)
            .map(|j| (0..k0).map(|kk| x[r * k0 + kk] * w1[kk * n1 + j]).sum())
            .collect();
        for j in 0..n2 {
            reference.push((0..n1).map(|kk| h[kk] * w2[kk * n2 + j]).sum::<f64>());
            got.push(y[r * n2 + j]);
        }
    }
    let err = relative_error(&got, &reference);
    println!("    relative error against the f64 chain: {err:.3e}");
    ensure(err < 1e-2, || {
        format!("relative error {err:.3e} against the f64 reference")
    })
}

/// The timing helpers the benchmark script calls, on a small stack.
fn timing(cx: &Context) -> Result<(), String> {
    let opts = TimingOptions {
        warmup: 2,
        iters: 5,
        rotate: false,
    };
    let t = time_persistent_variants(cx, 1024, &[1024, 1024, 1024], opts).map_err(fail)?;
    println!(
        "    1024x1024x1024 x2, {} tiles on {} blocks: pipelined {:.3} ms, no dependencies {:.3} ms, no protocol {:.3} ms",
        t.tiles, t.ctas, t.pipelined_ms, t.no_dependencies_ms, t.no_protocol_ms
    );
    let ok = [t.pipelined_ms, t.no_dependencies_ms, t.no_protocol_ms]
        .iter()
        .all(|&ms| ms > 0.0 && ms.is_finite());
    ensure(ok, || format!("{t:?}"))?;
    let ms = time_persistent_chain(cx, 512, &[1024, 1024], PersistentVariant::Pipelined, opts).map_err(fail)?;
    ensure(ms > 0.0, || format!("one layer: {ms} ms"))
}
