//! The first stream-mode protocol test: consumer launched first, on its own stream, waits per
//! block on semaphores that a producer on another stream posts. Also: a wait nobody posts times
//! out with a report naming the stage, tile and semaphore, and the context stays usable.

use cusync::selfcheck::{StreamPair, StreamPairConfig};
use cusync::{Context, Error};
use cusync_tests::{ensure, fail, GpuTest};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "protocol::every_kernel_is_loaded_before_any_launch",
        run: kernels_loaded_eagerly,
    },
    GpuTest {
        name: "protocol::consumer_launched_first_sees_every_element",
        run: consumer_first,
    },
    GpuTest {
        name: "protocol::unposted_semaphore_times_out_and_context_recovers",
        run: timeout_then_recover,
    },
];

/// Lazy loading would make a launched-first consumer deadlock against its producer's load.
fn kernels_loaded_eagerly(cx: &Context) -> Result<(), String> {
    for name in cusync::kernels::all_entry_points() {
        let f = cx.function(name).map_err(fail)?;
        ensure(cusync::runtime::is_loaded(&f).map_err(fail)?, || {
            format!("kernel {name} is not loaded")
        })?;
    }
    Ok(())
}

fn consumer_first(cx: &Context) -> Result<(), String> {
    let mut pair = StreamPair::new(cx, StreamPairConfig::default()).map_err(fail)?;
    // Three launches without clearing the semaphores (epoch e waits for e + 1 posts), with the
    // consumer reading producer tiles in three different permutations.
    for (epoch, perm_mul) in [(0u32, 1u32), (1, 37), (2, 95)] {
        let r = pair.run_epoch(cx, epoch, perm_mul).map_err(fail)?;
        println!("    epoch {epoch}: pair finished in {:.2} ms", r.wall_ms);
    }
    let sems = pair.semaphores().download().map_err(fail)?;
    ensure(sems.iter().all(|&s| s == 3), || {
        format!("semaphores after three epochs: {:?}", &sems[..8])
    })
}

fn timeout_then_recover(cx: &Context) -> Result<(), String> {
    let cfg = StreamPairConfig {
        timeout_ns: 50_000_000,
        ..StreamPairConfig::default()
    };
    let mut pair = StreamPair::new(cx, cfg).map_err(fail)?;
    let t0 = std::time::Instant::now();
    pair.launch_consumer(cx, 0, 1).map_err(fail)?; // nobody posts
    let result = pair.finish();
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
                "    reported: stage {stage} tile {tile} {what} at {address:#x} saw {seen} expected {expected} after {:.1} ms",
                waited.as_secs_f64() * 1e3
            );
            ensure(stage == 1 && tile < cfg.blocks && seen == 0 && expected == 1, || {
                "wrong fields in the report".into()
            })?;
            ensure(address == pair.semaphores().addr_of(tile as usize), || {
                format!("address {address:#x} is not tile {tile}'s semaphore")
            })?;
        }
        other => return Err(format!("expected a SyncTimeout, got {other:?}")),
    }
    ensure(waited.as_secs_f64() < 0.05 + 2.0, || {
        format!("the timeout took {waited:?}")
    })?;
    // The context is still usable: a correct pair on it gives correct results.
    let mut fresh = StreamPair::new(cx, StreamPairConfig::default()).map_err(fail)?;
    fresh.run_epoch(cx, 0, 1).map(|_| ()).map_err(fail)
}
