//! Reliability on the GPU: faults end in a timeout report (never a hang) and leave the context
//! and the graph usable; random chains with injected delays match StreamSync bitwise.

use crate::chain::{all_equal, Chain, StagePlan, TILE};
use cusync::cudarc::driver::{LaunchConfig, PushKernelArg};
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
];

const TIMEOUT: Duration = Duration::from_millis(100);

fn row_major() -> StagePlan {
    StagePlan {
        order: TileOrder::RowMajor,
        custom_order: None,
    }
}

fn skipped_post(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("skipped_post");
    let chain = Chain::new(cx, &mut rng, 1024, &[64, 256, 256])?;
    let want = chain.stream_sync(cx)?;
    let mut g = chain.graph(cx, &[row_major(), row_major()], &[PolicyKind::RowSync])?;
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
    let flag = cx.alloc_zeros::<u32>(1).map_err(fail)?;
    let err = ErrorSlotBuffer::new(cx).map_err(fail)?;
    let f = cx.function("stream_wait_kernel").map_err(fail)?;
    let s = cx.new_stream().map_err(fail)?;
    let (flag_addr, epoch, stage, err_addr, timeout) = (flag.addr(), 0u32, 3u32, err.addr(), TIMEOUT.as_nanos() as u64);
    let mut b = s.raw().launch_builder(&f);
    b.arg(&flag_addr).arg(&epoch).arg(&stage).arg(&err_addr).arg(&timeout);
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
            seen: 0,
            expected: 1,
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
