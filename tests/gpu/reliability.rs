//! Reliability on the GPU: faults end in a timeout report (never a hang) and leave the context
//! and the graph usable, in stream mode and in persistent mode; random chains (stream mode) and
//! random DAGs (persistent mode) with injected delays match StreamSync bitwise.

use crate::chain::{all_equal, Chain, StagePlan, TILE};
use crate::dag::Dag;
use crate::persistent::{chain_spec, poison_all};
use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
use cusync::persistent::{PersistentGraph, PersistentOptions};
use cusync::runtime::ErrorSlotBuffer;
use cusync::shared::order::TileOrder;
use cusync::shared::policy::{validate, Dependency, PolicyKind};
use cusync::stream::{DebugInjection, WaitKernelPolicy};
use cusync::{Context, Error};
use cusync_tests::{ensure, fail, fresh_rng, GpuTest};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng;
use std::time::{Duration, Instant};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "reliability::producer_skipping_a_post_times_out_then_recovers",
        run: skipped_post,
    },
    GpuTest {
        name: "reliability::wait_kernel_times_out_with_report",
        run: wait_kernel_timeout,
    },
    GpuTest {
        name: "reliability::stress_random_chains_with_delays_match_streamsync",
        run: stress,
    },
    GpuTest {
        name: "reliability::persistent_producer_skipping_a_post_times_out_then_recovers",
        run: persistent_skipped_post,
    },
    GpuTest {
        name: "reliability::persistent_stress_random_dags_with_delays_match_streamsync",
        run: persistent_stress,
    },
];

const TIMEOUT: Duration = Duration::from_millis(100);

fn row_major() -> StagePlan {
    StagePlan {
        order: TileOrder::RowMajor,
        custom_order: None,
    }
}

/// A producer tile that never posts: its consumer's wait times out and reports the stage,
/// the tile and the semaphore, the run returns that error, and the graph then runs right
/// again; with the consumer on its own stream (optimization W's choice) and, on sm_90, with
/// programmatic dependent launch on one stream.
fn skipped_post(cx: &Context) -> Result<(), String> {
    skipped_post_with(cx, WaitKernelPolicy::Auto)?;
    if cusync::ops::gemm_sm90::device_supports(cx) {
        skipped_post_with(cx, WaitKernelPolicy::Programmatic)?;
    } else {
        println!("    programmatic launch not checked: this device or build is not sm_90a");
    }
    Ok(())
}

fn skipped_post_with(cx: &Context, wait: WaitKernelPolicy) -> Result<(), String> {
    println!("    launch: {}", wait.name());
    let mut rng = fresh_rng("skipped_post");
    let chain = Chain::new(cx, &mut rng, 1024, &[64, 256, 256])?;
    let want = chain.stream_sync(cx)?;
    let mut g = chain.graph(cx, &[row_major(), row_major()], &[PolicyKind::RowSync])?;
    g.set_wait_kernel(wait);
    g.set_timeout(TIMEOUT);
    let skipped = 37; // row 37 / 8 = 4 of the producer never completes
    g.set_debug(cusync::stream::StageId(0), DebugInjection::SkipPost(skipped))
        .map_err(fail)?;
    let mut outs = chain.outputs(cx)?;
    let t0 = Instant::now();
    let result = chain.run(cx, &mut g, &mut outs);
    let waited = t0.elapsed();
    match result {
        Err(Error::SyncTimeout {
            stage,
            tile,
            address,
            seen,
            expected,
            what,
            ..
        }) => {
            println!(
                "    reported after {:.1} ms: stage {stage} tile {tile} {what} at {address:#x} saw {seen} expected {expected}",
                waited.as_secs_f64() * 1e3
            );
            let row = skipped / chain.grid(0).y;
            let sems = g.semaphores(0).ok_or("no semaphores")?;
            ensure(stage == 1 && what == "semaphore", || format!("stage {stage} {what}"))?;
            ensure(tile / chain.grid(1).y == row, || {
                format!("tile {tile} is not in row {row}")
            })?;
            ensure(address == sems.addr_of(row as usize), || {
                format!("{address:#x} is not row {row}'s semaphore")
            })?;
            ensure(expected == chain.grid(0).y && seen == expected - 1, || {
                format!("seen {seen} expected {expected}")
            })?;
        }
        other => return Err(format!("expected a SyncTimeout, got {:?}", other.map(|r| r.epoch))),
    }
    ensure(waited < TIMEOUT + Duration::from_secs(2), || {
        format!("the timeout took {waited:?}")
    })?;
    // The same graph, fault removed, is right again (it reset its counters and semaphores).
    g.set_debug(cusync::stream::StageId(0), DebugInjection::None)
        .map_err(fail)?;
    for _ in 0..2 {
        let mut outs = chain.outputs(cx)?;
        chain.run(cx, &mut g, &mut outs).map_err(fail)?;
        all_equal("after recovery", &outs, &want)?;
    }
    Ok(())
}

fn wait_kernel_timeout(cx: &Context) -> Result<(), String> {
    // A persistent producer of 4 blocks, 3 of which started: the wait kernel waits for all 4.
    let mut flag = cx.alloc_zeros::<u32>(1).map_err(fail)?;
    flag.fill(3).map_err(fail)?;
    let err = ErrorSlotBuffer::new(cx).map_err(fail)?;
    let f = cx.function("stream_wait_kernel").map_err(fail)?;
    let s = cx.new_stream().map_err(fail)?;
    let target = cusync::shared::lanes::start_target(0, 4, true);
    let (flag_addr, stage, err_addr, timeout) = (flag.addr(), 3u32, err.addr(), TIMEOUT.as_nanos() as u64);
    let mut b = s.raw().launch_builder(&f);
    b.arg(&flag_addr).arg(&target).arg(&stage).arg(&err_addr).arg(&timeout);
    let t0 = Instant::now();
    // SAFETY: argument types and order match `stream_wait_kernel`.
    unsafe {
        b.launch(LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        })
    }
    .map_err(fail)?;
    s.synchronize().map_err(fail)?;
    let waited = t0.elapsed();
    match err.check() {
        Err(Error::SyncTimeout {
            stage: 3,
            what: "wait kernel",
            address,
            seen: 3,
            expected: 4,
            ..
        }) if address == flag_addr => ensure(waited < TIMEOUT + Duration::from_secs(2), || format!("took {waited:?}")),
        other => Err(format!("expected a wait-kernel timeout for stage 3, got {other:?}")),
    }
}

/// A few hundred random chains: 2 or 3 layers, random shapes (edges not multiples of the tile),
/// random valid policies, built-in and random orders, random delays before posts, consumers
/// sometimes launched first. Every one must match StreamSync bitwise, with no timeout.
fn stress(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("stress");
    let policies = [
        PolicyKind::TileSync,
        PolicyKind::RowSync,
        PolicyKind::StridedSync { stride: 2 },
    ];
    let orders = [
        TileOrder::RowMajor,
        TileOrder::ColumnMajor,
        TileOrder::StridedRowMajor { stride: 2 },
    ];
    let iterations = 200;
    let (mut mismatches, mut timeouts) = (0, 0);
    let t0 = Instant::now();
    for it in 0..iterations {
        let layers = rng.random_range(2..=3usize);
        let m = rng.random_range(1..=1024u32);
        let dims: Vec<u32> = (0..=layers)
            .map(|_| rng.random_range(1..=8u32) * TILE - rng.random_range(0..4u32))
            .collect();
        let chain = Chain::new(cx, &mut rng, m, &dims)?;
        let want = chain.stream_sync(cx)?;
        let mut plans = Vec::new();
        for l in 0..layers {
            let grid = chain.grid(l);
            plans.push(if rng.random_bool(0.25) {
                let mut v: Vec<u32> = (0..grid.count()).collect();
                v.shuffle(&mut rng);
                StagePlan {
                    order: TileOrder::RowMajor,
                    custom_order: Some(v),
                }
            } else {
                StagePlan {
                    order: *orders.choose(&mut rng).unwrap(),
                    custom_order: None,
                }
            });
        }
        let mut chosen = Vec::new();
        for l in 0..layers - 1 {
            let valid: Vec<PolicyKind> = policies
                .iter()
                .copied()
                .filter(|&p| validate(p, Dependency::GemmRow, chain.grid(l), chain.grid(l + 1)).is_ok())
                .collect();
            chosen.push(*valid.choose(&mut rng).ok_or("no valid policy")?);
        }
        let mut g = chain.graph(cx, &plans, &chosen)?;
        for l in 0..layers {
            g.set_debug(
                cusync::stream::StageId(l),
                DebugInjection::RandomDelay(rng.random_range(0..20_000)),
            )
            .map_err(fail)?;
        }
        if rng.random_bool(0.3) {
            g.set_consumers_first(true);
            g.set_wait_kernel(WaitKernelPolicy::Always);
        }
        let mut outs = chain.outputs(cx)?;
        match chain.run(cx, &mut g, &mut outs) {
            Ok(_) => {
                if let Err(e) = all_equal(&format!("iteration {it}"), &outs, &want) {
                    mismatches += 1;
                    println!("    MISMATCH m={m} dims={dims:?} policies={chosen:?}: {e}");
                }
            }
            Err(e) => {
                timeouts += 1;
                println!("    ERROR m={m} dims={dims:?} policies={chosen:?}: {e}");
            }
        }
    }
    println!(
        "    {iterations} random chains in {:.2} s: {mismatches} mismatches, {timeouts} errors",
        t0.elapsed().as_secs_f64()
    );
    ensure(mismatches == 0 && timeouts == 0, || {
        format!("{mismatches} mismatches, {timeouts} errors")
    })
}

/// Persistent mode: producer tile 37 (row 4) of a 2-stage RowSync chain never posts, so the 8
/// consumer tiles of row 4 never become ready: the launch must end within the timeout plus a
/// margin with a `workqueue` timeout naming the consumer stage's queue tail (pushed short of
/// those 8 tiles), never hang; the graph resets itself, and, fault removed, its next launches
/// are bitwise right; a fresh graph on the same context is right too.
fn persistent_skipped_post(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("persistent_skipped_post");
    let chain = Chain::new(cx, &mut rng, 1024, &[64, 256, 256])?;
    let want = chain.stream_sync(cx)?;
    let outs = chain.outputs(cx)?;
    let (spec, ids) = chain_spec(&chain, &outs, &[PolicyKind::RowSync])?;
    let options = PersistentOptions {
        timeout: TIMEOUT,
        ..PersistentOptions::default()
    };
    let mut g = PersistentGraph::new(cx, &spec, options.clone()).map_err(fail)?;
    g.run().map_err(fail)?; // a good launch first: the fault hits epoch 1
    let skipped = 37;
    let (g0, g1) = (chain.grid(0), chain.grid(1));
    g.set_debug(ids[0], DebugInjection::SkipPost(skipped)).map_err(fail)?;
    let t0 = Instant::now();
    let result = g.run();
    let waited = t0.elapsed();
    let tail = g.queue_tail_addr(ids[1]).ok_or("no queue")?;
    match result {
        Err(Error::SyncTimeout {
            stage,
            what,
            address,
            seen,
            expected,
            ..
        }) => {
            println!(
                "    reported after {:.1} ms: stage {stage} {what} at {address:#x} saw {seen} expected {expected}",
                waited.as_secs_f64() * 1e3
            );
            ensure(stage == ids[1].0 as u32 && what == "workqueue", || {
                format!("stage {stage} {what}: expected the consumer's workqueue")
            })?;
            ensure(address == tail, || {
                format!("{address:#x} is not the consumer queue's tail {tail:#x}")
            })?;
            // Epoch 1: one full launch of consumer tiles pushed, then all but row 4's.
            let pushed = 2 * g1.count() - g1.y;
            ensure(seen == pushed && expected == pushed + 1, || {
                format!("seen {seen} expected {expected}; {pushed} pushes and one more awaited")
            })?;
            ensure(skipped / g0.y == 4, || "the skipped tile is in row 4".into())?;
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
    for _ in 0..2 {
        poison_all(cx, &outs)?;
        g.run().map_err(fail)?;
        all_equal("after recovery", &outs, &want)?;
    }
    // The context is usable by anything else: a fresh graph on new buffers.
    let outs2 = chain.outputs(cx)?;
    let (spec2, _) = chain_spec(&chain, &outs2, &[PolicyKind::TileSync])?;
    PersistentGraph::new(cx, &spec2, options)
        .and_then(|mut g| g.run())
        .map_err(fail)?;
    all_equal("fresh graph after the fault", &outs2, &want)
}

/// Persistent mode under stress: a few hundred random DAGs (2 to 7 stages of scalar GeMMs and
/// sums: fan-out and fan-in; ragged shapes; a random policy per edge among TileSync, RowSync,
/// StridedSync and two custom policies; random tile orders; random 0-20 µs delays before posts;
/// 1 block to every resident block, so most grids are many times the blocks; 30% launched
/// twice without clearing). Each must match StreamSync (the same tile code, one kernel per
/// stage, in order) bitwise, with no timeout or error. `CUSYNC_DAG_SEED=<seed>` reruns the one
/// DAG a failure names.
fn persistent_stress(cx: &Context) -> Result<(), String> {
    let sms = cx.info().sm_count;
    let seeds: Vec<u64> = match std::env::var("CUSYNC_DAG_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let mut rng = fresh_rng("persistent_stress");
            (0..300).map(|_| rng.random()).collect()
        }
    };
    let (mut mismatches, mut errors) = (0, 0);
    let (mut fan_in, mut fan_out, mut relaunched, mut deep) = (0, 0, 0, 0);
    let (mut stages, mut tiles, mut most_per_block) = (0, 0u64, 0u32);
    let mut policies = std::collections::BTreeMap::<String, usize>::new();
    let t0 = Instant::now();
    let mut ran = 0;
    for &seed in &seeds {
        let dag = Dag::random(cx, seed, sms)?;
        let want = dag
            .stream_sync(cx)
            .map_err(|e| format!("StreamSync of {}: {e}", dag.describe()))?;
        let outs = dag.outputs(cx)?;
        ran += 1;
        match dag.run_persistent(cx, &outs) {
            Ok(run) => {
                if let Err(e) = dag.compare(&outs, &want) {
                    mismatches += 1;
                    println!("    MISMATCH {e}\n    {}", dag.describe());
                }
                tiles += run.tiles as u64;
                let per_block = run.tiles.div_ceil(run.ctas.max(1));
                most_per_block = most_per_block.max(per_block);
                if per_block >= 10 {
                    deep += 1;
                }
            }
            Err(e) => {
                errors += 1;
                println!("    ERROR {e}\n    {}", dag.describe());
            }
        }
        stages += dag.ops.len();
        fan_in += dag.fan_in();
        fan_out += dag.fan_out();
        relaunched += dag.relaunch as usize;
        for (_, _, c) in &dag.edges {
            let name = c.name();
            let key = if name.starts_with("StridedSync") {
                "StridedSync".to_string()
            } else {
                name
            };
            *policies.entry(key).or_default() += 1;
        }
        if mismatches + errors >= 5 {
            println!("    stopping after {} failures", mismatches + errors);
            break;
        }
    }
    println!(
        "    {ran} random DAGs ({stages} stages, {tiles} tiles) in {:.2} s: {mismatches} mismatches, {errors} errors",
        t0.elapsed().as_secs_f64()
    );
    println!(
        "    {fan_in} fan-in stages, {fan_out} fan-out stages, {relaunched} relaunched, {deep} with >= 10 tiles per block (most {most_per_block}); edges by policy: {policies:?}"
    );
    ensure(mismatches == 0 && errors == 0, || {
        format!("{mismatches} mismatches, {errors} errors (timeouts included)")
    })?;
    if seeds.len() > 1 {
        let covered = fan_in > 0
            && fan_out > 0
            && relaunched > 0
            && deep > 0
            && [
                "TileSync",
                "RowSync",
                "StridedSync",
                "custom:WholeProducer",
                "custom:RowPairs",
            ]
            .iter()
            .all(|p| policies.contains_key(*p));
        ensure(covered, || {
            "the random DAGs missed a feature (fan-in, fan-out, relaunch, deep grids or a policy)".into()
        })?;
    }
    Ok(())
}
