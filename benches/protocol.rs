//! Criterion benchmarks of the protocol's primitives on the GPU (`cargo bench --bench protocol`).
//!
//! GPU work is timed on the device (`%globaltimer` inside the kernel, or CUDA events around
//! launches) and handed to criterion through `iter_custom`, so host overheads stay out. Without
//! a GPU every group prints that it is skipped and `cargo bench` still succeeds.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cusync::microbench::{self, FenceKind};
use cusync::Context;
use std::time::Duration;

fn gpu() -> Option<Context> {
    match Context::new(0) {
        Ok(cx) => Some(cx),
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e}); GPU benchmark groups do not run");
            None
        }
    }
}

/// `iters` operations of `per_op` each, as criterion's custom timing.
fn total(iters: u64, per_op: Duration) -> Duration {
    per_op * iters.min(u32::MAX as u64) as u32
}

fn post_to_wait(c: &mut Criterion) {
    let Some(cx) = gpu() else { return };
    let mut g = c.benchmark_group("post_to_wait");
    g.bench_function("one_kernel", |b| {
        b.iter_custom(|iters| total(iters, microbench::post_to_wait_in_kernel(&cx, 1000).expect("ping-pong")))
    });
    g.bench_function("two_streams", |b| {
        b.iter_custom(|iters| {
            total(
                iters,
                microbench::post_to_wait_across_kernels(&cx, 1000).expect("ping-pong"),
            )
        })
    });
    g.finish();
}

fn fences(c: &mut Criterion) {
    let Some(cx) = gpu() else { return };
    let mut g = c.benchmark_group("fence");
    for (kind, name) in [
        (FenceKind::None, "none"),
        (FenceKind::AcqRelGpu, "acq_rel_gpu"),
        (FenceKind::ScSys, "sc_sys"),
        (FenceKind::ProxyAsync, "proxy_async_global"),
    ] {
        for blocks in [1u32, 132] {
            g.bench_with_input(BenchmarkId::new(name, blocks), &blocks, |b, &blocks| {
                b.iter_custom(|iters| {
                    let ns = microbench::fence_ns(&cx, kind, blocks, 10_000).expect("fence");
                    total(iters, Duration::from_secs_f64(ns * 1e-9))
                })
            });
        }
    }
    g.finish();
}

fn tile_counter(c: &mut Criterion) {
    let Some(cx) = gpu() else { return };
    let mut g = c.benchmark_group("tile_counter");
    for blocks in [1u32, 8, 32, 132] {
        g.bench_with_input(BenchmarkId::from_parameter(blocks), &blocks, |b, &blocks| {
            b.iter_custom(|iters| {
                let ns = microbench::tile_counter_ns(&cx, blocks, 2000).expect("tile counter");
                total(iters, Duration::from_secs_f64(ns * 1e-9))
            })
        });
    }
    g.finish();
}

fn wait_kernel(c: &mut Criterion) {
    let Some(cx) = gpu() else { return };
    let mut g = c.benchmark_group("launch");
    for (with_wait, name) in [(false, "empty_kernel"), (true, "wait_kernel_plus_empty")] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let us = microbench::launches_us(&cx, 100, with_wait).expect("launches");
                total(iters, Duration::from_secs_f64(us * 1e-6))
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    targets = post_to_wait, fences, tile_counter, wait_kernel
}
criterion_main!(benches);
