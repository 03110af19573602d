//! The MLP (GeMM+GeLU -> GeMM, bf16 tensor-core kernels) in stream mode: every policy's output
//! is bitwise equal to StreamSync's (same kernels), and StreamSync matches an f64 reference.

use cusync::mlp::{first_difference, Mlp, MlpShape};
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
