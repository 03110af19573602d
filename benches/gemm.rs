//! Criterion benchmarks of the GeMM kernels on the GPU (`cargo bench --bench gemm`): path 2
//! (TMA + wgmma), path 1 (mma.sync), the skinny kernels (where they are the default: B <= 16)
//! and cuBLAS on issue 3's shapes. Each sample is the median of
//! a few CUDA-event-timed launches (operands rotated through 2x L2), handed to criterion through
//! `iter_custom`. Without a GPU the groups say they are skipped and `cargo bench` succeeds.
//! `cusync gemm-table` prints the same comparison as one table.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cusync::baselines::cublas::time_cublas_gemm;
use cusync::ops::gemm::{time_gemm, Epilogue, GemmConfig, TimingOptions};
use cusync::ops::gemm_skinny::is_default_for;
use cusync::ops::gemm_sm90::{device_supports, path2_default_config};
use cusync::Context;
use std::time::Duration;

const OPTS: TimingOptions = TimingOptions {
    warmup: 2,
    iters: 5,
    rotate: true,
};

fn shapes() -> Vec<(&'static str, GemmConfig)> {
    vec![
        ("8192^3", GemmConfig::new(8192, 8192, 8192)),
        (
            "mlp1_b1024_gelu",
            GemmConfig::new(1024, 6144, 12288).epilogue(Epilogue::Gelu),
        ),
        ("mlp2_b1024", GemmConfig::new(1024, 12288, 6144)),
        ("mlp2_b64", GemmConfig::new(64, 12288, 6144)),
        ("mlp2_b1", GemmConfig::new(1, 12288, 6144)),
    ]
}

/// Criterion's custom timing of `iters` launches from `time_ms`, one measurement of
/// `OPTS.iters` launches (their median, ms): it runs `ceil(iters / OPTS.iters)` times and
/// `iters` times the mean of its medians is returned. The calls grow with `iters`, because
/// criterion's warm-up doubles `iters` until one call's wall time passes the warm-up time (a
/// call that measured once and scaled could double it past 2^64).
fn per_launch(iters: u64, mut time_ms: impl FnMut() -> f64) -> Duration {
    let calls = iters.div_ceil(OPTS.iters as u64).max(1);
    let sum_ms: f64 = (0..calls).map(|_| time_ms()).sum();
    Duration::from_secs_f64(sum_ms * 1e-3 * iters as f64 / calls as f64)
}

fn gemm(c: &mut Criterion) {
    let cx = match Context::new(0) {
        Ok(cx) => cx,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e}); the GeMM benchmark groups do not run");
            return;
        }
    };
    let mut g = c.benchmark_group("gemm");
    for (name, cfg) in shapes() {
        if is_default_for(&cfg) {
            let skinny = cfg.skinny(true);
            g.bench_with_input(BenchmarkId::new("skinny", name), &skinny, |b, cfg| {
                b.iter_custom(|iters| per_launch(iters, || time_gemm(&cx, cfg, OPTS).expect("skinny")))
            });
        }
        if device_supports(&cx) {
            // Path 2's default: the 128 x 16 tile where it takes the skinny kernels' place.
            let path2 = path2_default_config(&cfg, cx.info());
            g.bench_with_input(BenchmarkId::new("path2", name), &path2, |b, cfg| {
                b.iter_custom(|iters| per_launch(iters, || time_gemm(&cx, cfg, OPTS).expect("path 2")))
            });
        } else {
            eprintln!("skipped: gemm/path2/{name}: this device or build cannot run path 2");
        }
        g.bench_with_input(BenchmarkId::new("path1", name), &cfg, |b, cfg| {
            b.iter_custom(|iters| per_launch(iters, || time_gemm(&cx, &cfg.path1_only(), OPTS).expect("path 1")))
        });
        // cuBLAS has no GeLU epilogue in our binding: the plain product.
        let plain = cfg.epilogue(Epilogue::None);
        match time_cublas_gemm(&cx, &plain, OPTS) {
            Ok(_) => {
                g.bench_with_input(BenchmarkId::new("cublas", name), &plain, |b, cfg| {
                    b.iter_custom(|iters| per_launch(iters, || time_cublas_gemm(&cx, cfg, OPTS).expect("cuBLAS")))
                });
            }
            Err(e) => eprintln!("skipped: gemm/cublas/{name}: {e}"),
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(1));
    targets = gemm
}
criterion_main!(benches);
