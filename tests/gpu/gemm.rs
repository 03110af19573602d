//! Tensor-core GeMM (path 1) against the f64 CPU reference: every input/output type, layout,
//! epilogue and tile configuration; edge shapes (1s, K not a multiple of the K tile, rows not
//! 16-byte aligned: the element-load path); skinny and large shapes (sampled rows and
//! columns); several tiles per block; launch validation; the timing helper and cuBLAS baseline.
//!
//! Inputs are fresh random values in [-1, 1) rounded to the input type (the reference uses
//! exactly those values); C is NaN-poisoned with a poisoned guard past its end, so an
//! unwritten element or a write past C fails. Thresholds on ‖out − ref‖/‖ref‖ follow the
//! output rounding: bf16 1e-2, f16 2e-3, f32 1e-4 (f32 accumulation over K <= 4096 is ~1e-6).
//! The denominator has a floor of 1e-3 per point, so outputs that are all tiny (a 1 x 1 GeLU
//! far in its negative tail, which underflows f32) are judged by absolute error.

use cusync::cudarc::driver::PushKernelArg;
use cusync::ops::gemm::{
    reference_gemm_at, time_gemm, Epilogue, Gemm, GemmConfig, GemmParamsArg, InputType, Layout, OutputType,
    RandomInput, TileConfig, TimingOptions,
};
use cusync::ops::gemm_sm90::{self, WgTile};
use cusync::runtime::Element;
use cusync::shared::gemm::TILE_64X64;
use cusync::Context;
use cusync_tests::{ensure, fail, fresh_rng, GpuTest};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::Rng;

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "gemm::every_type_layout_epilogue_and_tile",
        run: every_combination,
    },
    GpuTest {
        name: "gemm::edge_shapes_ones_and_unaligned_rows",
        run: edge_shapes,
    },
    GpuTest {
        name: "gemm::square_up_to_4096",
        run: square_shapes,
    },
    GpuTest {
        name: "gemm::skinny_and_m_equals_1",
        run: skinny_shapes,
    },
    GpuTest {
        name: "gemm::several_tiles_per_block_grid_stride",
        run: grid_stride,
    },
    GpuTest {
        name: "gemm::launch_validation_refuses_bad_buffers",
        run: validation,
    },
    GpuTest {
        name: "gemm::timing_and_cublas_baseline",
        run: timing_and_cublas,
    },
    GpuTest {
        name: "gemm::path2_every_type_layout_epilogue_and_tile",
        run: path2_every_combination,
    },
    GpuTest {
        name: "gemm::path2_edges_and_fallback",
        run: path2_edges,
    },
    GpuTest {
        name: "gemm::path2_split_k_forced_and_chosen_deterministic",
        run: path2_split_k,
    },
    GpuTest {
        name: "gemm::path2_stream_k_forced_and_chosen_deterministic",
        run: path2_stream_k,
    },
    GpuTest {
        name: "gemm::path2_clusters_multicast_forced_chosen_refused",
        run: path2_clusters,
    },
    GpuTest {
        name: "gemm::run_gemm_checks_and_times_pinned_choices",
        run: run_gemm_command,
    },
    GpuTest {
        name: "gemm::path2_large_and_mlp_shapes",
        run: path2_large,
    },
    GpuTest {
        name: "gemm::path2_every_l2_promotion",
        run: path2_every_l2_promotion,
    },
    GpuTest {
        name: "gemm::path2_every_pipeline_depth",
        run: path2_every_pipeline_depth,
    },
    GpuTest {
        name: "gemm::path2_swapped_skinny_every_combination_and_decomposition",
        run: path2_swapped,
    },
    GpuTest {
        name: "gemm::skinny_kernels_every_type_epilogue_plan_and_refusal",
        run: skinny_kernels,
    },
    GpuTest {
        name: "gemm::path2_tile96_small_batches_every_combination_and_decomposition",
        run: path2_tile96,
    },
    GpuTest {
        name: "gemm::path2_tile16_swapped_every_combination_decomposition_and_refusal",
        run: path2_tile16,
    },
];

const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::Transposed),
    (Layout::Transposed, Layout::RowMajor),
    (Layout::Transposed, Layout::Transposed),
];
const EPILOGUES: [Epilogue; 4] = [Epilogue::None, Epilogue::Bias, Epilogue::Gelu, Epilogue::BiasGelu];
const OUTPUTS: [OutputType; 3] = [OutputType::Bf16, OutputType::F16, OutputType::F32];
const INPUTS: [InputType; 2] = [InputType::Bf16, InputType::F16];
const TILES: [TileConfig; 3] = [TileConfig::T256x128, TileConfig::T128x128, TileConfig::T64x64];

/// Poisoned elements past the end of C.
pub(crate) const GUARD: usize = 256;

/// Outputs with at most this many elements are checked in full; larger ones on sampled rows
/// and columns.
const FULL_CHECK: usize = 1 << 20;
/// Rows and columns sampled on large outputs.
const SAMPLES: usize = 64;

/// An input element type the tests generate and read back as f64.
pub(crate) trait TestIn: RandomInput {
    fn value(self) -> f64;
}

impl TestIn for bf16 {
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl TestIn for f16 {
    fn value(self) -> f64 {
        self.to_f64()
    }
}

/// An output element type: its poison and its value as f64.
pub(crate) trait TestOut: Element {
    const POISON: Self;
    fn value(self) -> f64;
}

impl TestOut for bf16 {
    const POISON: Self = bf16::NAN;
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl TestOut for f16 {
    const POISON: Self = f16::NAN;
    fn value(self) -> f64 {
        self.to_f64()
    }
}

impl TestOut for f32 {
    const POISON: Self = f32::NAN;
    fn value(self) -> f64 {
        self as f64
    }
}

fn threshold(out: OutputType) -> f64 {
    match out {
        OutputType::Bf16 => 1e-2,
        OutputType::F16 => 2e-3,
        OutputType::F32 => 1e-4,
    }
}

/// Which elements of C are compared with the reference.
#[derive(Clone, Copy)]
pub(crate) enum Check {
    /// Full C when small, sampled rows and columns otherwise.
    Auto,
}

/// ‖out − ref‖ / max(‖ref‖, 1e-3 √n) (out is known to be finite).
fn relative_error_floored(out: &[f64], reference: &[f64]) -> f64 {
    let num: f64 = out.iter().zip(reference).map(|(o, r)| (o - r) * (o - r)).sum();
    let den: f64 = reference.iter().map(|r| r * r).sum();
    num.sqrt() / den.sqrt().max(1e-3 * (out.len() as f64).sqrt())
}

/// Random operands, launch, and comparison for one problem; returns the relative error.
fn run(cx: &Context, rng: &mut StdRng, cfg: GemmConfig, check: Check) -> Result<f64, String> {
    run_checked(cx, rng, cfg, check).map(|r| r.0)
}

/// As [`run`], also returning whether the launch ran path 2 (after checking its error slot).
fn run_checked(cx: &Context, rng: &mut StdRng, cfg: GemmConfig, check: Check) -> Result<(f64, bool), String> {
    run_named(cx, rng, cfg, check).map(|(e, path2, _)| (e, path2))
}

/// As [`run_checked`], also returning the entry point the launch ran.
fn run_named(
    cx: &Context,
    rng: &mut StdRng,
    cfg: GemmConfig,
    check: Check,
) -> Result<(f64, bool, &'static str), String> {
    match (cfg.input, cfg.output) {
        (InputType::Bf16, OutputType::Bf16) => run_typed::<bf16, bf16>(cx, rng, cfg, check),
        (InputType::Bf16, OutputType::F16) => run_typed::<bf16, f16>(cx, rng, cfg, check),
        (InputType::Bf16, OutputType::F32) => run_typed::<bf16, f32>(cx, rng, cfg, check),
        (InputType::F16, OutputType::Bf16) => run_typed::<f16, bf16>(cx, rng, cfg, check),
        (InputType::F16, OutputType::F16) => run_typed::<f16, f16>(cx, rng, cfg, check),
        (InputType::F16, OutputType::F32) => run_typed::<f16, f32>(cx, rng, cfg, check),
    }
}

/// A problem's host operands (what was uploaded).
pub(crate) struct Operands<I> {
    pub(crate) a: Vec<I>,
    pub(crate) b: Vec<I>,
    pub(crate) bias: Option<Vec<f32>>,
}

/// Random operands for `cfg` (A, B in [-1, 1), a bias when the epilogue reads one).
pub(crate) fn operands<I: TestIn>(rng: &mut StdRng, cfg: &GemmConfig) -> Operands<I> {
    let mut random = |n: usize| -> Vec<I> { (0..n).map(|_| I::from_f32(rng.random_range(-1.0f32..1.0))).collect() };
    let a = random(cfg.a_len());
    let b = random(cfg.b_len());
    let bias = cfg
        .epilogue
        .has_bias()
        .then(|| (0..cfg.n).map(|_| rng.random_range(-1.0f32..1.0)).collect());
    Operands { a, b, bias }
}

/// Points of C to compare: all of it when small; else `SAMPLES` random rows (all columns) and
/// `SAMPLES` random columns (all rows), always including the first and last row and column.
fn points(rng: &mut StdRng, cfg: &GemmConfig, check: Check) -> Vec<(usize, usize)> {
    let (m, n) = (cfg.m, cfg.n);
    match check {
        Check::Auto if m * n <= FULL_CHECK => (0..m).flat_map(|r| (0..n).map(move |c| (r, c))).collect(),
        Check::Auto => {
            let mut rows: Vec<usize> = sample(rng, m, SAMPLES.min(m)).into_iter().collect();
            let mut cols: Vec<usize> = sample(rng, n, SAMPLES.min(n)).into_iter().collect();
            rows.extend([0, m - 1]);
            cols.extend([0, n - 1]);
            rows.sort_unstable();
            rows.dedup();
            cols.sort_unstable();
            cols.dedup();
            let mut p: Vec<(usize, usize)> = rows.iter().flat_map(|&r| (0..n).map(move |c| (r, c))).collect();
            p.extend(cols.iter().flat_map(|&c| (0..m).map(move |r| (r, c))));
            p
        }
    }
}

fn run_typed<I: TestIn, O: TestOut>(
    cx: &Context,
    rng: &mut StdRng,
    cfg: GemmConfig,
    check: Check,
) -> Result<(f64, bool, &'static str), String> {
    let ops = operands::<I>(rng, &cfg);
    let a = cx.upload(&ops.a).map_err(fail)?;
    let b = cx.upload(&ops.b).map_err(fail)?;
    let bias = match &ops.bias {
        Some(v) => Some(cx.upload(v).map_err(fail)?),
        None => None,
    };
    let mut c = cx.upload(&vec![O::POISON; cfg.c_len() + GUARD]).map_err(fail)?;
    let gemm = Gemm::new(cx, cfg).map_err(fail)?;
    let stream = cx.default_stream();
    let p = gemm.check(&a, &b, &c, bias.as_ref()).map_err(fail)?;
    let path2 = gemm.uses_path2(&p) && !gemm.uses_skinny(&p);
    let kernel = gemm.kernel_name_for(&p);
    gemm.launch(&stream, &a, &b, &mut c, bias.as_ref()).map_err(fail)?;
    stream.synchronize().map_err(fail)?;
    if let Some(k) = gemm.path2() {
        k.errors().check().map_err(fail)?;
    }
    let out = c.download().map_err(fail)?;
    let label = if gemm.uses_skinny(&p) {
        kernel.to_string()
    } else {
        match gemm.path2().filter(|_| path2) {
            Some(k) => format!("path 2 {}", k.tile().name()),
            None => format!("path 1 {:?}", gemm.tile()),
        }
    };
    verify(rng, &cfg, &ops, &out, check, &label).map(|e| (e, path2, kernel))
}

/// Checks `out` (C plus guard) against the reference: every element of C written and finite,
/// the guard untouched, the relative error on the checked points under the output's threshold.
pub(crate) fn verify<I: TestIn, O: TestOut>(
    rng: &mut StdRng,
    cfg: &GemmConfig,
    ops: &Operands<I>,
    out: &[O],
    check: Check,
    tile: &str,
) -> Result<f64, String> {
    let what = || {
        format!(
            "M={} N={} K={} {:?}->{:?} A {:?} B {:?} {:?} tile {tile}",
            cfg.m, cfg.n, cfg.k, cfg.input, cfg.output, cfg.a_layout, cfg.b_layout, cfg.epilogue
        )
    };
    let c_len = cfg.c_len();
    if let Some(i) = out[..c_len].iter().position(|v| !v.value().is_finite()) {
        let unwritten = out[..c_len].iter().filter(|v| !v.value().is_finite()).count();
        return Err(format!(
            "{}: C[{}, {}] is {} ({unwritten} of {c_len} elements not finite: unwritten?)",
            what(),
            i / cfg.n,
            i % cfg.n,
            out[i].value()
        ));
    }
    if let Some(i) = out[c_len..].iter().position(|v| !v.value().is_nan()) {
        return Err(format!("{}: guard element {i} past the end of C was written", what()));
    }
    let pts = points(rng, cfg, check);
    let av: Vec<f64> = ops.a.iter().map(|x| x.value()).collect();
    let bv: Vec<f64> = ops.b.iter().map(|x| x.value()).collect();
    let biasv: Option<Vec<f64>> = ops.bias.as_ref().map(|v| v.iter().map(|&x| x as f64).collect());
    let reference = reference_gemm_at(cfg, &av, &bv, biasv.as_deref(), &pts);
    let got: Vec<f64> = pts.iter().map(|&(r, c)| out[r * cfg.n + c].value()).collect();
    let err = relative_error_floored(&got, &reference);
    let limit = threshold(cfg.output);
    if err < limit {
        return Ok(err);
    }
    let (worst, _) = got
        .iter()
        .zip(&reference)
        .enumerate()
        .map(|(i, (g, r))| (i, (g - r).abs()))
        .fold((0, -1.0), |best, x| if x.1 > best.1 { x } else { best });
    let (r, c) = pts[worst];
    Err(format!(
        "{}: relative error {err:.3e} >= {limit:.0e} over {} points; worst C[{r}, {c}] = {} vs reference {}",
        what(),
        pts.len(),
        got[worst],
        reference[worst]
    ))
}

/// Every (input, output, layouts, epilogue, tile) on two shapes: one on the 16-byte path
/// (M, N not multiples of either tile, K = 72 not a multiple of 32) and one whose rows are not
/// 16-byte aligned (odd M, N, K: element loads, element stores).
fn every_combination(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("gemm_every_combination");
    let mut worst: f64 = 0.0;
    let mut count = 0;
    for (m, n, k) in [(136, 200, 72), (75, 93, 41)] {
        for input in INPUTS {
            for output in OUTPUTS {
                for (al, bl) in LAYOUTS {
                    for epilogue in EPILOGUES {
                        for tile in TILES {
                            let cfg = GemmConfig::new(m, n, k)
                                .input(input)
                                .output(output)
                                .layouts(al, bl)
                                .epilogue(epilogue)
                                .tile(tile);
                            let err = run(cx, &mut rng, cfg, Check::Auto)?;
                            worst = worst.max(err / threshold(output));
                            count += 1;
                        }
                    }
                }
            }
        }
    }
    println!("    {count} problems, worst error / threshold {worst:.3}");
    Ok(())
}

/// Ones, tiny and exact-tile shapes in every layout, both tiles, f32 output (tight threshold).
fn edge_shapes(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("gemm_edge_shapes");
    let shapes = [
        (1, 1, 1),
        (1, 1, 300),
        (1, 300, 1),
        (300, 1, 1),
        (1, 1, 8),
        (2, 3, 5),
        (7, 9, 17),
        (8, 8, 8),
        (16, 8, 16),
        (64, 64, 32),
        (128, 128, 32),
        (129, 129, 33),
        (127, 65, 31),
        (200, 264, 264),
        (256, 256, 520),
    ];
    for (m, n, k) in shapes {
        for (al, bl) in LAYOUTS {
            for tile in TILES {
                let epilogue = if (m + n + k) % 2 == 0 {
                    Epilogue::BiasGelu
                } else {
                    Epilogue::None
                };
                let cfg = GemmConfig::new(m, n, k)
                    .output(OutputType::F32)
                    .layouts(al, bl)
                    .epilogue(epilogue)
                    .tile(tile);
                run(cx, &mut rng, cfg, Check::Auto)?;
            }
        }
    }
    // One f16 pass over the ones, through the 16-bit outputs' element stores.
    for (m, n, k) in [(1, 1, 1), (1, 7, 3), (5, 1, 9)] {
        let cfg = GemmConfig::new(m, n, k).input(InputType::F16).output(OutputType::F16);
        run(cx, &mut rng, cfg, Check::Auto)?;
    }
    Ok(())
}

/// Square problems with the heuristic tile: 256 .. 4096 (sampled above 1024^2 outputs).
fn square_shapes(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("gemm_square");
    let cases = [
        (
            256,
            Layout::RowMajor,
            Layout::RowMajor,
            OutputType::Bf16,
            InputType::Bf16,
        ),
        (
            512,
            Layout::Transposed,
            Layout::RowMajor,
            OutputType::F32,
            InputType::F16,
        ),
        (
            1024,
            Layout::RowMajor,
            Layout::Transposed,
            OutputType::Bf16,
            InputType::Bf16,
        ),
        (
            2048,
            Layout::Transposed,
            Layout::Transposed,
            OutputType::F16,
            InputType::F16,
        ),
        (
            4096,
            Layout::RowMajor,
            Layout::RowMajor,
            OutputType::Bf16,
            InputType::Bf16,
        ),
    ];
    for (s, al, bl, output, input) in cases {
        let cfg = GemmConfig::new(s, s, s).input(input).output(output).layouts(al, bl);
        let err = run(cx, &mut rng, cfg, Check::Auto)?;
        println!("    {s}^3 {input:?}->{output:?} {al:?}/{bl:?}: relative error {err:.2e}");
    }
    // 4096^3 with the bias + GeLU epilogue and the other tile, forced.
    let cfg = GemmConfig::new(4096, 4096, 4096)
        .epilogue(Epilogue::BiasGelu)
        .tile(TileConfig::T64x64);
    run(cx, &mut rng, cfg, Check::Auto)?;
    Ok(())
}

/// Skinny outputs (decode-like M, tall-thin N) with the heuristic tile.
fn skinny_shapes(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("gemm_skinny");
    let cases = [
        (1, 4096, 4096, Layout::RowMajor, Layout::RowMajor),
        (1, 4096, 4096, Layout::Transposed, Layout::Transposed),
        (16, 4096, 4096, Layout::RowMajor, Layout::Transposed),
        (64, 12288, 1024, Layout::RowMajor, Layout::RowMajor),
        (4096, 64, 1024, Layout::Transposed, Layout::RowMajor),
        (4096, 1, 512, Layout::RowMajor, Layout::RowMajor),
        (3, 5000, 777, Layout::RowMajor, Layout::RowMajor),
    ];
    for (m, n, k, al, bl) in cases {
        let cfg = GemmConfig::new(m, n, k).layouts(al, bl).epilogue(Epilogue::Bias);
        let tile = cfg.resolve_tile(cx.info().sm_count);
        ensure(tile == TileConfig::T64x64, || {
            format!("{m}x{n}x{k}: heuristic chose {tile:?}")
        })?;
        run(cx, &mut rng, cfg, Check::Auto)?;
    }
    Ok(())
}

/// The grid-stride test kernel: 7 blocks cover 25..48 tiles each, so every block runs the
/// tile loop several times and reuses its shared stages across tiles.
fn grid_stride(cx: &Context) -> Result<(), String> {
    let mut rng = fresh_rng("gemm_grid_stride");
    let name = "gemm_test_grid_stride_bf16_64x64";
    cx.set_max_dynamic_smem(name, TILE_64X64.smem_bytes()).map_err(fail)?;
    let f = cx.function(name).map_err(fail)?;
    for ((m, n, k), (al, bl)) in [(300, 260, 100), (320, 448, 64), (77, 500, 45)]
        .into_iter()
        .zip(LAYOUTS)
    {
        let cfg = GemmConfig::new(m, n, k)
            .output(OutputType::F32)
            .layouts(al, bl)
            .epilogue(Epilogue::Gelu)
            .tile(TileConfig::T64x64);
        let ops = operands::<bf16>(&mut rng, &cfg);
        let a = cx.upload(&ops.a).map_err(fail)?;
        let b = cx.upload(&ops.b).map_err(fail)?;
        let c = cx.upload(&vec![f32::NAN; cfg.c_len() + GUARD]).map_err(fail)?;
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let p = GemmParamsArg(gemm.params(a.addr(), b.addr(), c.addr(), 0));
        let mut lc = gemm.launch_config();
        lc.grid_dim = (7, 1, 1);
        let s = cx.default_stream();
        let mut lb = s.raw().launch_builder(&f);
        lb.arg(&p);
        // SAFETY: the buffers match the parameters and outlive the synchronization below.
        unsafe { lb.launch(lc) }.map_err(fail)?;
        s.synchronize().map_err(fail)?;
        let out = c.download().map_err(fail)?;
        verify(&mut rng, &cfg, &ops, &out, Check::Auto, "grid-stride 64x64")?;
    }
    Ok(())
}

/// Every launch-time refusal names what is wrong, and nothing is launched.
fn validation(cx: &Context) -> Result<(), String> {
    let cfg = GemmConfig::new(32, 48, 16);
    let gemm = Gemm::new(cx, cfg).map_err(fail)?;
    let s = cx.default_stream();
    let a = cx.alloc_zeros::<bf16>(cfg.a_len()).map_err(fail)?;
    let b = cx.alloc_zeros::<bf16>(cfg.b_len()).map_err(fail)?;
    let short_a = cx.alloc_zeros::<bf16>(cfg.a_len() - 1).map_err(fail)?;
    let a16 = cx.alloc_zeros::<f16>(cfg.a_len()).map_err(fail)?;
    let b16 = cx.alloc_zeros::<f16>(cfg.b_len()).map_err(fail)?;
    let mut c = cx.alloc_zeros::<bf16>(cfg.c_len()).map_err(fail)?;
    let mut c32 = cx.alloc_zeros::<f32>(cfg.c_len()).map_err(fail)?;
    let mut short_c = cx.alloc_zeros::<bf16>(cfg.c_len() - 1).map_err(fail)?;
    let bias = cx.alloc_zeros::<f32>(cfg.n).map_err(fail)?;
    let expect = |r: cusync::Result<()>, words: &[&str]| -> Result<(), String> {
        match r {
            Ok(()) => Err(format!("launch accepted; expected an error containing {words:?}")),
            Err(cusync::Error::InvalidArgument(msg)) => ensure(words.iter().all(|w| msg.contains(w)), || {
                format!("message {msg:?} lacks one of {words:?}")
            }),
            Err(e) => Err(format!("expected InvalidArgument, got {e}")),
        }
    };
    expect(
        gemm.launch(&s, &short_a, &b, &mut c, None),
        &["A buffer too small", "511"],
    )?;
    expect(
        gemm.launch(&s, &a, &b, &mut short_c, None),
        &["C buffer too small", "[M, N] = [32, 48]"],
    )?;
    expect(
        gemm.launch(&s, &a16, &b16, &mut c, None),
        &["dtype mismatch", "bf16 inputs", "f16"],
    )?;
    expect(
        gemm.launch(&s, &a, &b, &mut c32, None),
        &["dtype mismatch", "bf16 output", "f32"],
    )?;
    expect(gemm.launch(&s, &a, &b, &mut c, Some(&bias)), &["does not read one"])?;
    let with_bias = Gemm::new(cx, cfg.epilogue(Epilogue::BiasGelu)).map_err(fail)?;
    expect(
        with_bias.launch(&s, &a, &b, &mut c, None),
        &["bias vector", "none was given"],
    )?;
    let short_bias = cx.alloc_zeros::<f32>(cfg.n - 1).map_err(fail)?;
    expect(
        with_bias.launch(&s, &a, &b, &mut c, Some(&short_bias)),
        &["bias buffer too small"],
    )?;
    match Gemm::new(cx, GemmConfig::new(0, 4, 4)) {
        Err(cusync::Error::InvalidArgument(msg)) => ensure(msg.contains("dimension M is 0"), || msg.clone())?,
        other => return Err(format!("M = 0 accepted or wrong error: {other:?}")),
    }
    // The valid launch goes through.
    gemm.launch(&s, &a, &b, &mut c, None).map_err(fail)?;
    s.synchronize().map_err(fail)
}

/// `time_gemm` runs and reports; cuBLAS (when libcublas loads) agrees with the reference on
/// two layouts and is timed the same way, side by side.
fn timing_and_cublas(cx: &Context) -> Result<(), String> {
    use cusync::baselines::cublas::{cublas_present, time_cublas_gemm, Cublas};
    let opts = TimingOptions {
        warmup: 3,
        iters: 10,
        rotate: true,
    };
    let cfg = GemmConfig::new(2048, 2048, 2048);
    let ms = time_gemm(cx, &cfg, opts).map_err(fail)?;
    ensure(ms > 0.0 && ms < 1000.0, || format!("time_gemm gave {ms} ms"))?;
    println!(
        "    ours 2048^3 bf16 ({:?}): {ms:.3} ms, {:.1} TFLOP/s",
        cfg.resolve_tile(cx.info().sm_count),
        cfg.flops() / ms / 1e9
    );
    if !cublas_present() {
        println!("    *** libcublas not loadable here: cuBLAS baseline NOT checked ***");
        return Ok(());
    }
    let mut rng = fresh_rng("gemm_cublas");
    let s = cx.default_stream();
    let blas = Cublas::new(&s).map_err(fail)?;
    for (al, bl, output) in [
        (Layout::RowMajor, Layout::RowMajor, OutputType::Bf16),
        (Layout::Transposed, Layout::Transposed, OutputType::F32),
        (Layout::RowMajor, Layout::Transposed, OutputType::Bf16),
    ] {
        let cfg = GemmConfig::new(96, 160, 200).layouts(al, bl).output(output);
        let ops = operands::<bf16>(&mut rng, &cfg);
        let a = cx.upload(&ops.a).map_err(fail)?;
        let b = cx.upload(&ops.b).map_err(fail)?;
        let err = match output {
            OutputType::F32 => {
                let mut c = cx.upload(&vec![f32::NAN; cfg.c_len() + GUARD]).map_err(fail)?;
                blas.gemm(&cfg, &a, &b, &mut c).map_err(fail)?;
                s.synchronize().map_err(fail)?;
                verify(
                    &mut rng,
                    &cfg,
                    &ops,
                    &c.download().map_err(fail)?,
                    Check::Auto,
                    "cuBLAS",
                )?
            }
            _ => {
                let mut c = cx.upload(&vec![bf16::NAN; cfg.c_len() + GUARD]).map_err(fail)?;
                blas.gemm(&cfg, &a, &b, &mut c).map_err(fail)?;
                s.synchronize().map_err(fail)?;
                verify(
                    &mut rng,
                    &cfg,
                    &ops,
                    &c.download().map_err(fail)?,
                    Check::Auto,
                    "cuBLAS",
                )?
            }
        };
        println!("    cuBLAS {al:?}/{bl:?} -> {output:?}: relative error {err:.2e}");
    }
    let ms_blas = time_cublas_gemm(cx, &cfg, opts).map_err(fail)?;
    println!(
        "    cuBLAS 2048^3 bf16: {ms_blas:.3} ms, {:.1} TFLOP/s (ours / cuBLAS time = {:.2})",
        cfg.flops() / ms_blas / 1e9,
        ms / ms_blas
    );
    Ok(())
}

/// Whether this device runs path 2; if not, says so loudly (the test then checks nothing).
pub(crate) fn path2_here(cx: &Context) -> bool {
    let ok = gemm_sm90::device_supports(cx);
    if !ok {
        println!(
            "    *** path 2 NOT checked: device sm_{}{} with {} PTX (needs sm_90 + sm_90a) ***",
            cx.info().major,
            cx.info().minor,
            cusync::kernels::PTX_ARCH
        );
    }
    ok
}

/// Path 2 on every (input, output, layouts, epilogue, path-2 tile), on two TMA-loadable
/// shapes with K not a multiple of 64 and M, N not multiples of the tiles: each launch must run
/// path 2, leave its error slot clean and match the reference.
fn path2_every_combination(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_every_combination");
    let mut worst: f64 = 0.0;
    let mut count = 0;
    for (m, n, k) in [(136, 200, 72), (264, 520, 200)] {
        for input in INPUTS {
            for output in OUTPUTS {
                for (al, bl) in LAYOUTS {
                    for epilogue in EPILOGUES {
                        for wg in [WgTile::T128x256, WgTile::T128x192, WgTile::T128x128] {
                            let cfg = GemmConfig::new(m, n, k)
                                .input(input)
                                .output(output)
                                .layouts(al, bl)
                                .epilogue(epilogue)
                                .wg_tile(wg);
                            let (err, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
                            ensure(path2, || format!("{m}x{n}x{k} {al:?}/{bl:?}: path 2 was not used"))?;
                            worst = worst.max(err / threshold(output));
                            count += 1;
                        }
                    }
                }
            }
        }
    }
    println!("    {count} path-2 problems, worst error / threshold {worst:.3}");
    Ok(())
}

/// Path 2 on edge shapes (M = 1, N or K = 8, K not a multiple of 64, single rows and columns
/// of tiles, 16384-long sides) in every layout; where TMA cannot load an operand (a leading
/// dimension not a multiple of 8) the launch must fall back to path 1, still correct.
fn path2_edges(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_edges");
    let shapes = [
        (1, 8, 8),
        (8, 8, 8),
        (2, 16, 24),
        (1, 256, 4096),
        (1, 6144, 1032),
        (127, 264, 1032),
        (129, 257, 65),
        (16384, 8, 64),
        (8, 16384, 40),
        (41, 48, 41),
    ];
    let (mut on2, mut on1) = (0, 0);
    for (m, n, k) in shapes {
        for (al, bl) in LAYOUTS {
            let epilogue = if (m + n + k) % 2 == 0 {
                Epilogue::BiasGelu
            } else {
                Epilogue::Bias
            };
            // Path 2 under test: the skinny kernels (the default for some of these) off.
            let cfg = GemmConfig::new(m, n, k)
                .output(OutputType::F32)
                .layouts(al, bl)
                .epilogue(epilogue)
                .skinny(false);
            let (lda, ldb) = cfg.leading_dims();
            let expect = lda % 8 == 0 && ldb % 8 == 0;
            let (_, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
            ensure(path2 == expect, || {
                format!("{m}x{n}x{k} {al:?}/{bl:?} (lda {lda}, ldb {ldb}): path 2 used = {path2}, expected {expect}")
            })?;
            if path2 {
                on2 += 1;
            } else {
                on1 += 1;
            }
        }
    }
    ensure(on1 > 0 && on2 > 0, || {
        format!("{on2} on path 2, {on1} fell back: both must occur")
    })?;
    println!("    {on2} problems on path 2, {on1} fell back to path 1 (unaligned rows), all correct");
    Ok(())
}

/// Path 2 on issue 3's big shapes (sampled rows and columns): 8192^3, the GPT-3 MLP GeMM1 at
/// B = 1 with GeLU and GeMM2 at B = 2048, 16384 x 8192 x 8192 in the K-major B layout.
fn path2_large(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_large");
    let cases = [
        GemmConfig::new(8192, 8192, 8192),
        GemmConfig::new(1, 6144, 12288).epilogue(Epilogue::Gelu),
        GemmConfig::new(2048, 12288, 6144),
        GemmConfig::new(16384, 8192, 8192).layouts(Layout::RowMajor, Layout::Transposed),
        // The 128 x 192 tile's MLP shapes (whole waves), one with the tile forced on a
        // transposed B (one K-major box of 192 rows).
        GemmConfig::new(512, 6144, 12288).epilogue(Epilogue::Gelu),
        GemmConfig::new(256, 12288, 6144),
        GemmConfig::new(1000, 6144, 4096)
            .layouts(Layout::Transposed, Layout::Transposed)
            .wg_tile(WgTile::T128x192),
    ];
    for cfg in cases {
        // Path 2 under test: the skinny kernels (B = 1's default) off.
        let cfg = cfg.skinny(false);
        let (err, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
        ensure(path2, || format!("{}x{}x{}: path 2 was not used", cfg.m, cfg.n, cfg.k))?;
        let tile = Gemm::new(cx, cfg).map_err(fail)?.path2().map(|k| k.tile().name());
        println!(
            "    {}x{}x{} {:?} ({tile:?}): relative error {err:.2e}",
            cfg.m, cfg.n, cfg.k, cfg.epilogue
        );
    }
    Ok(())
}

/// Path 2 with split-K: forced factors (2, 3, 7, and more splits than some tiles have rows)
/// and the heuristic's own choice on the MLP's small-batch shapes, every epilogue, f32 and
/// bf16 outputs, K not a multiple of 64; each problem launched twice on poisoned outputs, both
/// matching the f64 reference and bitwise equal to each other (the partials are summed in
/// split order, whichever unit arrives last).
fn path2_split_k(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_split_k");
    let cases = [
        (GemmConfig::new(1, 264, 1000).epilogue(Epilogue::BiasGelu), Some(2)),
        (GemmConfig::new(300, 200, 4104).output(OutputType::F32), Some(3)),
        (GemmConfig::new(129, 520, 2056).epilogue(Epilogue::Gelu), Some(7)),
        (
            GemmConfig::new(64, 136, 1032)
                .layouts(Layout::Transposed, Layout::Transposed)
                .epilogue(Epilogue::Bias),
            Some(16),
        ),
        (
            GemmConfig::new(200, 520, 2100)
                .epilogue(Epilogue::BiasGelu)
                .wg_tile(WgTile::T128x192),
            Some(5),
        ),
        (GemmConfig::new(64, 6144, 12288).epilogue(Epilogue::Gelu), None),
        (GemmConfig::new(128, 4096, 8192), None),
        (GemmConfig::new(300, 1024, 8200).epilogue(Epilogue::Gelu), None),
    ];
    for (cfg, forced) in cases {
        // Stream-K off: plain launches would otherwise take the stream-K plan instead.
        let cfg = match forced {
            Some(s) => cfg.split_k(s),
            None => cfg,
        }
        .stream_k(false);
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let splits = gemm.path2().map_or(1, |k| k.split_k());
        ensure(splits > 1, || {
            format!("{}x{}x{}: no split-K ({forced:?})", cfg.m, cfg.n, cfg.k)
        })?;
        launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, "split-K")?;
        println!(
            "    {}x{}x{} {:?} split-K {splits} ({}): correct, two launches bitwise equal",
            cfg.m,
            cfg.n,
            cfg.k,
            cfg.epilogue,
            if forced.is_some() { "forced" } else { "chosen" }
        );
    }
    Ok(())
}

/// Launches `gemm` twice on fresh poisoned outputs with the same random operands of input
/// type `I`: both must match the f64 reference (`what` names the mode in errors) and be
/// bitwise equal to each other (partial tiles are summed in a fixed order, whichever unit
/// arrives last).
fn launch_twice_bitwise<I: TestIn + Element>(
    cx: &Context,
    rng: &mut StdRng,
    gemm: &Gemm,
    what: &str,
) -> Result<(), String> {
    let cfg = *gemm.config();
    let ops = operands::<I>(rng, &cfg);
    let a = cx.upload(&ops.a).map_err(fail)?;
    let b = cx.upload(&ops.b).map_err(fail)?;
    let bias = match &ops.bias {
        Some(v) => Some(cx.upload(v).map_err(fail)?),
        None => None,
    };
    let stream = cx.default_stream();
    let mut outs = Vec::new();
    for _ in 0..2 {
        let err = match cfg.output {
            OutputType::F32 => {
                let mut c = cx.upload(&vec![f32::NAN; cfg.c_len() + GUARD]).map_err(fail)?;
                gemm.launch(&stream, &a, &b, &mut c, bias.as_ref()).map_err(fail)?;
                stream.synchronize().map_err(fail)?;
                let out = c.download().map_err(fail)?;
                let e = verify(rng, &cfg, &ops, &out, Check::Auto, what)?;
                outs.push(out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>());
                e
            }
            _ => {
                let mut c = cx
                    .upload(&vec![<bf16 as TestOut>::POISON; cfg.c_len() + GUARD])
                    .map_err(fail)?;
                gemm.launch(&stream, &a, &b, &mut c, bias.as_ref()).map_err(fail)?;
                stream.synchronize().map_err(fail)?;
                let out = c.download().map_err(fail)?;
                let e = verify(rng, &cfg, &ops, &out, Check::Auto, what)?;
                outs.push(out.iter().map(|v| v.to_bits() as u32).collect::<Vec<u32>>());
                e
            }
        };
        if let Some(k) = gemm.path2() {
            k.errors().check().map_err(fail)?;
        }
        ensure(err.is_finite(), || format!("error {err}"))?;
    }
    ensure(outs[0] == outs[1], || {
        format!("{}x{}x{} {what}: two launches differ", cfg.m, cfg.n, cfg.k)
    })
}

/// Path 2 with stream-K: forced on shapes whose ranges split tiles two and more ways, with
/// data-parallel tiles before the stream-K ones (more than two waves of tiles), edge tiles, K
/// not a multiple of 64, both tiles, transposed operands, every epilogue, f32 and bf16
/// outputs; and the heuristic's choice on the GPT-3 MLP's small-batch shapes (M <= 256).
/// Each launched twice on poisoned outputs: correct against the f64 reference and bitwise
/// equal (the partials are summed in slot order).
fn path2_stream_k(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_stream_k");
    // Stream-K needs at least 4 K-steps per range (132 ranges): long K on the small ones, so
    // their tiles are split 10 to 45 ways.
    let forced = [
        GemmConfig::new(1, 264, 20000).epilogue(Epilogue::BiasGelu),
        GemmConfig::new(300, 200, 16392).output(OutputType::F32),
        GemmConfig::new(129, 520, 4104)
            .epilogue(Epilogue::Gelu)
            .wg_tile(WgTile::T128x128),
        GemmConfig::new(64, 520, 16400)
            .layouts(Layout::Transposed, Layout::Transposed)
            .epilogue(Epilogue::Bias),
        GemmConfig::new(700, 1000, 6000)
            .output(OutputType::F32)
            .wg_tile(WgTile::T128x192),
        // 40 x 9 = 360 tiles of 128x128 (2.7 waves): a wave of whole tiles, then stream-K.
        GemmConfig::new(5100, 1100, 700).wg_tile(WgTile::T128x128),
        GemmConfig::new(4000, 2300, 1000)
            .layouts(Layout::Transposed, Layout::RowMajor)
            .epilogue(Epilogue::Gelu),
    ];
    // The unswapped heuristic's choice on one row tile (M <= 64 runs swapped by default).
    let chosen = [
        GemmConfig::new(1, 6144, 12288).epilogue(Epilogue::Gelu).swap_ab(false),
        GemmConfig::new(64, 6144, 12288).epilogue(Epilogue::Gelu).swap_ab(false),
        GemmConfig::new(128, 12288, 6144),
    ];
    let cases = forced
        .iter()
        .map(|c| (c.stream_k(true), true))
        .chain(chosen.iter().map(|c| (*c, false)));
    for (cfg, is_forced) in cases {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let k = gemm.path2().ok_or("no path 2")?;
        let plan = k.stream_k().ok_or_else(|| {
            format!(
                "{}x{}x{}: no stream-K plan ({})",
                cfg.m,
                cfg.n,
                cfg.k,
                if is_forced { "forced" } else { "chosen" }
            )
        })?;
        launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, "stream-K")?;
        println!(
            "    {}x{}x{} {:?} {}: {} whole tiles + {} tiles over {} ranges ({} slots/tile, {}): correct, two launches bitwise equal",
            cfg.m,
            cfg.n,
            cfg.k,
            cfg.epilogue,
            k.tile().name(),
            plan.dp_tiles,
            plan.tiles - plan.dp_tiles,
            plan.sk_units,
            plan.slots_per_tile(),
            if is_forced { "forced" } else { "chosen" }
        );
    }
    Ok(())
}

/// Path 2 swapped (`C^T = B^T A^T` on the 128 x 64 tile, C written transposed), the default
/// for M <= 64 (but from 17 rows where the 64 x 96 tile's units fill the SMs): every (input, output, layouts, epilogue) on skinny shapes with M = 1, 8, 37
/// and 64, N not a multiple of 128 and K not of 64 (the launch must run swapped where TMA can
/// load the operands and fall back to path 1 where it cannot); each decomposition forced
/// (whole tiles, split-K 2 and 3, stream-K) and the GPT-3 MLP's B = 1 and 64 GeMMs as chosen,
/// each launched twice on poisoned outputs, correct against the f64 reference and bitwise
/// equal; a forced swap on a path-1 problem refused before launching.
fn path2_swapped(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_swapped");
    let mut worst: f64 = 0.0;
    let (mut swapped, mut fell_back) = (0, 0);
    for (m, n, k) in [(1, 200, 72), (8, 136, 1000), (37, 520, 200), (64, 264, 136)] {
        for input in INPUTS {
            for output in OUTPUTS {
                for (al, bl) in LAYOUTS {
                    for epilogue in EPILOGUES {
                        let cfg = GemmConfig::new(m, n, k)
                            .input(input)
                            .output(output)
                            .layouts(al, bl)
                            .epilogue(epilogue);
                        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
                        ensure(gemm.path2().is_some_and(|k| k.swapped()), || {
                            format!("{m}x{n}x{k}: path 2 is not set up swapped by default")
                        })?;
                        let (lda, ldb) = cfg.leading_dims();
                        let expect = lda % 8 == 0 && ldb % 8 == 0;
                        let (err, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
                        ensure(path2 == expect, || {
                            format!("{m}x{n}x{k} {al:?}/{bl:?}: path 2 used = {path2}, expected {expect}")
                        })?;
                        if path2 {
                            swapped += 1;
                        } else {
                            fell_back += 1;
                        }
                        worst = worst.max(err / threshold(output));
                    }
                }
            }
        }
    }
    println!("    {swapped} swapped problems, {fell_back} fell back to path 1, worst error / threshold {worst:.3}");
    let base = GemmConfig::new(64, 1000, 3000).wg_tile(WgTile::T128x64).swap_ab(true);
    let forced = [
        (
            "whole tiles",
            base.split_k(1).stream_k(false).epilogue(Epilogue::BiasGelu),
        ),
        ("split-K 2", base.split_k(2).output(OutputType::F32)),
        (
            "split-K 3",
            base.split_k(3)
                .layouts(Layout::Transposed, Layout::Transposed)
                .epilogue(Epilogue::Bias),
        ),
        ("stream-K", base.stream_k(true).epilogue(Epilogue::Gelu)),
    ];
    let chosen = [
        // The skinny kernels are these shapes' default; switched off, path 2 runs swapped.
        (
            "chosen",
            GemmConfig::new(1, 6144, 12288).epilogue(Epilogue::Gelu).skinny(false),
        ),
        // At B = 64 the 64 x 96 tile is the default (`path2_tile96`); swapped when asked.
        (
            "swap forced",
            GemmConfig::new(64, 6144, 12288).epilogue(Epilogue::Gelu).swap_ab(true),
        ),
        ("chosen", GemmConfig::new(1, 12288, 6144).skinny(false)),
        ("swap forced", GemmConfig::new(64, 12288, 6144).swap_ab(true)),
    ];
    launch_cases_on_tile(cx, &mut rng, forced.into_iter().chain(chosen), WgTile::T128x64, true)?;
    refused(
        cx,
        GemmConfig::new(8, 256, 64).tile(TileConfig::T64x64).swap_ab(true),
        "path 2 only",
        "a forced swap on a path-1 tile",
    )?;
    refused(
        cx,
        GemmConfig::new(8, 256, 64).wg_tile(WgTile::T128x192).swap_ab(true),
        "128x64 tile",
        "a forced swap on the 128x192 tile",
    )
}

/// Each `(what, cfg)` of `cases` must set up path 2 on `tile`, swapped or not as `swapped`
/// says, and be correct and bitwise equal over two launches ([`launch_twice_bitwise`]).
fn launch_cases_on_tile(
    cx: &Context,
    rng: &mut StdRng,
    cases: impl IntoIterator<Item = (&'static str, GemmConfig)>,
    tile: WgTile,
    swapped: bool,
) -> Result<(), String> {
    for (what, cfg) in cases {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let k = gemm.path2().ok_or("no path 2")?;
        ensure(k.swapped() == swapped && k.tile() == tile, || {
            format!(
                "{}x{}x{} ({what}): not {} on the {} tile",
                cfg.m,
                cfg.n,
                cfg.k,
                if swapped { "swapped" } else { "unswapped" },
                tile.name()
            )
        })?;
        let mode = cusync::ops::gemm_table::describe_path2(k);
        launch_twice_bitwise::<bf16>(cx, rng, &gemm, &mode)?;
        println!(
            "    {}x{}x{} {:?} ({what}): {mode}: correct, two launches bitwise equal",
            cfg.m, cfg.n, cfg.k, cfg.epilogue
        );
    }
    Ok(())
}

/// Every input, output, layout pair and epilogue on `shapes` with path-2 tile `tile` forced
/// (swapped or not as the library runs that tile): each launch must run that tile's entry point
/// where TMA can load the operands (path 1 otherwise) and match the reference on poisoned
/// outputs. Returns (problems on the tile, worst error / threshold).
fn forced_tile_every_combination(
    cx: &Context,
    rng: &mut StdRng,
    shapes: &[(usize, usize, usize)],
    tile: WgTile,
) -> Result<(usize, f64), String> {
    let (mut count, mut worst) = (0, 0f64);
    let suffix = format!("_{}", tile.name());
    for &(m, n, k) in shapes {
        for input in INPUTS {
            for output in OUTPUTS {
                for (al, bl) in LAYOUTS {
                    for epilogue in EPILOGUES {
                        let cfg = GemmConfig::new(m, n, k)
                            .input(input)
                            .output(output)
                            .layouts(al, bl)
                            .epilogue(epilogue)
                            .wg_tile(tile);
                        let (lda, ldb) = cfg.leading_dims();
                        let expect = lda % 8 == 0 && ldb % 8 == 0;
                        let (err, path2, name) = run_named(cx, rng, cfg, Check::Auto)?;
                        ensure(path2 == expect, || {
                            format!("{m}x{n}x{k} {al:?}/{bl:?}: path 2 used = {path2}, expected {expect}")
                        })?;
                        if path2 {
                            ensure(name.ends_with(&suffix), || {
                                format!("{m}x{n}x{k}: ran `{name}`, not the {} tile", tile.name())
                            })?;
                            count += 1;
                        }
                        worst = worst.max(err / threshold(output));
                    }
                }
            }
        }
    }
    Ok((count, worst))
}

/// The 64 x 96 tile (forced, and chosen; A's 64 rows a stage, row-major B in 32-column boxes with the
/// 64-byte swizzle): every input, output, layout pair and epilogue on small batches (M = 1, 17,
/// 64: the second consumer warpgroup has no rows) with N and K off the tile; the GPT-3 MLP's
/// B = 64 GeMMs it is meant for and runs by default (128 whole tiles, and 64 tiles split in
/// two with GeLU; and GeMM2 at B = 17, its first default row);
/// split-K 3 and stream-K forced. Each decomposition launched twice on poisoned outputs: correct
/// against the f64 reference and bitwise equal. M = 65 and a forced swap on it are refused.
fn path2_tile96(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_tile96");
    let shapes = [(1, 200, 72), (17, 520, 200), (64, 264, 136), (64, 296, 1000)];
    let (count, worst) = forced_tile_every_combination(cx, &mut rng, &shapes, WgTile::T64x96)?;
    println!("    {count} problems on the 64x96 tile, worst error / threshold {worst:.3}");
    let tile = GemmConfig::new(64, 1000, 3000).wg_tile(WgTile::T64x96).skinny(false);
    let cases = [
        // The default for these shapes (`choose_tile96`): nothing forced.
        ("GeMM2 B = 64, chosen", GemmConfig::new(64, 12288, 6144)),
        (
            "GeMM1 B = 64, chosen",
            GemmConfig::new(64, 6144, 12288).epilogue(Epilogue::Gelu),
        ),
        ("GeMM2 B = 17, chosen", GemmConfig::new(17, 12288, 6144)),
        ("split-K 3", tile.split_k(3).output(OutputType::F32)),
        (
            "stream-K",
            tile.stream_k(true)
                .layouts(Layout::Transposed, Layout::RowMajor)
                .epilogue(Epilogue::BiasGelu),
        ),
    ];
    launch_cases_on_tile(cx, &mut rng, cases, WgTile::T64x96, false)?;
    refused(
        cx,
        GemmConfig::new(65, 256, 64).wg_tile(WgTile::T64x96),
        "at most 64 rows, not 65",
        "M = 65 on the 64x96 tile",
    )?;
    refused(
        cx,
        GemmConfig::new(8, 256, 64).wg_tile(WgTile::T64x96).swap_ab(true),
        "128x64 tile",
        "a forced swap on the 64x96 tile",
    )
}

/// The 128 x 16 tile (forced; swapped, the batch as its 16 columns, 12 stages): every input,
/// output, layout pair and epilogue at M = 1, 8 and 16 with N and K off the tile (transposed
/// A gives a row-major B' in one 16-column box with the 32-byte swizzle); the GPT-3 MLP's B = 1
/// GeMMs whole, split in two and stream-K, and GeMM2 at B = 16, each launched twice on poisoned
/// outputs (correct and bitwise equal). Unforced, the MLP's GeMMs at B = 1, 8 and 16 take the
/// tile where `choose_tile16` lists the device (each launched twice likewise) and the skinny
/// kernels elsewhere. Pinned with no division forced, GeMM1 and GeMM2 at B = 1 take the
/// default's division (split-K 2, whole tiles). M = 17 and an unswapped launch on it are
/// refused.
fn path2_tile16(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_tile16");
    let shapes = [(1, 200, 72), (8, 136, 1000), (16, 264, 136)];
    let (count, worst) = forced_tile_every_combination(cx, &mut rng, &shapes, WgTile::T128x16)?;
    println!("    {count} swapped problems on the 128x16 tile, worst error / threshold {worst:.3}");
    let t16 = |m, n, k| GemmConfig::new(m, n, k).wg_tile(WgTile::T128x16).skinny(false);
    let cases = [
        ("GeMM2 B = 1, whole", t16(1, 12288, 6144).split_k(1).stream_k(false)),
        (
            "GeMM1 B = 1, split-K 2",
            t16(1, 6144, 12288).split_k(2).epilogue(Epilogue::Gelu),
        ),
        (
            "GeMM1 B = 1, stream-K",
            t16(1, 6144, 12288).stream_k(true).epilogue(Epilogue::BiasGelu),
        ),
        ("GeMM2 B = 16, chosen", t16(16, 12288, 6144).output(OutputType::F32)),
    ];
    launch_cases_on_tile(cx, &mut rng, cases, WgTile::T128x16, true)?;
    // Unforced, the GPT-3 MLP's small-batch GeMMs: on the devices `choose_tile16` lists, the
    // 128 x 16 tile in the skinny kernels' place (GeMM2's tiles whole, GeMM1's split in two,
    // at the device's measured depth); elsewhere the skinny kernels.
    let defaults = [1, 8, 16].into_iter().flat_map(|b| {
        [
            GemmConfig::new(b, 12288, 6144),
            GemmConfig::new(b, 6144, 12288).epilogue(Epilogue::Gelu),
        ]
    });
    let listed = gemm_sm90::tile16_default_on(cx.info());
    for cfg in defaults {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let on16 = gemm.path2().is_some_and(|k| k.tile() == WgTile::T128x16 && k.swapped());
        ensure(on16 == listed && gemm.skinny().is_some() == !listed, || {
            format!(
                "{}x{}x{} on {}: 128x16 default {on16}, skinny set up {} (device listed: {listed})",
                cfg.m,
                cfg.n,
                cfg.k,
                cx.info().name,
                gemm.skinny().is_some()
            )
        })?;
        if listed {
            let k = gemm.path2().ok_or("no path 2")?;
            let mode = cusync::ops::gemm_table::describe_path2(k);
            let depth = gemm_sm90::default_pipeline_depth(cx.info(), &cfg.swapped(), &WgTile::T128x16.shape());
            ensure(depth == 0 || k.pipeline_depth() == depth, || {
                format!(
                    "{mode}: depth {} where the device's measured depth is {depth}",
                    k.pipeline_depth()
                )
            })?;
            launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, &mode)?;
            println!(
                "    {}x{}x{} {:?} (default): {mode}: correct, two launches bitwise equal",
                cfg.m, cfg.n, cfg.k, cfg.epilogue
            );
        }
    }
    // Pinned with no division forced (`run gemm --kernel wg128x16`): the default's division,
    // GeMM1's split in two and GeMM2's whole tiles, not stream-K over every SM.
    for (cfg, splits) in [
        (t16(1, 6144, 12288).epilogue(Epilogue::Gelu), 2),
        (t16(1, 12288, 6144), 1),
    ] {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let k = gemm.path2().ok_or("no path 2 for the pinned 128x16 tile")?;
        let mode = cusync::ops::gemm_table::describe_path2(k);
        ensure(k.split_k() == splits && k.stream_k().is_none(), || {
            format!(
                "{}x{}x{} pinned on the 128x16 tile: {mode}, not split-K {splits}",
                cfg.m, cfg.n, cfg.k
            )
        })?;
        launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, &mode)?;
        println!(
            "    {}x{}x{} (tile pinned): {mode}: correct, two launches bitwise equal",
            cfg.m, cfg.n, cfg.k
        );
    }
    refused(cx, t16(17, 256, 64), "at most 16 rows", "M = 17 on the 128x16 tile")?;
    refused(
        cx,
        t16(8, 256, 64).swap_ab(false),
        "swapped products only",
        "an unswapped launch on the 128x16 tile",
    )
}

/// Path 2 in clusters of two blocks that multicast B's stage halves: forced on shapes with an
/// odd number of row tiles (the last pair's second block has no rows), edges in M, N and K,
/// f16 inputs, every epilogue, f32 output, and more pairs than resident clusters (the
/// persistent loop); chosen by default on a large GPT-3 MLP shape; refused with a clear error
/// where it cannot run (transposed B, the 128 x 128 tile, split-K). Each launched twice on
/// poisoned outputs: correct against the f64 reference and bitwise equal.
fn path2_clusters(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_clusters");
    let t = WgTile::T128x256;
    let forced = [
        GemmConfig::new(256, 512, 1024),
        GemmConfig::new(300, 1000, 2056).epilogue(Epilogue::BiasGelu),
        GemmConfig::new(129, 520, 700).output(OutputType::F32),
        GemmConfig::new(640, 1300, 1000)
            .input(InputType::F16)
            .epilogue(Epilogue::Gelu),
        GemmConfig::new(4100, 4000, 1032).epilogue(Epilogue::Bias),
        GemmConfig::new(1000, 256, 4104).layouts(Layout::Transposed, Layout::RowMajor),
    ];
    let chosen = [GemmConfig::new(2048, 12288, 6144)];
    let cases = forced
        .iter()
        .map(|c| (c.wg_tile(t).cluster(true), true))
        .chain(chosen.iter().map(|c| (*c, false)));
    for (cfg, is_forced) in cases {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let k = gemm.path2().ok_or("no path 2")?;
        ensure(k.clustered(), || {
            format!(
                "{}x{}x{}: not clustered ({})",
                cfg.m,
                cfg.n,
                cfg.k,
                if is_forced { "forced" } else { "chosen" }
            )
        })?;
        let grid = k.launch_config().grid_dim.0;
        ensure(grid % 2 == 0, || format!("cluster grid {grid} is odd"))?;
        if cfg.input == InputType::F16 {
            launch_twice_bitwise::<f16>(cx, &mut rng, &gemm, "clusters f16")?;
        } else {
            launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, "clusters")?;
        }
        println!(
            "    {}x{}x{} {:?} {:?} {} blocks in clusters of 2 ({}): correct, two launches bitwise equal",
            cfg.m,
            cfg.n,
            cfg.k,
            cfg.input,
            cfg.epilogue,
            grid,
            if is_forced { "forced" } else { "chosen" }
        );
    }
    let refused = [
        GemmConfig::new(512, 512, 512)
            .layouts(Layout::RowMajor, Layout::Transposed)
            .wg_tile(t),
        GemmConfig::new(512, 512, 512).wg_tile(WgTile::T128x128),
        GemmConfig::new(512, 512, 4096).wg_tile(t).split_k(2),
    ];
    for cfg in refused {
        match Gemm::new(cx, cfg.cluster(true)) {
            Err(e) => {
                let msg = e.to_string();
                ensure(msg.contains("cluster"), || format!("unclear refusal: {msg}"))?;
                println!("    refused before launch: {msg}");
            }
            Ok(_) => {
                return Err(format!(
                    "{}x{}x{} {:?}: forced clusters accepted",
                    cfg.m, cfg.n, cfg.k, cfg.b_layout
                ))
            }
        }
    }
    Ok(())
}

/// `cusync run gemm`'s library function: the default, path 2 with clusters and with stream-K
/// pinned, and path 1 each verify 256 sampled outputs against the f64 reference and time
/// beside cuBLAS; a path-2 choice on a path-1 kernel is refused before any launch.
fn run_gemm_command(cx: &Context) -> Result<(), String> {
    use cusync::ops::gemm_run::{run_gemm, GemmRunOptions};
    let path2 = path2_here(cx);
    let mut cases = vec![GemmRunOptions::default()];
    if path2 {
        cases.push(GemmRunOptions {
            kernel: Some("wg128x256".into()),
            cluster: Some(true),
            ..Default::default()
        });
        cases.push(GemmRunOptions {
            stream_k: Some(true),
            gelu: true,
            ..Default::default()
        });
    }
    cases.push(GemmRunOptions {
        kernel: Some("128x128".into()),
        ..Default::default()
    });
    for o in cases {
        let cfg = o.config(1000, 1536, 2056).map_err(fail)?;
        let report = run_gemm(cx, &cfg, 3, 7).map_err(fail)?;
        ensure(report.contains("verified: 256 sampled outputs"), || report.clone())?;
        println!("    {o:?}: {}", report.lines().nth(1).unwrap_or("").trim());
    }
    // The traced launch's events written out (the swapped skinny kernel's tiles), and read back.
    let dir = std::env::temp_dir().join(format!("cusync-run-gemm-trace-{}", std::process::id()));
    // The skinny kernels pinned on a small batch: verified and timed like the rest.
    let skinny = GemmRunOptions {
        skinny: Some(true),
        gelu: true,
        ..Default::default()
    };
    let report = run_gemm(cx, &skinny.config(8, 1536, 2056).map_err(fail)?, 3, 7).map_err(fail)?;
    ensure(
        report.contains("verified: 256 sampled outputs") && report.contains("skinny `gemm_skinny_bf16_m16`"),
        || report.clone(),
    )?;
    println!("    {skinny:?}: {}", report.lines().nth(1).unwrap_or("").trim());
    let swapped = GemmRunOptions {
        skinny: Some(false),
        ..Default::default()
    };
    let cfg = swapped.config(64, 1536, 1000).map_err(fail)?;
    let report = cusync::ops::gemm_run::run_gemm_traced(cx, &cfg, 3, 7, Some(&dir)).map_err(fail)?;
    ensure(report.contains("traced launch:") && report.contains("swapped"), || {
        report.clone()
    })?;
    let csv = dir.join("gemm64x1536x1000.csv");
    let trace = cusync::trace::Trace::load(&csv).map_err(fail)?;
    ensure(trace.events.len() == 12, || {
        format!(
            "{} events in {}, expected 12 (1536 / 128 tiles of C^T)",
            trace.events.len(),
            csv.display()
        )
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    println!("    traced run gemm: 12 tile events written and read back");
    let bad = GemmRunOptions {
        kernel: Some("128x128".into()),
        cluster: Some(true),
        ..Default::default()
    };
    ensure(bad.config(64, 64, 64).is_err(), || {
        "a path-2 choice on path 1 was accepted".into()
    })
}

/// The skinny kernels (`M <= 64`, the weight streamed through registers; `ops::gemm_skinny`):
/// every (input, output, epilogue) forced on shapes with M from 1 to 64 across the three
/// kernels' row counts (M <= 16 also on 128-column blocks), N not a multiple of the column
/// block and K not of the chunk; plans whose column blocks are summed from many blocks'
/// partials (small N, long K: up to every resident block on one column block); the GPT-3 MLP's
/// small-batch GeMMs as chosen by default (B <= 16), forced (B = 33, 64) and on 128-column
/// blocks (B = 1, 16); a B = 32 GeMM left to the default runs path 2.
/// Each is checked against the f64 reference on a NaN-poisoned C with a poisoned guard; the
/// many-contributor plans and the MLP shapes are launched twice and must be bitwise equal (the
/// last arrival sums partials in block order, whatever the timing). Shapes the kernels cannot
/// take are refused before anything is launched.
fn skinny_kernels(cx: &Context) -> Result<(), String> {
    use cusync::ops::gemm_skinny;
    let mut rng = fresh_rng("gemm_skinny_kernels");
    let mut worst: f64 = 0.0;
    let mut count = 0;
    for (m, n, k) in [
        (1, 200, 1000),
        (5, 64, 8),
        (16, 136, 4104),
        (17, 520, 2056),
        (37, 1000, 3000),
        (64, 264, 136),
    ] {
        // One m16 tile also on 128-column blocks.
        let widths: &[u32] = if m <= 16 { &[64, 128] } else { &[64] };
        for &cols in widths {
            for input in INPUTS {
                for output in OUTPUTS {
                    for epilogue in EPILOGUES {
                        let cfg = GemmConfig::new(m, n, k)
                            .input(input)
                            .output(output)
                            .epilogue(epilogue)
                            .skinny(true)
                            .skinny_cols(cols);
                        let (err, _, kernel) = run_named(cx, &mut rng, cfg, Check::Auto)?;
                        let expect = gemm_skinny::kernel_name(input, gemm_skinny::shape_for(&cfg));
                        ensure(kernel == expect, || {
                            format!("{m}x{n}x{k}: ran {kernel}, expected {expect}")
                        })?;
                        worst = worst.max(err / threshold(output));
                        count += 1;
                    }
                }
            }
        }
    }
    println!("    {count} forced problems on the skinny kernels, worst error / threshold {worst:.3}");
    // Many contributors per column block, then the MLP shapes as chosen.
    let many = [
        GemmConfig::new(8, 64, 65536).epilogue(Epilogue::BiasGelu),
        GemmConfig::new(8, 136, 65536).epilogue(Epilogue::Gelu).skinny_cols(128),
        GemmConfig::new(3, 128, 20000).output(OutputType::F32).skinny(true),
        GemmConfig::new(40, 192, 30000).input(InputType::F16).skinny(true),
        GemmConfig::new(64, 8, 100_000).epilogue(Epilogue::Bias).skinny(true),
    ];
    // The MLP's GeMMs: chosen by default for B <= 16 (forced where the 128 x 16 tile takes
    // their place, `gemm_sm90::choose_tile16`), forced for B = 33 and 64; on 128-column blocks
    // for B = 1 and 16.
    let chosen = [1usize, 8, 16, 33, 64].into_iter().flat_map(|b| {
        let force = |c: GemmConfig| {
            if b > 16 || gemm_sm90::choose_tile16(&c, cx.info()).is_some() {
                c.skinny(true)
            } else {
                c
            }
        };
        [
            force(GemmConfig::new(b, 6144, 12288).epilogue(Epilogue::Gelu)),
            force(GemmConfig::new(b, 12288, 6144)),
        ]
    });
    let wide = [1usize, 16].into_iter().flat_map(|b| {
        [
            GemmConfig::new(b, 6144, 12288)
                .epilogue(Epilogue::Gelu)
                .skinny_cols(128),
            GemmConfig::new(b, 12288, 6144).skinny_cols(128),
        ]
    });
    for cfg in many.into_iter().chain(chosen).chain(wide) {
        let gemm = Gemm::new(cx, cfg).map_err(fail)?;
        let s = gemm
            .skinny()
            .ok_or_else(|| format!("{}x{}x{}: the skinny kernels are not set up", cfg.m, cfg.n, cfg.k))?;
        let plan = s.plan();
        let most = (0..plan.col_blocks)
            .map(|cb| {
                let (first, last) = plan.contributors(cb);
                last - first + 1
            })
            .max()
            .unwrap_or(0);
        let what = format!(
            "{} ({} blocks, up to {most} per column block)",
            s.kernel_name(),
            plan.ctas
        );
        match cfg.input {
            InputType::Bf16 => launch_twice_bitwise::<bf16>(cx, &mut rng, &gemm, &what)?,
            InputType::F16 => launch_twice_bitwise::<f16>(cx, &mut rng, &gemm, &what)?,
        }
        println!(
            "    {}x{}x{} {:?} {:?}: {what}: correct, two launches bitwise equal",
            cfg.m, cfg.n, cfg.k, cfg.input, cfg.epilogue
        );
    }
    let wide = Gemm::new(cx, GemmConfig::new(32, 6144, 12288)).map_err(fail)?;
    ensure(wide.skinny().is_none(), || {
        "32x6144x12288: the skinny kernels were set up by default (the default stops at M = 16)".to_string()
    })?;
    for (cfg, needle) in [
        (GemmConfig::new(8, 200, 1001), "multiples of 8"),
        (GemmConfig::new(65, 256, 256), "M = 65"),
        (GemmConfig::new(17, 256, 256).skinny_cols(128), "M <= 16"),
        (
            GemmConfig::new(8, 256, 256).layouts(Layout::Transposed, Layout::RowMajor),
            "transposed",
        ),
    ] {
        let what = format!("{}x{}x{} skinny forced", cfg.m, cfg.n, cfg.k);
        refused(cx, cfg.skinny(true), needle, &what)?;
    }
    Ok(())
}

/// `--l2-promotion`: every promotion of the tensor maps runs path 2 and matches the reference,
/// swapped (M = 64: 128 x 64 tiles, stream-K) and unswapped (split-K and whole tiles), with the
/// maps the launch used carrying the forced promotion.
fn path2_every_l2_promotion(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    use cusync::ops::gemm_sm90::L2Promotion;
    let mut rng = fresh_rng("gemm_path2_every_l2_promotion");
    let mut worst: f64 = 0.0;
    for promotion in [
        L2Promotion::None,
        L2Promotion::B64,
        L2Promotion::B128,
        L2Promotion::B256,
    ] {
        for cfg in [
            GemmConfig::new(64, 1536, 704).swap_ab(true),
            GemmConfig::new(200, 520, 1000).split_k(2),
            GemmConfig::new(520, 768, 136),
        ] {
            let cfg = cfg.l2_promotion(promotion);
            let gemm = Gemm::new(cx, cfg).map_err(fail)?;
            let k = gemm.path2().ok_or_else(|| format!("{cfg:?}: no path-2 kernel"))?;
            ensure(k.promotion() == promotion, || {
                format!("{cfg:?}: the kernel took promotion {:?}", k.promotion())
            })?;
            let (err, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
            ensure(path2, || format!("{cfg:?}: path 2 was not used"))?;
            ensure(err <= threshold(cfg.output), || {
                format!("{cfg:?}: relative error {err:.2e}")
            })?;
            worst = worst.max(err / threshold(cfg.output));
        }
    }
    println!("    12 problems, worst error / threshold {worst:.3}");
    Ok(())
}

/// `--pipeline-depth`: launches that use only part of their tile's ring of stages match the
/// reference on every tile family the MLP's small batches run (the swapped 128 x 64 tile with
/// stream-K, the 64 x 96 tile split in two, a 128-row tile with split-K, whole tiles, a
/// cluster pair multicasting B), from the shallowest ring (2) to the whole one; the kernel
/// reports the depth it runs; and depths outside `2..=stages` are refused before any launch.
/// `run gemm --depth-sweep`'s report times every depth of a 9-stage ring and is refused on the
/// skinny kernels.
fn path2_every_pipeline_depth(cx: &Context) -> Result<(), String> {
    if !path2_here(cx) {
        return Err(cusync_tests::skip("no GeMM path 2 on this device or build"));
    }
    let mut rng = fresh_rng("gemm_path2_every_pipeline_depth");
    let mut worst: f64 = 0.0;
    let mut count = 0;
    for (cfg, depths) in [
        (GemmConfig::new(64, 1536, 704).swap_ab(true), &[2, 3, 4, 9][..]),
        (
            GemmConfig::new(48, 960, 1000)
                .wg_tile(WgTile::T64x96)
                .skinny(false)
                .split_k(2),
            &[2, 4, 7, 11][..],
        ),
        (GemmConfig::new(200, 520, 1000).split_k(2), &[2, 3][..]),
        (GemmConfig::new(520, 768, 136), &[2][..]),
        (
            GemmConfig::new(512, 1024, 512).wg_tile(WgTile::T128x256).cluster(true),
            &[3][..],
        ),
    ] {
        let stages = {
            let gemm = Gemm::new(cx, cfg).map_err(fail)?;
            let k = gemm.path2().ok_or_else(|| format!("{cfg:?}: no path-2 kernel"))?;
            k.tile().shape().stages
        };
        for &depth in depths {
            let cfg = cfg.pipeline_depth(depth);
            let gemm = Gemm::new(cx, cfg).map_err(fail)?;
            let k = gemm.path2().ok_or_else(|| format!("{cfg:?}: no path-2 kernel"))?;
            ensure(k.pipeline_depth() == depth.min(stages), || {
                format!("{cfg:?}: the kernel runs depth {}", k.pipeline_depth())
            })?;
            let (err, path2) = run_checked(cx, &mut rng, cfg, Check::Auto)?;
            ensure(path2, || format!("{cfg:?}: path 2 was not used"))?;
            ensure(err <= threshold(cfg.output), || {
                format!("{cfg:?}: relative error {err:.2e}")
            })?;
            worst = worst.max(err / threshold(cfg.output));
            count += 1;
        }
        for bad in [1, stages + 1] {
            let what = format!("{cfg:?}: depth {bad} of {stages} stages");
            refused(cx, cfg.pipeline_depth(bad), "pipeline depth", &what)?;
        }
    }
    println!("    {count} launches, worst error / threshold {worst:.3}");
    // `run gemm --depth-sweep`: a line per depth, each a positive time; refused on the skinny
    // kernels (no ring).
    let swept = GemmConfig::new(64, 1536, 704).swap_ab(true);
    let report = cusync::ops::gemm_run::depth_sweep_report(cx, &swept, 3, 1).map_err(fail)?;
    let times: Vec<f64> = report
        .lines()
        .filter(|l| l.trim_start().starts_with("depth"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.parse::<f64>().ok().filter(|v| v.fract() != 0.0))
        })
        .collect();
    ensure(times.len() == 8 && times.iter().all(|&t| t > 0.0), || {
        format!("the depth sweep of a 9-stage ring did not time depths 2..=9:\n{report}")
    })?;
    let skinny = cusync::ops::gemm_run::depth_sweep_report(cx, &GemmConfig::new(8, 12288, 6144).skinny(true), 3, 1);
    ensure(
        skinny.as_ref().is_err_and(|e| e.to_string().contains("ring of stages")),
        || format!("a depth sweep on the skinny kernels was not refused: {skinny:?}"),
    )?;
    println!("{report}");
    Ok(())
}

/// `Gemm::new` must refuse `cfg` (before any launch) with an error containing `needle`;
/// `what` names the case in the failure.
fn refused(cx: &Context, cfg: GemmConfig, needle: &str, what: &str) -> Result<(), String> {
    let r = Gemm::new(cx, cfg);
    ensure(r.as_ref().is_err_and(|e| e.to_string().contains(needle)), || {
        format!("{what} was not refused with `{needle}`: {r:?}")
    })
}
