//! The MLP (GeMM+GeLU -> GeMM, bf16 tensor-core kernels) in stream mode: every policy's output
//! is bitwise equal to StreamSync's (same kernels), and StreamSync matches an f64 reference; on
//! LLaMA-2-7B's sizes too. The cuBLAS baseline captured as a CUDA graph computes what plain
//! cuBLAS computes, on every replay; Policy::Auto's measured trial runs once and is then
//! answered from the process cache and from its file.

use cusync::baselines::cublas::Cublas;
use cusync::mlp::auto::{choose, forget, AutoOptions, Decision, TrialCache, TrialKey};
use cusync::mlp::compare::{measure, to_csv, CompareOptions};
use cusync::mlp::{first_difference, relative_error, Mlp, MlpModel, MlpOrder, MlpShape};
use cusync::ops::gemm::TileConfig;
use cusync::shared::policy::PolicyKind;
use cusync::stream::WaitKernelPolicy;
use cusync::Context;
use cusync_tests::{ensure, fail, GpuTest};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "mlp::policies_bitwise_equal_streamsync_small",
        run: small,
    },
    GpuTest {
        name: "mlp::gpt3_batch_256_rowsync_and_tilesync",
        run: gpt3_256,
    },
    GpuTest {
        name: "mlp::llama7b_policies_bitwise_equal_streamsync_and_sweep_row",
        run: llama7b,
    },
    GpuTest {
        name: "mlp::cublas_cuda_graph_matches_plain_cublas_on_every_replay",
        run: cublas_graph,
    },
    GpuTest {
        name: "mlp::auto_policy_trial_runs_once_then_is_cached_in_memory_and_file",
        run: auto_trial,
    },
];

fn check(cx: &Context, shape: MlpShape, tile: Option<TileConfig>, waits: &[WaitKernelPolicy]) -> Result<(), String> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(3);
    println!(
        "    batch {} hidden {} ffn {}: seed {seed}",
        shape.batch, shape.hidden, shape.ffn
    );
    let mut mlp = Mlp::new(cx, shape, tile, seed).map_err(fail)?;
    mlp.poison().map_err(fail)?;
    mlp.run_stream_sync().map_err(fail)?;
    let (h_ref, y_ref) = mlp.outputs().map_err(fail)?;
    let err = mlp.check_rows(&[0, shape.batch / 3, shape.batch - 1]).map_err(fail)?;
    println!("    StreamSync vs f64 reference: {err:.2e} ({})", mlp.tile().name());
    ensure(err < 1e-2, || format!("relative error {err:.3e}"))?;
    for policy in [PolicyKind::TileSync, PolicyKind::RowSync] {
        for &wait in waits {
            let mut g = mlp.graph(policy, wait).map_err(fail)?;
            for launch in 0..2 {
                mlp.poison().map_err(fail)?;
                let run = mlp.run_graph(&mut g).map_err(fail)?;
                let (h, y) = mlp.outputs().map_err(fail)?;
                let what = format!("{} {wait:?} launch {launch}", policy.name());
                ensure(first_difference(&h, &h_ref).is_none(), || {
                    format!("{what}: H differs from StreamSync")
                })?;
                ensure(first_difference(&y, &y_ref).is_none(), || {
                    format!("{what}: Y differs from StreamSync")
                })?;
                if launch == 1 {
                    println!(
                        "    {what}: bitwise equal, {:.1} us, wait kernels {:?}",
                        run.elapsed_ms * 1e3,
                        run.wait_kernels
                    );
                }
            }
        }
    }
    Ok(())
}

fn small(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 300,
        hidden: 1024,
        ffn: 768,
    };
    check(
        cx,
        shape,
        Some(TileConfig::T64x64),
        &[WaitKernelPolicy::Auto, WaitKernelPolicy::Always],
    )?;
    check(cx, shape, Some(TileConfig::T128x128), &[WaitKernelPolicy::Always])
}

fn gpt3_256(cx: &Context) -> Result<(), String> {
    check(cx, MlpShape::gpt3(256), None, &[WaitKernelPolicy::Auto])
}

/// LLaMA-2-7B's MLP sizes (H = 4096, F = 11008) at batch 64: every policy bitwise equal to
/// StreamSync, StreamSync within 1e-2 of the f64 reference; then one sweep row (`cusync sweep
/// mlp --model llama7b`) with both cuBLAS variants timed and the model named in the CSV.
fn llama7b(cx: &Context) -> Result<(), String> {
    let shape = MlpModel::Llama7b.shape(64);
    check(cx, shape, None, &[WaitKernelPolicy::Auto])?;
    let opts = CompareOptions {
        samples: 3,
        policies: vec![PolicyKind::RowSync],
        orders: vec![MlpOrder::RowMajor],
        ..Default::default()
    };
    let row = measure(cx, shape, &opts).map_err(fail)?;
    let csv = to_csv(std::slice::from_ref(&row));
    println!(
        "    sweep row: StreamSync {:.1} us, {} {:.1} us, cuBLAS {:?} us, cuBLAS graph {:?} us",
        row.stream_sync_us.median,
        row.policies[0].0,
        row.policies[0].1.median,
        row.cublas_us.map(|s| s.median),
        row.cublas_graph_us.map(|s| s.median)
    );
    ensure(
        csv.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("llama7b,64,4096,11008,")),
        || format!("CSV row does not name the model and sizes:\n{csv}"),
    )?;
    let timed = |s: Option<cusync::microbench::Stats>| s.is_some_and(|s| s.median > 0.0 && s.median.is_finite());
    ensure(timed(row.cublas_us) && timed(row.cublas_graph_us), || {
        format!("cuBLAS {:?}, cuBLAS graph {:?}", row.cublas_us, row.cublas_graph_us)
    })
}

/// cuBLAS back to back captured as one CUDA graph: each replay (outputs NaN-poisoned before)
/// writes Y again, within 1e-2 of plain cuBLAS (bitwise when cuBLAS picks the same algorithms
/// under capture, which is printed), and a graph launch takes a finite, positive time.
fn cublas_graph(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 300,
        hidden: 1024,
        ffn: 768,
    };
    let mut mlp = Mlp::new(cx, shape, None, 5).map_err(fail)?;
    let blas = Cublas::new(mlp.stream()).map_err(fail)?;
    mlp.poison().map_err(fail)?;
    mlp.run_cublas(&blas).map_err(fail)?;
    let (h_plain, y_plain) = mlp.outputs().map_err(fail)?;
    let f64s = |v: &[half::bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    for replay in 0..3 {
        mlp.poison().map_err(fail)?;
        let ms = mlp.run_cublas_graph(&blas).map_err(fail)?;
        let (h, y) = mlp.outputs().map_err(fail)?;
        ensure(h.iter().chain(&y).all(|v| v.is_finite()), || {
            format!("replay {replay}: the graph left poisoned (NaN) elements")
        })?;
        let (eh, ey) = (
            relative_error(&f64s(&h), &f64s(&h_plain)),
            relative_error(&f64s(&y), &f64s(&y_plain)),
        );
        let bitwise = first_difference(&h, &h_plain).is_none() && first_difference(&y, &y_plain).is_none();
        println!(
            "    replay {replay}: {:.1} us, H {eh:.1e} Y {ey:.1e} from plain cuBLAS, bitwise {bitwise}",
            ms * 1e3
        );
        ensure(eh < 1e-2 && ey < 1e-2, || {
            format!("replay {replay}: H {eh:.3e}, Y {ey:.3e} from plain cuBLAS")
        })?;
        ensure(ms > 0.0 && ms.is_finite(), || format!("replay {replay}: {ms} ms"))?;
    }
    Ok(())
}

/// Policy::Auto with a trial on a small MLP: the first choice measures (every candidate the
/// wave model names, with a finite median), the second is answered from the process cache, and
/// after the process cache forgets it, from the JSON file; all three pick the same policy, and
/// that policy's graph is bitwise equal to StreamSync.
fn auto_trial(cx: &Context) -> Result<(), String> {
    let shape = MlpShape {
        batch: 512,
        hidden: 2048,
        ffn: 1536,
    };
    let tile = TileConfig::T128x128;
    let dir = std::env::temp_dir().join(format!("cusync-gpu-auto-{}", std::process::id()));
    let file = dir.join("auto.json");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = AutoOptions {
        trial: true,
        samples: 3,
        cache_file: Some(file.clone()),
    };
    let key = TrialKey::new(cx.info(), shape, tile);
    forget(&key);
    let first = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    let trial = first.trial.clone().ok_or("no trial result")?;
    println!("    trial: {:?} -> {}", trial.candidates, first.policy.name());
    ensure(first.decision == Decision::Trial, || {
        format!("first: {:?}", first.decision)
    })?;
    ensure(
        trial.candidates.len() == first.prediction.policies.len()
            && trial.candidates.iter().all(|(_, us)| us.is_finite() && *us > 0.0),
        || format!("candidates {:?}", trial.candidates),
    )?;
    let second = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    ensure(second.decision == Decision::CachedInProcess, || {
        format!("second: {:?}", second.decision)
    })?;
    forget(&key);
    let third = choose(cx, shape, Some(tile), &opts).map_err(fail)?;
    ensure(third.decision == Decision::CachedInFile, || {
        format!("third: {:?}", third.decision)
    })?;
    ensure(second.policy == first.policy && third.policy == first.policy, || {
        format!("{:?} / {:?} / {:?}", first.policy, second.policy, third.policy)
    })?;
    ensure(TrialCache::open(&file).get(&key).is_some(), || {
        "the file lacks the entry".into()
    })?;
    // The chosen policy runs right.
    let mut mlp = Mlp::new(cx, shape, Some(tile), 9).map_err(fail)?;
    mlp.poison().map_err(fail)?;
    mlp.run_stream_sync().map_err(fail)?;
    let (h_ref, y_ref) = mlp.outputs().map_err(fail)?;
    let mut g = mlp.graph(first.policy, WaitKernelPolicy::Auto).map_err(fail)?;
    mlp.poison().map_err(fail)?;
    mlp.run_graph(&mut g).map_err(fail)?;
    let (h, y) = mlp.outputs().map_err(fail)?;
    ensure(
        first_difference(&h, &h_ref).is_none() && first_difference(&y, &y_ref).is_none(),
        || format!("{} differs from StreamSync", first.policy.name()),
    )?;
    forget(&key);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
