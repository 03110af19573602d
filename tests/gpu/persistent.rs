//! Persistent mode on the GPU (issue 5): the megakernel against StreamSync (the same scalar
//! tile code, unsynchronized, one kernel per layer on one stream) bitwise, over chains of 2 to
//! 4 stages, every policy the planner derives dependency arrays from, built-in and random tile
//! orders, fan-out and fan-in, grids many times larger than the resident blocks, relaunches
//! without clearing (with traces), both overhead-benchmark modes, a never-filled queue that
//! must time out and leave the graph usable, and the tensor-core worker on a 2-layer bf16 chain
//! against the single-GeMM kernel (bitwise) and the f64 reference; injected post delays are
//! wired (the stress test and the skipped-post fault test are in `reliability`).
//!
//! The path-2 megakernel (`sm90_*`, skipped where path 2 does not run): 2- and 4-layer chains
//! with partial tiles, both tiles, RowSync and TileSync, random tile orders, a fan-out/fan-in
//! DAG, relaunches without re-allocation on NaN-poisoned outputs, each bitwise equal to the
//! plain path-2 kernels run one after another (same tile, no split-K) and, for the chains,
//! within 1e-2 of an f64 reference on sampled rows; the overhead modes; a skipped post that
//! must time out (no hang) naming the starved stage, then recover; and the refusals.

use crate::chain::{all_equal, bitwise_equal, Chain, TILE};
use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::ops::gemm::{Gemm, GemmConfig, Layout, TimingOptions};
use cusync::ops::gemm_sm90::{self, WgTile};
use cusync::persistent::bench::{
    layer_config, time_layers_side_by_side, variant_names, GemmStack, Pipelining, SideBySide, StackOrder, StackPolicy,
};
use cusync::persistent::{
    time_persistent_chain, time_persistent_chain_on, time_persistent_variants, time_persistent_variants_on,
    PersistentGraph, PersistentOptions, PersistentSpec, PersistentVariant, SchedulePriority, StageWork, WorkerKind,
    DEFAULT_POST_WAIT_NS, MAX_POST_WAIT_NS,
};
use cusync::plan::{EdgePolicy, StageId, StageOrder};
use cusync::runtime::Element;
use cusync::shared::gemm::GemmParams;
use cusync::shared::order::TileOrder;
use cusync::shared::persistent::{
    FLAGS_ABLATE, FLAG_ABLATE_NO_FENCE, FLAG_ABLATE_NO_PDL, FLAG_ABLATE_NO_POSTS, FLAG_ABLATE_NO_PREFETCH,
};
use cusync::shared::policy::{validate, Dependency, PolicyKind};
use cusync::stream::DebugInjection;
use cusync::verify::{chain_rows_error, first_difference};
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
    GpuTest {
        name: "persistent::sm90_chains_match_plain_path2_bitwise_and_f64_reference",
        run: sm90_chains,
    },
    GpuTest {
        name: "persistent::sm90_fan_out_fan_in_dag_matches_plain_path2_bitwise",
        run: sm90_dag,
    },
    GpuTest {
        name: "persistent::sm90_overhead_modes_traces_and_timing_run_every_tile",
        run: sm90_overhead_modes,
    },
    GpuTest {
        name: "persistent::sm90_skipped_post_times_out_naming_the_stage_then_recovers",
        run: sm90_skipped_post,
    },
    GpuTest {
        name: "persistent::sm90_refuses_what_the_megakernel_cannot_run",
        run: sm90_refusals,
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
    // Every queue's tail at exactly three launches of its tiles, its head there or at most one
    // fetch-add pop per CTA past it (the pops that found the fully pushed queue finished).
    let words = g.protocol_words().map_err(fail)?;
    let word = |addr: u64| words[((addr - g.image().base) / 4) as usize];
    for &id in &ids {
        let q = g.image().stages[id.0].queue;
        let tiles = g.plan().stages[id.0].tiles();
        ensure(
            word(q.counters).wrapping_sub(3 * tiles) <= g.ctas() && word(q.counters + 128) == 3 * tiles,
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
    ensure(ms > 0.0, || format!("one layer: {ms} ms"))?;
    side_by_side_rounds(cx)
}

/// `run layers`' side-by-side measurement on a small stack: every variant timed once a round,
/// and the paired ratios taken from the same rounds.
fn side_by_side_rounds(cx: &Context) -> Result<(), String> {
    let widths = [1024, 1024, 1024];
    let kind = cusync::persistent::bench::default_stack_worker(cx, 1024, &widths);
    let rounds = 3;
    let what = SideBySide {
        order: StackOrder::Raster,
        policies: vec![Pipelining {
            policy: StackPolicy::RowSync,
            priority: SchedulePriority::UpstreamFirst,
        }],
        with_default: false,
        microbatch: false,
        timing: TimingOptions {
            warmup: 1,
            iters: rounds,
            rotate: false,
        },
    };
    let t = time_layers_side_by_side(cx, 1024, &widths, kind, &what).map_err(fail)?;
    let names: Vec<&str> = t.rounds.iter().map(|(n, _)| n.as_str()).collect();
    println!("    side by side, {rounds} rounds of {names:?}");
    let pipelined = variant_names::pipelined(what.policies[0]);
    for want in [
        variant_names::TWIN,
        variant_names::DEPS_MET,
        &pipelined,
        variant_names::SINGLES,
    ] {
        ensure(names.contains(&want), || format!("no {want:?} in {names:?}"))?;
    }
    for (name, samples) in &t.rounds {
        ensure(
            samples.len() == rounds && samples.iter().all(|&ms| ms > 0.0 && ms.is_finite()),
            || format!("{name}: {samples:?} (want {rounds} positive times)"),
        )?;
    }
    let st = t
        .paired(variant_names::DEPS_MET, variant_names::TWIN)
        .ok_or("no paired deps met / twin ratio")?;
    ensure(
        st.samples == rounds && st.min <= st.median && st.median <= st.max && st.min > 0.0,
        || format!("deps met / twin by round: {st:?}"),
    )?;
    let by_round = t
        .paired(&pipelined, variant_names::SINGLES)
        .ok_or("no paired pipelined / singles ratio")?;
    // The paired median lies within the rounds' own ratios, whatever the medians of each side.
    let samples_of = |name: &str| t.round_samples(name).unwrap_or_default();
    let own: Vec<f64> = samples_of(&pipelined)
        .iter()
        .zip(samples_of(variant_names::SINGLES))
        .map(|(&x, &y)| x as f64 / y as f64)
        .collect();
    ensure(
        own.iter().any(|r| (r - by_round.min).abs() < 1e-9) && own.iter().any(|r| (r - by_round.max).abs() < 1e-9),
        || format!("paired {by_round:?} against the rounds' ratios {own:?}"),
    )
}

// ---------------------------------------------------------------------------------------------
// The path-2 megakernel (sm_90a).

fn path2_or_skip(cx: &Context) -> Result<(), String> {
    if gemm_sm90::device_supports(cx) {
        Ok(())
    } else {
        Err(cusync_tests::skip("no GeMM path 2 on this device or build"))
    }
}

const SM90_TILES: [WgTile; 2] = [WgTile::T128x256, WgTile::T128x128];

/// Rows of the path-2 chains (not a multiple of 128: partial row tiles) and their widths (leading
/// dimensions multiples of 8, none a multiple of 256: partial column tiles).
const SM90_M: usize = 1000;
const SM90_DIMS: [usize; 5] = [520, 776, 1032, 264, 1536];

/// The StreamSync reference of a stack: each layer as the plain path-2 kernel with the
/// megakernel's tile and no split-K ([`layer_config`]), one after another on one stream.
fn plain_path2_chain(cx: &Context, stack: &GemmStack, kind: WorkerKind) -> Result<Vec<Vec<bf16>>, String> {
    let s = cx.new_stream().map_err(fail)?;
    let mut outs = Vec::new();
    for w in stack.widths.windows(2) {
        outs.push(cx.alloc_zeros::<bf16>(stack.m * w[1]).map_err(fail)?);
    }
    for i in 0..outs.len() {
        let g = Gemm::new(cx, stack.config_for(i, kind)).map_err(fail)?;
        let (done, rest) = outs.split_at_mut(i);
        let a = if i == 0 { &stack.x } else { &done[i - 1] };
        let p = g.check(a, &stack.weights[i], &rest[0], None).map_err(fail)?;
        ensure(g.uses_path2(&p) && g.path2().is_some_and(|k| k.split_k() == 1), || {
            format!("layer {i}: the reference is not the plain path-2 kernel without split-K")
        })?;
        g.launch(&s, a, &stack.weights[i], &mut rest[0], None).map_err(fail)?;
    }
    s.synchronize().map_err(fail)?;
    outs.iter().map(|b| b.download().map_err(fail)).collect()
}

/// Each of `got` bitwise equal to `want` (layer by layer).
fn bf16_layers_equal(what: &str, got: &[DeviceBuffer<bf16>], want: &[Vec<bf16>]) -> Result<(), String> {
    for (l, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.download().map_err(fail)?;
        if let Some(i) = first_difference(&g, w) {
            let show = |v: &[bf16]| v.get(i).map_or(f32::NAN, |x| x.to_f32());
            return Err(format!(
                "{what}: layer {l}[{i}] = {}, the plain path-2 kernel gave {}",
                show(&g),
                show(w)
            ));
        }
    }
    Ok(())
}

/// The megakernel on 2- and 4-layer chains (M = 1000, widths from [`SM90_DIMS`]), each tile,
/// RowSync, TileSync and banded-RowSync edges (`StackPolicy::Band`, in the raster queue order)
/// under both scheduler priorities, the other edges with the first layer's tiles in a random order, the full grid and 3
/// blocks (many tiles per block, the post ring wrapping many times), two launches each on
/// NaN-poisoned outputs without re-allocation: bitwise equal to the plain path-2 kernels, and
/// within 1e-2 of the f64 chain on sampled rows.
fn sm90_chains(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let mut rng = fresh_rng("persistent_sm90_chains");
    for layers in [2usize, 4] {
        let dims = &SM90_DIMS[..=layers];
        let stack = GemmStack::new(cx, SM90_M, dims, rng.random()).map_err(fail)?;
        let x = stack.x.download().map_err(fail)?;
        let weights: Vec<Vec<bf16>> = stack
            .weights
            .iter()
            .map(|w| w.download())
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let rows: Vec<usize> = (0..SM90_M).step_by(37).chain([SM90_M - 1]).collect();
        for tile in SM90_TILES {
            let kind = WorkerKind::sm90(tile).unwrap();
            let want = plain_path2_chain(cx, &stack, kind)?;
            let reference_err = chain_rows_error(&x, &weights, &want, dims, &rows);
            ensure(reference_err < 1e-2, || {
                format!("the plain path-2 chain is off the f64 reference by {reference_err:.3e}")
            })?;
            // (policy, queue order, priority): the banded policy in `run layers`' raster order
            // under both scheduler priorities, the others with the first layer's tiles shuffled.
            let band = StackPolicy::Band { rows: 8 }.edge_policy();
            let (down, up) = (SchedulePriority::DownstreamFirst, SchedulePriority::UpstreamFirst);
            let policies = [
                (EdgePolicy::Builtin(PolicyKind::RowSync), None, down),
                (EdgePolicy::Builtin(PolicyKind::TileSync), None, up),
                (band.clone(), Some(StackOrder::Raster), down),
                (band, Some(StackOrder::Raster), up),
            ];
            for (policy, stack_order, priority) in &policies {
                for ctas in [None, Some(3)] {
                    let mut spec = stack
                        .spec_ordered(policy.clone(), kind, stack_order.unwrap_or_default())
                        .map_err(fail)?;
                    if stack_order.is_none() {
                        let mut order: Vec<u32> = (0..spec.plan_spec().stages[0].grid.count()).collect();
                        order.shuffle(&mut rng);
                        spec.set_order(StageId(0), StageOrder::Custom(order));
                    }
                    let options = PersistentOptions {
                        max_ctas: ctas,
                        priority: *priority,
                        ..PersistentOptions::default()
                    };
                    let mut g = graph(cx, &spec, options)?;
                    ensure(g.family().threads() == 384, || {
                        format!("{:?} is not path 2", g.family())
                    })?;
                    for launch in 0..2 {
                        poison_all(cx, &stack.outputs)?;
                        let run = g.run().map_err(fail)?;
                        let what = format!(
                            "{layers} layers, {} tiles, {}, {}, {} blocks, launch {launch}",
                            tile.name(),
                            policy.name(),
                            priority.name(),
                            run.ctas
                        );
                        bf16_layers_equal(&what, &stack.outputs, &want)?;
                        let outs: Vec<Vec<bf16>> = stack
                            .outputs
                            .iter()
                            .map(|b| b.download())
                            .collect::<Result<_, _>>()
                            .map_err(fail)?;
                        let err = chain_rows_error(&x, &weights, &outs, dims, &rows);
                        ensure(err < 1e-2, || format!("{what}: relative error {err:.3e} against f64"))?;
                        println!(
                            "    {what}: {} tiles, bitwise equal, f64 error {err:.2e}, {:.3} ms",
                            g.total_tiles(),
                            run.elapsed_ms
                        );
                    }
                    ensure(g.done_count().map_err(fail)? == 2 * g.total_tiles(), || {
                        "tiles-done counter after two launches".into()
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// `params` for a row-major bf16 GeMM `[m, k] x [k, n]` into `c` with leading dimensions
/// `lda` and `ldc` (the DAG's column halves).
#[allow(clippy::too_many_arguments)]
fn strided(a: u64, b: u64, c: u64, m: usize, n: usize, k: usize, lda: usize, ldc: usize) -> GemmParams {
    let flags = GemmConfig::new(m, n, k).flags();
    GemmParams::strided(
        a, b, c, 0, m as u32, n as u32, k as u32, lda as u32, n as u32, ldc as u32, flags,
    )
}

/// A fan-out/fan-in DAG of path-2 GeMM stages: H = X W1; P = H Wp and Q = H Wq (fan-out of H)
/// write the two column halves of PQ; S = PQ Ws reads both (fan-in). Edges: H->P RowSync,
/// H->Q TileSync, P->S TileSync, Q->S RowSync. Three launches on poisoned outputs, each bitwise
/// equal to the plain path-2 kernels in order, for both tiles.
fn sm90_dag(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let mut rng = fresh_rng("persistent_sm90_dag");
    let (m, k0, n1, n2, n3) = (SM90_M, 520usize, 776usize, 264usize, 1032usize);
    let up = |n: usize, scale: f32, rng: &mut rand::rngs::StdRng| {
        cx.upload(&cusync::persistent::bench::random_bf16(rng.random(), n, scale))
            .map_err(fail)
    };
    let x = up(m * k0, 1.0, &mut rng)?;
    let w1 = up(k0 * n1, 1.0 / (k0 as f32).sqrt(), &mut rng)?;
    let wp = up(n1 * n2, 1.0 / (n1 as f32).sqrt(), &mut rng)?;
    let wq = up(n1 * n2, 1.0 / (n1 as f32).sqrt(), &mut rng)?;
    let ws = up(2 * n2 * n3, 1.0 / (2.0 * n2 as f32).sqrt(), &mut rng)?;
    let ordinal = cx.info().ordinal;
    for tile in SM90_TILES {
        let kind = WorkerKind::sm90(tile).unwrap();
        // Parameters of the four stages over output buffers (h, pq, s).
        let params = |h: u64, pq: u64, s: u64| {
            [
                strided(x.addr(), w1.addr(), h, m, n1, k0, k0, n1),
                strided(h, wp.addr(), pq, m, n2, n1, n1, 2 * n2),
                strided(h, wq.addr(), pq + 2 * n2 as u64, m, n2, n1, n1, 2 * n2),
                strided(pq, ws.addr(), s, m, n3, 2 * n2, 2 * n2, n3),
            ]
        };
        // The reference: the plain path-2 kernels in order on one stream.
        let (h_ref, pq_ref, s_ref) = (
            cx.alloc_zeros::<bf16>(m * n1).map_err(fail)?,
            cx.alloc_zeros::<bf16>(m * 2 * n2).map_err(fail)?,
            cx.alloc_zeros::<bf16>(m * n3).map_err(fail)?,
        );
        let stream = cx.new_stream().map_err(fail)?;
        for p in params(h_ref.addr(), pq_ref.addr(), s_ref.addr()) {
            let (pm, pn, pk) = (p.m as usize, p.n as usize, p.k as usize);
            let g = Gemm::new(cx, layer_config(pm, pn, pk, kind)).map_err(fail)?;
            ensure(g.uses_path2(&p), || {
                "the reference is not the plain path-2 kernel".into()
            })?;
            // SAFETY: the parameters describe the live buffers above (row-major, the shapes
            // and leading dimensions they were allocated for); the stream is synchronized
            // before any of them is dropped.
            unsafe { g.launch_params(&stream, &p) }.map_err(fail)?;
        }
        stream.synchronize().map_err(fail)?;
        let want = [
            h_ref.download().map_err(fail)?,
            pq_ref.download().map_err(fail)?,
            s_ref.download().map_err(fail)?,
        ];
        // The megakernel's DAG.
        let outs = [
            cx.alloc_zeros::<bf16>(m * n1).map_err(fail)?,
            cx.alloc_zeros::<bf16>(m * 2 * n2).map_err(fail)?,
            cx.alloc_zeros::<bf16>(m * n3).map_err(fail)?,
        ];
        let ps = params(outs[0].addr(), outs[1].addr(), outs[2].addr());
        let mut spec = PersistentSpec::new();
        let mut ids = Vec::new();
        for (name, p) in ["h", "p", "q", "s"].into_iter().zip(ps) {
            // SAFETY: the parameters describe `x`, the weights and `outs`, which outlive the
            // graph (declared before it, in this scope).
            let work = unsafe { StageWork::from_raw(kind, p, ordinal) };
            ids.push(spec.stage(name, work));
        }
        spec.edge(ids[0], ids[1], Dependency::GemmRow, PolicyKind::RowSync)
            .edge(ids[0], ids[2], Dependency::GemmRow, PolicyKind::TileSync)
            .edge(ids[1], ids[3], Dependency::GemmRow, PolicyKind::TileSync)
            .edge(ids[2], ids[3], Dependency::GemmRow, PolicyKind::RowSync);
        let mut g = graph(cx, &spec, PersistentOptions::default())?;
        for launch in 0..3 {
            poison_all(cx, &outs)?;
            let run = g.run().map_err(fail)?;
            for (name, (got, w)) in ["H", "PQ", "S"].iter().zip(outs.iter().zip(&want)) {
                let got = got.download().map_err(fail)?;
                if let Some(i) = first_difference(&got, w) {
                    return Err(format!(
                        "{} launch {launch}: {name}[{i}] = {}, the plain path-2 kernels gave {}",
                        tile.name(),
                        got[i],
                        w[i]
                    ));
                }
            }
            println!(
                "    {} DAG launch {launch}: {} tiles on {} blocks, bitwise equal, {:.3} ms",
                tile.name(),
                g.total_tiles(),
                run.ctas,
                run.elapsed_ms
            );
        }
    }
    Ok(())
}

/// The overhead benchmark's modes on the path-2 megakernel: with every dependency met up front
/// and with the no-protocol twin, every tile runs once per launch (the counters say so) and
/// the first layer (which reads only X) is bitwise right; a pipelined launch afterwards is
/// right everywhere; traced launches record every tile once with ordered timestamps; the
/// timing helpers run every variant.
fn sm90_overhead_modes(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let mut rng = fresh_rng("persistent_sm90_overhead_modes");
    let stack = GemmStack::new(cx, 2048, &[512, 1024, 1024], rng.random()).map_err(fail)?;
    for tile in SM90_TILES {
        let kind = WorkerKind::sm90(tile).unwrap();
        let want = plain_path2_chain(cx, &stack, kind)?;
        let spec = stack.spec_for(PolicyKind::RowSync, kind).map_err(fail)?;
        let free_options = PersistentOptions {
            no_dependencies: true,
            ..PersistentOptions::default()
        };
        let mut free = graph(cx, &spec, free_options)?;
        let mut g = graph(cx, &spec, PersistentOptions::default())?;
        for _ in 0..2 {
            poison_all(cx, &stack.outputs)?;
            let run = free.run().map_err(fail)?;
            bf16_layers_equal("no dependencies, layer 0", &stack.outputs[..1], &want[..1])?;
            poison_all(cx, &stack.outputs)?;
            let twin = g.run_noprotocol().map_err(fail)?;
            bf16_layers_equal("no protocol, layer 0", &stack.outputs[..1], &want[..1])?;
            println!(
                "    {}: no dependencies {:.3} ms, no protocol {:.3} ms",
                tile.name(),
                run.elapsed_ms,
                twin.elapsed_ms
            );
        }
        // The benchmark's ablations (dependencies met only): each runs every tile, layer 0 right,
        // and the pipelined graph refuses them.
        for (name, flags) in [
            ("no posts", FLAG_ABLATE_NO_POSTS),
            ("no prefetch", FLAG_ABLATE_NO_PREFETCH),
            ("no fence", FLAG_ABLATE_NO_FENCE),
            ("no pdl", FLAG_ABLATE_NO_PDL),
            ("all", FLAGS_ABLATE),
        ] {
            free.set_ablation(flags).map_err(fail)?;
            for _ in 0..2 {
                poison_all(cx, &stack.outputs)?;
                free.run().map_err(|e| format!("ablation {name}: {e}"))?;
                bf16_layers_equal(name, &stack.outputs[..1], &want[..1])?;
            }
        }
        free.set_ablation(0).map_err(fail)?;
        ensure(g.set_ablation(FLAG_ABLATE_NO_POSTS).is_err(), || {
            "a pipelined graph took an ablation without posts".to_string()
        })?;
        poison_all(cx, &stack.outputs)?;
        g.run().map_err(fail)?;
        bf16_layers_equal("pipelined after the twin", &stack.outputs, &want)?;
        // The post warp's suspend-time hint changes no result: pipelined, right everywhere
        // with a long hint and back at the default; a hint past the bound is refused.
        for hint in [50_000, DEFAULT_POST_WAIT_NS] {
            g.set_post_wait_ns(hint).map_err(fail)?;
            poison_all(cx, &stack.outputs)?;
            g.run().map_err(|e| format!("post-wait hint {hint} ns: {e}"))?;
            bf16_layers_equal("pipelined, post-wait hint", &stack.outputs, &want)?;
        }
        ensure(g.set_post_wait_ns(MAX_POST_WAIT_NS + 1).is_err(), || {
            "a post-wait hint past the bound was taken".to_string()
        })?;
        // Traced: every tile of every stage once, posted by the post warp, timestamps in order.
        let traced_options = PersistentOptions {
            trace: true,
            ..PersistentOptions::default()
        };
        let mut traced = graph(cx, &spec, traced_options)?;
        for launch in 0..2 {
            poison_all(cx, &stack.outputs)?;
            let run = traced.run().map_err(fail)?;
            bf16_layers_equal("traced", &stack.outputs, &want)?;
            for (stage, events) in run.traces.iter().enumerate() {
                let tiles = spec.plan_spec().stages[stage].grid.count() as usize;
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
                        format!("launch {launch} stage {stage} tile {i}: bad trace event {e:?}")
                    })?;
                }
            }
            // Every block's lifetime, in order: entry, ready, consumers done, exit.
            ensure(run.blocks.len() == run.ctas as usize, || {
                format!("{} block stamps for {} blocks", run.blocks.len(), run.ctas)
            })?;
            for (b, s) in run.blocks.iter().enumerate() {
                let ok = s.entry > 0 && s.entry <= s.ready && s.ready <= s.consumers_done && s.consumers_done <= s.exit;
                ensure(ok, || format!("launch {launch} block {b}: stamps out of order {s:?}"))?;
            }
        }
        let opts = TimingOptions {
            warmup: 1,
            iters: 3,
            rotate: false,
        };
        let t = time_persistent_variants_on(cx, 1024, &[1024, 1024, 1024], kind, opts).map_err(fail)?;
        let ok = [t.pipelined_ms, t.no_dependencies_ms, t.no_protocol_ms]
            .iter()
            .all(|&ms| ms > 0.0 && ms.is_finite());
        ensure(ok && t.kernel.starts_with("persistent_sm90_"), || format!("{t:?}"))?;
        let ms =
            time_persistent_chain_on(cx, 512, &[1024, 1024], kind, PersistentVariant::Pipelined, opts).map_err(fail)?;
        ensure(ms > 0.0, || format!("one layer: {ms} ms"))?;
        println!(
            "    {} timing: pipelined {:.3} ms, no dependencies {:.3} ms, no protocol {:.3} ms on {} blocks",
            tile.name(),
            t.pipelined_ms,
            t.no_dependencies_ms,
            t.no_protocol_ms,
            t.ctas
        );
    }
    Ok(())
}

/// Path 2: a producer tile of row 1 of a 2-layer RowSync chain never posts, so the consumer
/// tiles of row 1 never become ready: the launch must end within the timeout plus a margin
/// with a `workqueue` timeout naming the consumer stage, its queue tail (pushed short of that
/// row) and a starved consumer tile of row 1, never hang; the graph resets itself, and, fault
/// removed, its next launches are bitwise right.
fn sm90_skipped_post(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let mut rng = fresh_rng("persistent_sm90_skipped_post");
    let stack = GemmStack::new(cx, SM90_M, &SM90_DIMS[..3], rng.random()).map_err(fail)?;
    let kind = WorkerKind::sm90(WgTile::T128x128).unwrap();
    let want = plain_path2_chain(cx, &stack, kind)?;
    let spec = stack.spec_for(PolicyKind::RowSync, kind).map_err(fail)?;
    let (g0, g1) = (spec.plan_spec().stages[0].grid, spec.plan_spec().stages[1].grid);
    let options = PersistentOptions {
        timeout: TIMEOUT,
        ..PersistentOptions::default()
    };
    let mut g = graph(cx, &spec, options)?;
    let ids = [StageId(0), StageId(1)];
    g.run().map_err(fail)?; // a good launch first: the fault hits epoch 1
    let skipped = g0.y + 1; // row 1
    g.set_debug(ids[0], DebugInjection::SkipPost(skipped)).map_err(fail)?;
    let t0 = Instant::now();
    let result = g.run();
    let waited = t0.elapsed();
    let tail = g.queue_tail_addr(ids[1]).ok_or("no queue")?;
    match result {
        Err(Error::SyncTimeout {
            stage,
            tile,
            what,
            address,
            seen,
            expected,
            ..
        }) => {
            println!(
                "    reported after {:.1} ms: stage {stage} tile {tile:#x} {what} at {address:#x} saw {seen} expected {expected}",
                waited.as_secs_f64() * 1e3
            );
            ensure(stage == ids[1].0 as u32 && what == "workqueue", || {
                format!("stage {stage} {what}: expected the consumer stage's workqueue")
            })?;
            ensure(address == tail, || {
                format!("{address:#x} is not the consumer queue's tail {tail:#x}")
            })?;
            // The graph names a consumer tile that never became ready: one of row 1's.
            ensure(tile < g1.count() && tile / g1.y == 1, || {
                format!("tile {tile} is not a consumer tile of row 1 ({} per row)", g1.y)
            })?;
            // Epoch 1: one full launch of consumer tiles pushed, then all but row 1's.
            let pushed = 2 * g1.count() - g1.y;
            ensure(seen == pushed && expected == pushed + 1, || {
                format!("seen {seen} expected {expected}; {pushed} pushes and one more awaited")
            })?;
        }
        other => {
            return Err(format!(
                "expected a workqueue SyncTimeout, got {:?}",
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
    g.set_debug(ids[0], DebugInjection::None).map_err(fail)?;
    for launch in 0..2 {
        poison_all(cx, &stack.outputs)?;
        g.run().map_err(fail)?;
        bf16_layers_equal(&format!("after recovery, launch {launch}"), &stack.outputs, &want)?;
    }
    Ok(())
}

/// What the path-2 megakernel cannot run is refused before anything is launched, with the
/// reason: mixed tile shapes, f16 inputs, a transposed operand, split-K, operands TMA cannot
/// load (K not a multiple of 8), a path-1 tile forced.
fn sm90_refusals(cx: &Context) -> Result<(), String> {
    path2_or_skip(cx)?;
    let (m, k, n) = (256usize, 128usize, 256usize);
    let a = cx.alloc_zeros::<bf16>(m * k).map_err(fail)?;
    let b = cx.alloc_zeros::<bf16>(k * n).map_err(fail)?;
    let c = cx.alloc_zeros::<bf16>(m * n).map_err(fail)?;
    let c2 = cx.alloc_zeros::<bf16>(m * n).map_err(fail)?;
    let b2 = cx.alloc_zeros::<bf16>(n * n).map_err(fail)?;
    let cfg = GemmConfig::new(m, n, k);
    let expect = |what: &str, r: Result<StageWork, Error>, needle: &str| -> Result<(), String> {
        match r {
            Err(Error::InvalidArgument(msg)) if msg.contains(needle) => {
                println!("    {what}: refused: {msg}");
                Ok(())
            }
            Err(e) => Err(format!("{what}: refused for another reason: {e}")),
            Ok(_) => Err(format!("{what}: accepted")),
        }
    };
    let t = WgTile::T128x256;
    expect(
        "transposed B",
        StageWork::gemm_sm90_bf16(&cfg.layouts(Layout::RowMajor, Layout::Transposed), t, &a, &b, &c, None),
        "row-major",
    )?;
    expect(
        "split-K 4",
        StageWork::gemm_sm90_bf16(&cfg.split_k(4), t, &a, &b, &c, None),
        "split-K",
    )?;
    expect(
        "a forced path-1 tile",
        StageWork::gemm_sm90_bf16(&cfg.tile(cusync::ops::gemm::TileConfig::T128x128), t, &a, &b, &c, None),
        "path-1 tile",
    )?;
    expect(
        "f16 inputs",
        StageWork::gemm_sm90_bf16(&cfg.input(cusync::ops::gemm::InputType::F16), t, &a, &b, &c, None),
        "bf16",
    )?;
    let odd = GemmConfig::new(m, n, k - 4);
    expect(
        "K = 124 (TMA needs multiples of 8)",
        StageWork::gemm_sm90_bf16(&odd, t, &a, &b, &c, None),
        "TMA cannot load",
    )?;
    // Mixed tiles in one graph.
    let mut spec = PersistentSpec::new();
    let s0 = spec.stage(
        "a",
        StageWork::gemm_sm90_bf16(&cfg, WgTile::T128x256, &a, &b, &c, None).map_err(fail)?,
    );
    let cfg2 = GemmConfig::new(m, n, n);
    let s1 = spec.stage(
        "b",
        StageWork::gemm_sm90_bf16(&cfg2, WgTile::T128x128, &c, &b2, &c2, None).map_err(fail)?,
    );
    spec.edge(s0, s1, Dependency::GemmRow, PolicyKind::RowSync);
    match PersistentGraph::new(cx, &spec, PersistentOptions::default()) {
        Err(Error::InvalidArgument(msg)) if msg.contains("one tile shape") => {
            println!("    mixed tiles: refused: {msg}")
        }
        other => return Err(format!("mixed tiles accepted: {:?}", other.map(|g| g.ctas()))),
    }
    Ok(())
}
