//! The GPT-3 MLP of the CuSync paper in stream mode: `X[B,H] -> GeMM+GeLU with W1[H,F] ->
//! GeMM with W2[F,H]` (H = 12288, F = 6144 under 8-way tensor parallelism), bf16 in and out, f32
//! accumulation, and the comparisons the paper makes: StreamSync (the same kernels on one
//! stream, no synchronization code), each policy, and cuBLAS back to back, launched plainly and
//! as one CUDA graph. Other models' MLPs of the same structure are [`MlpModel`]s; Policy::Auto
//! is [`auto::choose`]: an [`MlpPlan`] (a policy and a tile order, or StreamSync where no
//! policy gains) from the wave model ([`auto_policy`]'s prediction) or from a short measured
//! trial, cached.
//!
//! Both GeMMs use one tile configuration, so RowSync's rows line up (the consumer's row tile
//! `x` reads the producer's row tile `x`). The stream-mode kernels are the unsynchronized
//! kernels' mainloop with the stage hooks compiled in, so their outputs are bitwise equal.

pub mod auto;
pub mod compare;
pub mod kernel;
pub mod plan;
pub mod plot;

use crate::baselines::cublas::{Cublas, CublasGraph};
use crate::error::{Error, Result};
use crate::ops::gemm::{Epilogue, Gemm, GemmConfig, GemmParamsArg, TileConfig};
use crate::ops::gemm_sm90::{TmaGemmParamsArg, WgTile};
use crate::runtime::{kernel_arg, Context, DeviceBuffer, Stream, TIMING_HOLD_NS};
use crate::stream::{StageConfig, StreamGraph, StreamRun, WaitKernelPolicy};
use crate::trace::TraceEvent;
pub use crate::verify::{first_difference, relative_error};
use cusync_shared::gemm::GemmParams;
use cusync_shared::order::TileOrder;
use cusync_shared::policy::{Dependency, PolicyKind};
use cusync_shared::Grid;
use half::bf16;
pub use kernel::MlpKernel;
pub use plan::MlpPlan;
use rand::{Rng, SeedableRng};

/// GPT-3's hidden size.
pub const GPT3_HIDDEN: usize = 12288;
/// GPT-3's MLP width per GPU under 8-way tensor parallelism (4H / 8).
pub const GPT3_FFN_TP8: usize = 6144;

/// The models whose MLP `cusync run mlp --model` and `cusync sweep mlp --model` run: each is
/// `X[B,H] -> GeMM+GeLU with W1[H,F] -> GeMM with W2[F,H]` at the model's sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MlpModel {
    /// GPT-3 175B under 8-way tensor parallelism: H = 12288, F = 4H / 8 = 6144 (the paper's).
    #[default]
    Gpt3,
    /// GPT-3 175B under 4-way tensor parallelism: H = 12288, F = 4H / 4 = 12288.
    Gpt3Tp4,
    /// LLaMA-2-7B's MLP sizes, one GPU: H = 4096, F = 11008. (LLaMA's MLP is gated,
    /// `SiLU(X W_g) * (X W_u)`, with a third matrix; here the paper's GeMM+GeLU -> GeMM
    /// structure runs on its sizes.)
    Llama7b,
}

impl MlpModel {
    /// Every model, in the order the command line lists them.
    pub const ALL: [MlpModel; 3] = [MlpModel::Gpt3, MlpModel::Gpt3Tp4, MlpModel::Llama7b];

    /// The command-line name ("gpt3", "gpt3-tp4", "llama7b").
    pub fn name(self) -> &'static str {
        match self {
            MlpModel::Gpt3 => "gpt3",
            MlpModel::Gpt3Tp4 => "gpt3-tp4",
            MlpModel::Llama7b => "llama7b",
        }
    }

    /// The name in tables and charts.
    pub fn label(self) -> &'static str {
        match self {
            MlpModel::Gpt3 => "GPT-3 (TP=8)",
            MlpModel::Gpt3Tp4 => "GPT-3 (TP=4)",
            MlpModel::Llama7b => "LLaMA-2-7B",
        }
    }

    /// `(H, F)`: columns of X and of the intermediate.
    pub fn sizes(self) -> (usize, usize) {
        match self {
            MlpModel::Gpt3 => (GPT3_HIDDEN, GPT3_FFN_TP8),
            MlpModel::Gpt3Tp4 => (GPT3_HIDDEN, 2 * GPT3_FFN_TP8),
            MlpModel::Llama7b => (LLAMA7B_HIDDEN, LLAMA7B_FFN),
        }
    }

    /// The MLP at batch `batch`.
    pub fn shape(self, batch: usize) -> MlpShape {
        let (hidden, ffn) = self.sizes();
        MlpShape { batch, hidden, ffn }
    }

    /// The model whose sizes `shape` has, if any.
    pub fn of_shape(shape: MlpShape) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.sizes() == (shape.hidden, shape.ffn))
    }

    /// Parses a command-line name (case-insensitive; "llama2-7b" and "gpt3-tp8" too).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "gpt3" | "gpt-3" | "gpt3-tp8" => Ok(MlpModel::Gpt3),
            "gpt3-tp4" | "gpt-3-tp4" => Ok(MlpModel::Gpt3Tp4),
            "llama7b" | "llama-7b" | "llama2-7b" | "llama-2-7b" => Ok(MlpModel::Llama7b),
            _ => Err(Error::InvalidArgument(format!(
                "unknown model `{s}`: use {}",
                Self::ALL.map(|m| m.name()).join(", ")
            ))),
        }
    }
}

/// LLaMA-2-7B's hidden size.
pub const LLAMA7B_HIDDEN: usize = 4096;
/// LLaMA-2-7B's MLP width.
pub const LLAMA7B_FFN: usize = 11008;

/// The MLP's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MlpShape {
    /// Rows of X (tokens).
    pub batch: usize,
    /// Columns of X and of the output.
    pub hidden: usize,
    /// Columns of the intermediate.
    pub ffn: usize,
}

impl MlpShape {
    /// The GPT-3 MLP at batch `batch`.
    pub fn gpt3(batch: usize) -> Self {
        Self {
            batch,
            hidden: GPT3_HIDDEN,
            ffn: GPT3_FFN_TP8,
        }
    }

    /// Floating-point operations of both GeMMs.
    pub fn flops(&self) -> f64 {
        4.0 * self.batch as f64 * self.hidden as f64 * self.ffn as f64
    }

    /// "GPT-3 (TP=8) MLP (H=12288, F=6144, bf16)", or "MLP (H=.., F=.., bf16)" for sizes no
    /// [`MlpModel`] has.
    pub fn label(&self) -> String {
        let model = MlpModel::of_shape(*self).map_or(String::new(), |m| format!("{} ", m.label()));
        format!("{model}MLP (H={}, F={}, bf16)", self.hidden, self.ffn)
    }
}

/// The stream-mode entry point for a tile configuration.
pub fn stream_kernel(tile: TileConfig) -> &'static str {
    match tile {
        TileConfig::T256x128 => "gemm_bf16_256x128_stream",
        TileConfig::T128x128 => "gemm_bf16_128x128_stream",
        TileConfig::T64x64 => "gemm_bf16_64x64_stream",
    }
}

/// The tile order both stages of the MLP graph walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlpOrder {
    /// Row by row (the paper's order for RowSync/TileSync): rows complete early, but each wave
    /// reads many weight columns.
    RowMajor,
    /// Column by column (what an unsynchronized launch does: blockIdx.x, the row tile, is
    /// fastest): weight columns are reused across rows from L2, but rows complete last.
    ColumnMajor,
    /// Column by column within bands of this many row tiles, band after band: weight reuse
    /// across the band's rows, and the band's rows complete as soon as the band is done.
    Banded(u32),
}

/// The banded column-major order as linear tile ids ([`Grid::linear`]): bands of `rows` row
/// tiles, band by band; within a band, column by column, rows within a column; split-K slices
/// adjacent.
pub fn banded_column_major(grid: Grid, rows: u32) -> Vec<u32> {
    let rows = rows.max(1);
    let mut order = Vec::with_capacity(grid.count() as usize);
    let mut band = 0;
    while band < grid.x {
        let end = (band + rows).min(grid.x);
        for y in 0..grid.y {
            for x in band..end {
                for z in 0..grid.z {
                    order.push(grid.linear(cusync_shared::TileIdx::new(x, y, z)));
                }
            }
        }
        band = end;
    }
    order
}

/// The tile order a stage of `grid` walks for `order`: a built-in [`TileOrder`] (computed on the
/// device), or, for bands narrower than the grid, a host buffer ([`banded_column_major`]). A band
/// that covers every row tile is column-major, so it takes the built-in order: a buffer's
/// global load would sit before each tile's first loads. (The bench's `Banded(8)` stages at
/// B = 1 and 1024 are such bands. The first-tile cost session 39 looked for here was the
/// bench's cold instruction caches: docs/perf-notes.md, session 40.) A skinny stage's blocks
/// take ranges of the weight, not tiles: no order applies.
pub fn stage_order(order: MlpOrder, grid: Grid, skinny: bool) -> (TileOrder, Option<Vec<u32>>) {
    match order {
        _ if skinny => (TileOrder::RowMajor, None),
        MlpOrder::RowMajor => (TileOrder::RowMajor, None),
        MlpOrder::ColumnMajor => (TileOrder::ColumnMajor, None),
        MlpOrder::Banded(rows) if rows.max(1) >= grid.x => (TileOrder::ColumnMajor, None),
        MlpOrder::Banded(rows) => (TileOrder::RowMajor, Some(banded_column_major(grid, rows))),
    }
}

/// The skinny kernel of one of the MLP's GeMMs (set up by [`Mlp::new`] for [`MlpKernel::Skinny`]).
fn skinny_of(g: &Gemm) -> Result<&crate::ops::gemm_skinny::SkinnyGemm> {
    g.skinny()
        .ok_or_else(|| Error::InvalidArgument("the MLP's skinny GeMM was not set up".into()))
}

/// One MLP on the device: weights, input, intermediate and output, and its two GeMMs.
pub struct Mlp<'cx> {
    cx: &'cx Context,
    shape: MlpShape,
    kernel: MlpKernel,
    gemm1: Gemm,
    gemm2: Gemm,
    x: DeviceBuffer<bf16>,
    w1: DeviceBuffer<bf16>,
    w2: DeviceBuffer<bf16>,
    h: DeviceBuffer<bf16>,
    y: DeviceBuffer<bf16>,
    stream: Stream,
    /// cuBLAS back to back captured as one CUDA graph over the buffers above (made by the first
    /// [`Mlp::run_cublas_graph`]).
    cublas_graph: Option<CublasGraph>,
}

/// `n` bf16 values uniform in `[-scale, scale)`.
pub(crate) fn random_bf16(rng: &mut impl Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
        .collect()
}

/// Refuses a stage pipeline depth the MLP's `kernel` cannot take, before anything is set up:
/// only path-2 stages have a ring, of `2..=` its stages.
fn check_stage_depth(kernel: MlpKernel, pipeline_depth: Option<u32>) -> Result<()> {
    let Some(depth) = pipeline_depth else {
        return Ok(());
    };
    match kernel {
        MlpKernel::Path2(t) => crate::ops::gemm_sm90::check_pipeline_depth(t, depth),
        other => Err(Error::InvalidArgument(format!(
            "MLP stages: a pipeline depth applies to path-2 stages (wg...), not {}",
            other.name()
        ))),
    }
}

impl<'cx> Mlp<'cx> {
    /// Uploads random inputs and weights (seeded by `seed`), NaN-poisons the outputs, and sets
    /// up both GeMMs with `kernel` (or [`MlpKernel::default_for`]: for B <= 16 the 128 x 16
    /// tile's stages on the H100 and the skinny kernels elsewhere, else path 2 where the
    /// device runs it). A path-2 kernel on a device without it
    /// is an `UnsupportedArch` error; the skinny kernels past B = 16 an `InvalidArgument`.
    pub fn new(cx: &'cx Context, shape: MlpShape, kernel: Option<MlpKernel>, seed: u64) -> Result<Self> {
        Self::with_pipeline_depth(cx, shape, kernel, seed, None)
    }

    /// As [`Mlp::new`], with both path-2 stages (and the StreamSync launches beside them) on
    /// `pipeline_depth` stages of their tile's ring (`GemmConfig::pipeline_depth`; None: the
    /// whole ring, [`crate::ops::gemm_sm90::whole_ring`], but the device's measured depth on
    /// the 128 x 16 tile). A depth with path-1 or skinny
    /// stages, or outside 2 to the ring's stages, is an `InvalidArgument` error.
    pub fn with_pipeline_depth(
        cx: &'cx Context,
        shape: MlpShape,
        kernel: Option<MlpKernel>,
        seed: u64,
        pipeline_depth: Option<u32>,
    ) -> Result<Self> {
        let kernel = kernel.unwrap_or_else(|| MlpKernel::default_for(cx, shape.batch, shape.ffn, shape.hidden));
        check_stage_depth(kernel, pipeline_depth)?;
        let cfg1 = GemmConfig::new(shape.batch, shape.ffn, shape.hidden).epilogue(Epilogue::Gelu);
        let cfg2 = GemmConfig::new(shape.batch, shape.hidden, shape.ffn);
        // StreamSync's plain launches run the stages' kernel: whole tiles (no stream-K, so the
        // same work units and bitwise equal outputs) and single blocks (no clusters: the
        // stream-mode stages have none, and StreamSync is "the same kernels, no sync code"),
        // swapped exactly when the stages are (the skinny tile: [`MlpKernel::is_swapped`]).
        let swap = kernel.is_swapped();
        let plain = |c: GemmConfig, t| path2_stage_config(c, t, swap, pipeline_depth);
        let (cfg1, cfg2) = match kernel {
            MlpKernel::Path1(t) => (cfg1.tile(t), cfg2.tile(t)),
            MlpKernel::Path2(t) => (plain(cfg1, t), plain(cfg2, t)),
            MlpKernel::Skinny => {
                if shape.batch > kernel::SKINNY_STAGE_MAX_BATCH {
                    return Err(Error::InvalidArgument(format!(
                        "the MLP's skinny stages take batches up to {}, not {}",
                        kernel::SKINNY_STAGE_MAX_BATCH,
                        shape.batch
                    )));
                }
                // StreamSync runs the stage kernel's shape: the same plan, bitwise equal.
                let cols = cusync_shared::skinny::SKINNY_STAGE_SHAPE.cols();
                (cfg1.skinny(true).skinny_cols(cols), cfg2.skinny(true).skinny_cols(cols))
            }
        };
        let (gemm1, gemm2) = (Gemm::new(cx, cfg1)?, Gemm::new(cx, cfg2)?);
        cx.set_max_dynamic_smem(kernel.stream_kernel(), kernel.smem_bytes())?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        // Weights scaled like a trained layer's (|w| ~ 1/sqrt(fan-in)) keep activations O(1).
        let (s1, s2) = (1.0 / (shape.hidden as f32).sqrt(), 1.0 / (shape.ffn as f32).sqrt());
        let nan = bf16::from_f32(f32::NAN);
        Ok(Self {
            cx,
            shape,
            kernel,
            gemm1,
            gemm2,
            x: cx.upload(&random_bf16(&mut rng, shape.batch * shape.hidden, 1.0))?,
            w1: cx.upload(&random_bf16(&mut rng, shape.hidden * shape.ffn, s1 * 1.7))?,
            w2: cx.upload(&random_bf16(&mut rng, shape.ffn * shape.hidden, s2 * 1.7))?,
            h: cx.upload(&vec![nan; shape.batch * shape.ffn])?,
            y: cx.upload(&vec![nan; shape.batch * shape.hidden])?,
            stream: cx.new_stream()?,
            cublas_graph: None,
        })
    }

    /// The sizes.
    pub fn shape(&self) -> MlpShape {
        self.shape
    }

    /// The kernel family and tile both GeMMs use.
    pub fn tile(&self) -> MlpKernel {
        self.kernel
    }

    /// Tile grids of the two GeMMs.
    pub fn grids(&self) -> (Grid, Grid) {
        let (m, f, h) = (self.shape.batch as u32, self.shape.ffn as u32, self.shape.hidden as u32);
        (self.kernel.grid(m, f), self.kernel.grid(m, h))
    }

    /// The split-K factor of each GeMM's stage: a path-2 GeMM's (its tiles' units are
    /// separate tickets), else 1.
    pub fn split_ks(&self) -> [u32; 2] {
        let split = |g: &Gemm| g.path2().map_or(1, |p| p.split_k().max(1));
        [split(&self.gemm1), split(&self.gemm2)]
    }

    /// Blocks' worth of work of each GeMM, for wave counts: its work units (tiles times the
    /// stage's split-K factor, [`Mlp::split_ks`]: one block per unit; a persistent path-2
    /// block takes several), or for the skinny kernels its ranges of the weight (one per
    /// resident block: exactly one wave each).
    pub fn work_blocks(&self) -> (u32, u32) {
        match (self.gemm1.skinny(), self.gemm2.skinny()) {
            (Some(s1), Some(s2)) if self.kernel.is_skinny() => (s1.plan().ctas, s2.plan().ctas),
            _ => {
                let (g1, g2) = self.grids();
                let [s1, s2] = self.split_ks();
                (g1.count() * s1, g2.count() * s2)
            }
        }
    }

    /// Blocks of the GeMM kernels one SM holds (occupancy API), for wave counts.
    pub fn blocks_per_sm(&self) -> Result<u32> {
        let k = self.kernel;
        self.cx.occupancy(k.stream_kernel(), k.threads(), k.smem_bytes())
    }

    /// Poisons H and Y with NaN (so a run that skips a tile cannot pass a check).
    pub fn poison(&mut self) -> Result<()> {
        let nan = bf16::from_f32(f32::NAN);
        self.h.fill(nan)?;
        self.y.fill(nan)
    }

    /// StreamSync: both unsynchronized GeMMs on one stream; returns device milliseconds.
    pub fn run_stream_sync(&mut self) -> Result<f32> {
        self.stream_sync([None, None])
    }

    /// StreamSync with tracing on: the same two unsynchronized GeMMs on one stream, each
    /// writing one [`TraceEvent`] per tile ([`Gemm::launch_traced`]) into a fresh buffer
    /// poisoned with 0xFF. Returns device milliseconds, the events (stage 0 = GeMM1, stage 1 =
    /// GeMM2, every tile's checked written) and the two kernels' tile grids.
    pub fn run_stream_sync_traced(&mut self) -> Result<(f32, Vec<TraceEvent>, [Grid; 2])> {
        let p1 = self.gemm1.check(&self.x, &self.w1, &self.h, None)?;
        let p2 = self.gemm2.check(&self.h, &self.w2, &self.y, None)?;
        let grids = [self.gemm1.trace_grid(&p1), self.gemm2.trace_grid(&p2)];
        let poisoned = |grid: Grid| -> Result<DeviceBuffer<u8>> {
            let mut b = crate::stream::trace_buffer(self.cx, grid.count() as usize)?;
            b.fill(0xFF)?;
            Ok(b)
        };
        let (mut t1, mut t2) = (poisoned(grids[0])?, poisoned(grids[1])?);
        let ms = self.stream_sync([Some(&mut t1), Some(&mut t2)])?;
        let mut events = self.gemm1.trace_events(&p1, &t1, 0)?;
        events.extend(self.gemm2.trace_events(&p2, &t2, 1)?);
        Ok((ms, events, grids))
    }

    /// A timed region's two events on `stream`, the start already recorded behind a hold of
    /// [`TIMING_HOLD_NS`] ([`Context::hold`]): what follows is queued while the GPU is busy.
    fn held_start(&self, stream: &Stream) -> Result<(crate::runtime::Event, crate::runtime::Event)> {
        let (start, end) = (self.cx.new_event()?, self.cx.new_event()?);
        self.cx.hold(stream, TIMING_HOLD_NS)?;
        stream.record(&start)?;
        Ok((start, end))
    }

    /// StreamSync, each GeMM traced into its buffer when given one.
    fn stream_sync(&mut self, [t1, t2]: [Option<&mut DeviceBuffer<u8>>; 2]) -> Result<f32> {
        let (start, end) = self.held_start(&self.stream)?;
        self.gemm1
            .launch_with_trace(&self.stream, &self.x, &self.w1, &mut self.h, None, t1)?;
        self.gemm2
            .launch_with_trace(&self.stream, &self.h, &self.w2, &mut self.y, None, t2)?;
        self.stream.record(&end)?;
        self.stream.synchronize()?;
        start.elapsed_ms(&end)
    }

    /// Resident blocks per SM of the unsynchronized GeMM kernel StreamSync runs (occupancy
    /// API). Path 2's plain launches are persistent: the occupancy of the tile's single-block
    /// entry (a clustered launch's entry cannot be asked per block), at most the launch's
    /// blocks spread over the SMs.
    pub fn stream_sync_blocks_per_sm(&self) -> Result<u32> {
        let p = self.gemm1.check(&self.x, &self.w1, &self.h, None)?;
        let k = self.kernel;
        let blocks = match self.gemm1.path2().filter(|_| self.gemm1.uses_path2(&p)) {
            Some(k2) => {
                let name = k2.tile().kernel_name(crate::ops::gemm::InputType::Bf16);
                let occupancy = self.cx.occupancy(name, k.threads(), k.smem_bytes())?;
                let grid = k2.launch_config().grid_dim.0;
                occupancy.min(grid.div_ceil(self.cx.info().sm_count.max(1)))
            }
            None => self
                .cx
                .occupancy(self.gemm1.kernel_name(), k.threads(), k.smem_bytes())?,
        };
        Ok(blocks.max(1))
    }

    /// A two-stage stream-mode graph for this MLP with `policy` between the GeMMs, both
    /// stages walking their tiles in `order`.
    pub fn graph(&self, policy: PolicyKind, wait_kernel: WaitKernelPolicy) -> Result<StreamGraph<'cx>> {
        self.graph_ordered(policy, wait_kernel, MlpOrder::RowMajor)
    }

    /// As [`Mlp::graph`], with a chosen tile order for both stages.
    pub fn graph_ordered(
        &self,
        policy: PolicyKind,
        wait_kernel: WaitKernelPolicy,
        order: MlpOrder,
    ) -> Result<StreamGraph<'cx>> {
        let (mut g, [p, c]) = self.two_stages(order)?;
        g.depend(p, c, Dependency::GemmRow, policy, self.kernel.tile_dims().1)?;
        g.set_wait_kernel(wait_kernel);
        Ok(g)
    }

    /// A graph of the MLP's two stages, GeMM1 then GeMM2, both walking `order`, no edge yet.
    fn two_stages(&self, order: MlpOrder) -> Result<(StreamGraph<'cx>, [crate::stream::StageId; 2])> {
        let (g1, g2) = self.grids();
        let mut g = StreamGraph::new(self.cx);
        let p = g.stage(self.stage_config("gemm1+gelu", g1, order, &self.gemm1)?)?;
        let c = g.stage(self.stage_config("gemm2", g2, order, &self.gemm2)?)?;
        Ok((g, [p, c]))
    }

    /// Both GeMMs as stages with no edge between them, serialized
    /// ([`StreamGraph::set_serialized`]: GeMM2 starts after GeMM1 ended, so it reads a
    /// complete H): the stream-mode kernels' code (tickets, the stage's order, the idle poll
    /// warp) with no post and no wait, the part of the protocol's cost that is not its edge.
    pub fn graph_serialized_without_edge(&self, order: MlpOrder) -> Result<StreamGraph<'cx>> {
        let (mut g, _) = self.two_stages(order)?;
        g.set_serialized(true);
        Ok(g)
    }

    /// A one-stage graph of GeMM1 alone (no edge: the hooks take tiles but never wait or
    /// post), to measure what the stream-mode kernel costs against the unsynchronized one.
    pub fn graph_gemm1_alone(&self, order: MlpOrder) -> Result<StreamGraph<'cx>> {
        let mut g = StreamGraph::new(self.cx);
        g.stage(self.stage_config("gemm1+gelu", self.grids().0, order, &self.gemm1)?)?;
        Ok(g)
    }

    /// The stage of `gemm` (GeMM1's or GeMM2's) over `grid`, walking `order`.
    fn stage_config(&self, name: &str, grid: Grid, order: MlpOrder, gemm: &Gemm) -> Result<StageConfig> {
        let k = self.kernel;
        // Path 2 is persistent: one block per resident slot, at most the work units (tiles
        // times the GeMM's split-K factor: a split tile's units are separate tickets, and
        // with one block per tile a split GeMM1 ran its units in two rounds).
        let (persistent_blocks, split_k) = match k {
            MlpKernel::Path1(_) => (None, 1),
            // One block per range of the weight (every resident block: the plan's).
            MlpKernel::Skinny => (Some(skinny_of(gemm)?.plan().ctas), 1),
            MlpKernel::Path2(_) => {
                let split_k = gemm
                    .path2()
                    .ok_or_else(|| Error::InvalidArgument("the MLP's path-2 GeMM was not set up".into()))?
                    .split_k();
                let occ = self.blocks_per_sm().unwrap_or(1);
                let units = grid.count() * split_k;
                (
                    Some(crate::stream::persistent_blocks(units, self.cx.info().sm_count, occ)),
                    split_k,
                )
            }
        };
        let (order, custom_order) = stage_order(order, grid, k.is_skinny());
        Ok(StageConfig {
            name: name.into(),
            grid,
            order,
            custom_order,
            kernel: k.stream_kernel(),
            threads: k.threads(),
            smem_bytes: k.smem_bytes(),
            persistent_blocks,
            ranges: k.is_skinny(),
            split_k,
        })
    }

    /// The context the MLP runs on.
    pub fn context(&self) -> &'cx Context {
        self.cx
    }

    /// Times GeMM1 alone: the unsynchronized kernel (StreamSync's launch order: blockIdx.x, the
    /// row tile, fastest) and the stream-mode kernel in `orders`; medians of `samples`, in µs.
    pub fn hooks_overhead(&mut self, orders: &[MlpOrder], samples: usize) -> Result<(f64, Vec<f64>)> {
        let mut plain = Vec::new();
        for _ in 0..=samples {
            let (start, end) = self.held_start(&self.stream)?;
            self.gemm1.launch(&self.stream, &self.x, &self.w1, &mut self.h, None)?;
            self.stream.record(&end)?;
            self.stream.synchronize()?;
            plain.push(start.elapsed_ms(&end)? as f64 * 1e3);
        }
        let mut hooked = Vec::new();
        for &o in orders {
            let mut g = self.graph_gemm1_alone(o)?;
            let mut t = Vec::new();
            for _ in 0..=samples {
                t.push(self.run_graph(&mut g)?.elapsed_ms as f64 * 1e3);
            }
            hooked.push(crate::microbench::Stats::of(&mut t[1..]).median);
        }
        Ok((crate::microbench::Stats::of(&mut plain[1..]).median, hooked))
    }

    /// Launches `graph` (from [`Mlp::graph`]) over this MLP's buffers.
    /// Timed from a queued start ([`StreamGraph::set_timing_hold`] with [`TIMING_HOLD_NS`]), as
    /// every other variant the MLP times.
    pub fn run_graph(&mut self, graph: &mut StreamGraph) -> Result<StreamRun> {
        graph.set_timing_hold(TIMING_HOLD_NS);
        let f = self.cx.function(self.kernel.stream_kernel())?;
        let p1 = self.gemm1.check(&self.x, &self.w1, &self.h, None)?;
        let p2 = self.gemm2.check(&self.h, &self.w2, &self.y, None)?;
        if self.kernel.is_skinny() {
            return self.run_skinny_graph(graph, &f, p1, p2);
        }
        if self.kernel.is_path2() {
            // Consumer warpgroups wait on the pipeline while the producer thread waits on a
            // dependency: bound them by the graph's timeout plus the pipeline's.
            let timeout = graph.timeout_ns() + crate::ops::gemm_sm90::PIPELINE_TIMEOUT_NS;
            fn path2(g: &Gemm) -> Result<&crate::ops::gemm_sm90::Sm90Gemm> {
                g.path2()
                    .ok_or_else(|| Error::InvalidArgument("the MLP's path-2 GeMM was not set up".into()))
            }
            // A swapped stage's kernel computes C^T = B^T A^T, as the plain launch does.
            let t1 = path2(&self.gemm1)?.launch_params(&self.stream, &p1, timeout)?;
            let t2 = path2(&self.gemm2)?.launch_params(&self.stream, &p2, timeout)?;
            let run = graph.run(|l| {
                let p = TmaGemmParamsArg(if l.stage.0 == 0 { t1 } else { t2 });
                // SAFETY: the entry point takes (StageDesc, TmaGemmParams) by value; `check`
                // and `params` validated the buffers and built their tensor maps, which `self`
                // keeps alive past the graph's synchronize.
                unsafe { l.launch(&f, &mut [kernel_arg(&l.desc), kernel_arg(&p)]) }
            });
            // A pipeline timeout (a kernel bug) lands in the GeMMs' own error slots; a launch
            // that stopped early leaves split-K arrival counters counted: zero them.
            let slots = [&self.gemm1, &self.gemm2].map(|g| path2(g).and_then(|k| k.errors().check()));
            if run.is_err() || slots.iter().any(|r| r.is_err()) {
                for g in [&self.gemm1, &self.gemm2] {
                    path2(g)?.reset_split_state()?;
                }
            }
            let [e1, e2] = slots;
            let run = run?;
            e1?;
            e2?;
            return Ok(run);
        }
        graph.run(|l| {
            let p = GemmParamsArg(if l.stage.0 == 0 { p1 } else { p2 });
            // SAFETY: the entry point takes (StageDesc, GemmParams) by value; `check` validated
            // the buffers `p` points to, which `self` keeps alive past the graph's synchronize.
            unsafe { l.launch(&f, &mut [kernel_arg(&l.desc), kernel_arg(&p)]) }
        })
    }

    /// [`Mlp::run_graph`] for the skinny stages: each launch takes its GeMM's parameters and its
    /// plan's workspace and arrival counters; a run that failed (a timed-out wait stops a
    /// block mid-range) leaves counters counted, so they are zeroed.
    fn run_skinny_graph(
        &self,
        graph: &mut StreamGraph,
        f: &cudarc::driver::CudaFunction,
        p1: GemmParams,
        p2: GemmParams,
    ) -> Result<StreamRun> {
        let (s1, s2) = (skinny_of(&self.gemm1)?, skinny_of(&self.gemm2)?);
        for p in [&p1, &p2] {
            if !crate::ops::gemm_skinny::operands_fit(p) {
                return Err(Error::InvalidArgument(
                    "the MLP's skinny stages need 16-byte aligned operands".into(),
                ));
            }
        }
        let (a1, a2) = (s1.args()?, s2.args()?);
        let run = graph.run(|l| {
            let (p, a) = if l.stage.0 == 0 { (p1, a1) } else { (p2, a2) };
            let (p, a) = (GemmParamsArg(p), crate::ops::gemm_skinny::SkinnyArgsArg(a));
            // SAFETY: the entry point takes (StageDesc, GemmParams, SkinnyArgs) by value; `check`
            // validated the buffers, `operands_fit` their alignment, and the stage launches the
            // plan's blocks (`stage_config`) over the plan's workspace and counters, which `self`
            // keeps alive past the graph's synchronize.
            unsafe { l.launch(f, &mut [kernel_arg(&l.desc), kernel_arg(&p), kernel_arg(&a)]) }
        });
        if run.is_err() {
            s1.reset()?;
            s2.reset()?;
        }
        run
    }

    /// cuBLAS back to back (plain GeMMs: cuBLAS has no GeLU epilogue here, which favours it);
    /// returns device milliseconds.
    pub fn run_cublas(&mut self, blas: &Cublas) -> Result<f32> {
        let cfg1 = GemmConfig::new(self.shape.batch, self.shape.ffn, self.shape.hidden);
        let cfg2 = GemmConfig::new(self.shape.batch, self.shape.hidden, self.shape.ffn);
        let s = blas.stream();
        let (start, end) = self.held_start(s)?;
        blas.gemm(&cfg1, &self.x, &self.w1, &mut self.h)?;
        blas.gemm(&cfg2, &self.h, &self.w2, &mut self.y)?;
        s.record(&end)?;
        s.synchronize()?;
        start.elapsed_ms(&end)
    }

    /// cuBLAS back to back as one CUDA graph: the two GeMMs of [`Mlp::run_cublas`] captured
    /// from `blas`'s stream on the first call (again if `blas` is on another stream), then one
    /// graph launch per call; returns device milliseconds of the launch.
    pub fn run_cublas_graph(&mut self, blas: &Cublas) -> Result<f32> {
        if !self.cublas_graph.as_ref().is_some_and(|g| g.is_on(blas.stream())) {
            self.cublas_graph = None;
            let cfg1 = GemmConfig::new(self.shape.batch, self.shape.ffn, self.shape.hidden);
            let cfg2 = GemmConfig::new(self.shape.batch, self.shape.hidden, self.shape.ffn);
            let (x, w1, w2) = (&self.x, &self.w1, &self.w2);
            let (h, y) = (&mut self.h, &mut self.y);
            self.cublas_graph = Some(blas.capture(|b| {
                b.gemm(&cfg1, x, w1, &mut *h)?;
                b.gemm(&cfg2, &*h, w2, y)
            })?);
        }
        let graph = self.cublas_graph.as_ref().expect("captured above");
        let s = graph.stream();
        let (start, end) = self.held_start(s)?;
        graph.launch()?;
        s.record(&end)?;
        s.synchronize()?;
        start.elapsed_ms(&end)
    }

    /// The stream the MLP's StreamSync launches go on (and cuBLAS should use).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Downloads (H, Y).
    pub fn outputs(&self) -> Result<(Vec<bf16>, Vec<bf16>)> {
        Ok((self.h.download()?, self.y.download()?))
    }

    /// Checks rows `rows` of H and Y against f64 references: H from X and W1 (with GeLU), Y
    /// from the device's H and W2 (so the two GeMMs are checked separately). Returns the worst
    /// relative error ‖out − ref‖ / ‖ref‖ over the rows.
    pub fn check_rows(&self, rows: &[usize]) -> Result<f64> {
        let (h, y) = self.outputs()?;
        let (x, w1, w2) = (self.x.download()?, self.w1.download()?, self.w2.download()?);
        let (hd, fd) = (self.shape.hidden, self.shape.ffn);
        let mut worst = 0.0f64;
        for &r in rows {
            if r >= self.shape.batch {
                return Err(Error::InvalidArgument(format!(
                    "row {r} past batch {}",
                    self.shape.batch
                )));
            }
            let xr: Vec<f64> = x[r * hd..(r + 1) * hd].iter().map(|v| v.to_f64()).collect();
            let mut h_ref = vec![0f64; fd];
            for (k, &xv) in xr.iter().enumerate() {
                let wrow = &w1[k * fd..(k + 1) * fd];
                for (j, acc) in h_ref.iter_mut().enumerate() {
                    *acc += xv * wrow[j].to_f64();
                }
            }
            let h_ref: Vec<f64> = h_ref.into_iter().map(crate::ops::gemm::gelu_tanh).collect();
            let h_dev: Vec<f64> = h[r * fd..(r + 1) * fd].iter().map(|v| v.to_f64()).collect();
            worst = worst.max(relative_error(&h_dev, &h_ref));
            let mut y_ref = vec![0f64; hd];
            for (k, &hv) in h_dev.iter().enumerate() {
                let wrow = &w2[k * hd..(k + 1) * hd];
                for (j, acc) in y_ref.iter_mut().enumerate() {
                    *acc += hv * wrow[j].to_f64();
                }
            }
            let y_dev: Vec<f64> = y[r * hd..(r + 1) * hd].iter().map(|v| v.to_f64()).collect();
            worst = worst.max(relative_error(&y_dev, &y_ref));
        }
        Ok(worst)
    }
}

/// Parses a policy name as the command line writes it ("tilesync", "rowsync", "strided:4").
pub fn parse_policy(s: &str) -> Result<PolicyKind> {
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "tilesync" | "tile" => Ok(PolicyKind::TileSync),
        "rowsync" | "row" => Ok(PolicyKind::RowSync),
        _ => match lower
            .strip_prefix("strided:")
            .or_else(|| lower.strip_prefix("stridedsync:"))
        {
            Some(n) => n
                .parse()
                .map(|stride| PolicyKind::StridedSync { stride })
                .map_err(|_| Error::InvalidArgument(format!("bad stride in policy `{s}`"))),
            None => Err(Error::InvalidArgument(format!(
                "unknown policy `{s}`: use tilesync, rowsync or strided:N"
            ))),
        },
    }
}

/// Runs the MLP under `plan` with tracing on, when it synchronizes (the stream-mode graph
/// under its policy, both stages walking its order, once per launch of `launches`, or once
/// launched as [`WaitKernelPolicy::preferred`] when `launches` is empty), and once
/// as StreamSync (the same GeMMs, unsynchronized, on one stream) with tracing on, all on
/// `kernel` (or the default, as [`Mlp::new`]), each after an untraced warm-up; writes
/// `<dir>/mlp-b<batch>-<policy>-<order>.{json,csv,svg}` (a synchronized plan only; with
/// `-<launch>` after the order for a launch other than [`WaitKernelPolicy::Auto`], e.g.
/// `-pdl`) and `<dir>/mlp-b<batch>-streamsync.{json,csv,svg}`
/// (same stage ids and names, so the timelines compare directly) and returns the
/// traces' analysis reports and the paths written.
pub fn trace_run(
    cx: &Context,
    shape: MlpShape,
    plan: MlpPlan,
    kernel: Option<MlpKernel>,
    launches: &[WaitKernelPolicy],
    dir: &std::path::Path,
) -> Result<String> {
    use crate::trace::Trace;
    let mut mlp = Mlp::new(cx, shape, kernel, 7)?;
    let (g1, g2) = mlp.grids();
    let tiles = mlp.tile().name();
    // A split stage's tile has one event, the completing unit's: its other units ran too
    // (on other SMs) but are not in the busy and occupied shares.
    let splits = match mlp.split_ks() {
        [1, 1] => String::new(),
        [s1, s2] => format!(
            "; split-K {s1} / {s2}: one event per tile, from the unit that completed it, so the SM shares count one unit of each tile"
        ),
    };
    let what = |mode: &str, ms: f32| {
        format!(
            "{}, batch {}, {mode} ({tiles} tiles), {ms:.3} ms{splits}",
            shape.label(),
            shape.batch
        )
    };
    let mut traces = Vec::new();
    if let MlpPlan::Synced { policy, order } = plan {
        for launch in WaitKernelPolicy::listed_or_preferred(cx, launches) {
            let mut graph = mlp.graph_ordered(policy, launch, order)?;
            graph.set_trace(true)?;
            mlp.run_graph(&mut graph)?; // warm-up
            let run = mlp.run_graph(&mut graph)?;
            let name = compare::variant_name(policy, order, launch);
            let meta = trace_meta(
                cx,
                what(&format!("{name}, stream mode"), run.elapsed_ms),
                [g1, g2],
                mlp.blocks_per_sm()?,
            );
            traces.push((
                Trace::new(meta, run.traces.into_iter().flatten().collect())?,
                name.to_ascii_lowercase().replace('/', "-"),
            ));
        }
    }
    mlp.run_stream_sync()?; // warm-up
    let (ms, events, grids) = mlp.run_stream_sync_traced()?;
    let meta = trace_meta(
        cx,
        what("StreamSync (unsynchronized kernels, one stream)", ms),
        grids,
        mlp.stream_sync_blocks_per_sm()?,
    );
    traces.push((Trace::new(meta, events)?, "streamsync".to_string()));
    let mut report = String::new();
    for (trace, name) in &traces {
        let files = trace.save_all(dir, &format!("mlp-b{}-{name}", shape.batch))?;
        report.push_str(&trace.analyze()?.to_string());
        for f in files {
            report.push_str(&format!("wrote {}\n", f.display()));
        }
    }
    Ok(report)
}

/// The metadata of an MLP trace: stage 0 `gemm1+gelu`, stage 1 `gemm2` (in every mode, so
/// traces of one MLP compare stage by stage).
pub(crate) fn trace_meta(cx: &Context, label: String, grids: [Grid; 2], blocks_per_sm: u32) -> crate::trace::TraceMeta {
    mlp_trace_meta(&cx.info().name, cx.info().sm_count, label, grids, blocks_per_sm)
}

/// [`trace_meta`] for a device named `device` with `sm_count` SMs.
fn mlp_trace_meta(
    device: &str,
    sm_count: u32,
    label: String,
    grids: [Grid; 2],
    blocks_per_sm: u32,
) -> crate::trace::TraceMeta {
    use crate::trace::{StageMeta, TraceMeta};
    TraceMeta {
        label,
        device: device.into(),
        sm_count: Some(sm_count),
        stages: ["gemm1+gelu", "gemm2"]
            .into_iter()
            .zip(grids)
            .enumerate()
            .map(|(id, (name, grid))| StageMeta {
                id: id as u32,
                name: name.into(),
                grid: Some(grid),
                blocks_per_sm: Some(blocks_per_sm),
            })
            .collect(),
    }
}

/// Policy::Auto for the MLP: the policy the wave model's event-driven schedule predicts to be
/// fastest for this batch, tile and occupancy on `sm_count` SMs (`cusync::sim`, the same
/// simulator that reproduces the paper's tables), with the prediction it came from. Among
/// equally fast policies the one that waits less wins (RowSync over TileSync). `split_ks` are
/// the stages' split-K factors ([`Mlp::split_ks`]): a split stage's units are its blocks, so
/// the GPT-3 GeMM1 at B = 256 on 128 x 192 tiles (64 tiles split in two) fills 0.97 of a wave
/// on 132 SMs, not 0.48.
pub fn auto_policy(
    shape: MlpShape,
    kernel: MlpKernel,
    split_ks: [u32; 2],
    sm_count: u32,
    blocks_per_sm: u32,
) -> Result<(PolicyKind, crate::sim::PairPrediction)> {
    use crate::sim::{predict_pair, GemmShape, Gpu, SimOptions, TileTimes, Tiling};
    let (bm, bn) = kernel.tile_dims();
    let spec = |m: usize, n: usize, k: usize, split: u32| crate::sim::KernelSpec {
        shape: GemmShape {
            m: m as u32,
            n: n as u32,
            k: k as u32,
        },
        tiling: Tiling::new(bm, bn, split.max(1)),
        occupancy: blocks_per_sm.max(1),
    };
    let producer = spec(shape.batch, shape.ffn, shape.hidden, split_ks[0]);
    let consumer = spec(shape.batch, shape.hidden, shape.ffn, split_ks[1]);
    let gpu = Gpu {
        name: "this GPU",
        sms: sm_count,
    };
    let options = SimOptions {
        tile_times: TileTimes::ByWork,
        wait_cost: crate::sim::H200_WAIT_COST,
    };
    let prediction = predict_pair(
        gpu,
        producer,
        consumer,
        Dependency::GemmRow,
        &crate::sim::GEMM_CANDIDATES,
        options,
    )
    .map_err(|e| Error::InvalidArgument(format!("the wave model cannot schedule this MLP: {e:?}")))?;
    let best = prediction
        .best()
        .map(|o| o.policy)
        .ok_or_else(|| Error::InvalidArgument("no policy fits this MLP's grids".into()))?;
    Ok((best, prediction))
}

/// A path-2 stage's GeMM (and StreamSync's launch of it) on `tile`: whole tiles (no stream-K,
/// so the same work units and bitwise equal outputs), single blocks (no clusters: the stages
/// have none), swapped as `swap` says, on `pipeline_depth` stages of the ring where one is
/// asked; else the tile's whole ring ([`crate::ops::gemm_sm90::whole_ring`]), but for the
/// 128 x 16 tile, which takes the device's measured streaming depth
/// (`gemm_sm90::default_pipeline_depth`; on an H100, session 34: its stages at B = 1 took
/// 109.7 µs at depth 5 against 117.4 on the whole ring). The 64 x 96 tile's maps promote 128
/// bytes into L2, as its plain default does ([`crate::ops::gemm_sm90::choose_tile96`]).
pub(crate) fn path2_stage_config(cfg: GemmConfig, tile: WgTile, swap: bool, pipeline_depth: Option<u32>) -> GemmConfig {
    let cfg = match pipeline_depth {
        Some(d) => cfg.pipeline_depth(d),
        None if tile == WgTile::T128x16 => cfg,
        None => crate::ops::gemm_sm90::whole_ring(cfg, tile),
    };
    let cfg = cfg.wg_tile(tile).stream_k(false).cluster(false).swap_ab(swap);
    if tile == WgTile::T64x96 {
        cfg.l2_promotion(crate::ops::gemm_sm90::L2Promotion::B128)
    } else {
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path2_stages_keep_the_whole_ring_but_the_16_column_tile() {
        use crate::ops::gemm_sm90::L2Promotion;
        let g = GemmConfig::new(8, 12288, 6144);
        for t in [WgTile::T64x96, WgTile::T128x64, WgTile::T128x192] {
            let c = path2_stage_config(g, t, t == WgTile::T128x64, None);
            assert_eq!(c.pipeline_depth, Some(t.shape().stages), "{}", t.name());
            assert_eq!((c.wg_tile, c.stream_k, c.cluster), (Some(t), Some(false), Some(false)));
        }
        // The 128 x 16 stages take the device's depth (none forced here), swapped.
        let c16 = path2_stage_config(g, WgTile::T128x16, true, None);
        assert_eq!((c16.pipeline_depth, c16.swap_ab), (None, Some(true)));
        // A depth asked for wins everywhere; the 64 x 96 tile promotes 128 bytes.
        for t in [WgTile::T64x96, WgTile::T128x16] {
            assert_eq!(path2_stage_config(g, t, false, Some(5)).pipeline_depth, Some(5));
        }
        assert_eq!(
            path2_stage_config(g, WgTile::T64x96, false, None).l2_promotion,
            Some(L2Promotion::B128)
        );
        assert_eq!(path2_stage_config(g, WgTile::T128x16, true, None).l2_promotion, None);
    }

    #[test]
    fn stage_depths_are_refused_where_no_ring_takes_them() {
        let t96 = MlpKernel::Path2(WgTile::T64x96);
        assert!(check_stage_depth(t96, None).is_ok());
        assert!(check_stage_depth(MlpKernel::Skinny, None).is_ok());
        for depth in [2, 5, WgTile::T64x96.shape().stages] {
            assert!(check_stage_depth(t96, Some(depth)).is_ok(), "depth {depth}");
        }
        for depth in [0, 1, WgTile::T64x96.shape().stages + 1] {
            let e = check_stage_depth(t96, Some(depth)).unwrap_err().to_string();
            assert!(e.contains("whose ring has 11 stages"), "{e}");
        }
        let e = check_stage_depth(MlpKernel::Skinny, Some(5)).unwrap_err().to_string();
        assert!(e.contains("path-2 stages"), "{e}");
    }

    #[test]
    fn stream_sync_trace_names_both_gemms_like_the_policy_trace() {
        use crate::trace::{ChromeLayout, Trace};
        let grids = [Grid::new(2, 3, 1), Grid::new(2, 1, 1)];
        let meta = mlp_trace_meta("H200", 4, "StreamSync".into(), grids, 2);
        let names: Vec<(u32, &str)> = meta.stages.iter().map(|s| (s.id, s.name.as_str())).collect();
        assert_eq!(names, [(0, "gemm1+gelu"), (1, "gemm2")]);
        assert!(meta.stages.iter().all(|s| s.blocks_per_sm == Some(2)));
        assert_eq!(meta.stages[1].grid, Some(grids[1]));
        // StreamSync's events as `Gemm::trace_events` returns them: GeMM2 after GeMM1.
        let event = |stage: u32, tile: u32, t: u64| TraceEvent {
            stage,
            tile,
            sm: tile % 4,
            cta: tile,
            t_dispatch: t,
            t_ready: t,
            t_start: t,
            t_end: t + 10,
        };
        let mut events: Vec<TraceEvent> = (0..6).map(|i| event(0, i, 100 + u64::from(i))).collect();
        events.extend((0..2).map(|i| event(1, i, 200 + u64::from(i))));
        let trace = Trace::new(meta, events).unwrap();
        let back = Trace::from_chrome_json(&trace.to_chrome_json(ChromeLayout::PerStage)).unwrap();
        assert_eq!(back.meta, trace.meta);
        let analysis = trace.analyze().unwrap();
        assert_eq!(analysis.stages.len(), 2);
        assert_eq!(analysis.stages[1].tiles, 2);
    }

    #[test]
    fn auto_policy_reproduces_the_paper_choice_on_a_v100_like_gpu() {
        // The paper's batch 1024 configuration: 256x128 tiles, 2 blocks per SM, 80 SMs:
        // RowSync wins (Table waves:mlp), and the model predicts a real gain.
        let (policy, prediction) =
            auto_policy(MlpShape::gpt3(1024), TileConfig::T256x128.into(), [1, 1], 80, 2).unwrap();
        assert_eq!(policy, PolicyKind::RowSync);
        let best = prediction.best().unwrap();
        assert!(
            prediction.stream_sync.makespan > best.stats.makespan * 1.1,
            "{prediction:?}"
        );
        // Policy::Auto's model plan takes it (a gain past the report's margin).
        assert_eq!(
            MlpPlan::from_prediction(&prediction, crate::sim::report::RECOMMEND_MARGIN),
            MlpPlan::Synced {
                policy: PolicyKind::RowSync,
                order: MlpOrder::RowMajor
            }
        );
    }

    #[test]
    fn auto_policy_counts_a_split_stages_units_as_its_blocks() {
        // GPT-3 GeMM1 at B = 256 on 128 x 192 tiles: 2 x 32 tiles. Unsplit, one wave of full-K
        // tiles (1.0) then GeMM2's wave of half-K tiles (0.5); split in two, GeMM1 is one wave
        // of 128 half-K units, each the unit of time, and GeMM2's tiles take as long.
        let kernel = MlpKernel::Path2(WgTile::T128x192);
        let shape = MlpShape::gpt3(256);
        let (_, whole) = auto_policy(shape, kernel, [1, 1], 132, 1).unwrap();
        let (_, split) = auto_policy(shape, kernel, [2, 1], 132, 1).unwrap();
        assert!((whole.stream_sync.makespan - 1.5).abs() < 1e-9, "{whole:?}");
        assert!((split.stream_sync.makespan - 2.0).abs() < 1e-9, "{split:?}");
    }

    #[test]
    fn auto_policy_always_names_a_valid_policy() {
        for batch in [1, 64, 256, 512, 1024, 2048] {
            for tile in [TileConfig::T64x64, TileConfig::T128x128, TileConfig::T256x128] {
                let (policy, _) = auto_policy(MlpShape::gpt3(batch), tile.into(), [1, 1], 132, 1).unwrap();
                assert!(
                    matches!(policy, PolicyKind::RowSync | PolicyKind::TileSync),
                    "{batch} {tile:?}: {policy:?}"
                );
            }
        }
    }

    #[test]
    fn policies_parse_from_the_command_line() {
        assert_eq!(parse_policy("RowSync").unwrap(), PolicyKind::RowSync);
        assert_eq!(parse_policy("tile").unwrap(), PolicyKind::TileSync);
        assert_eq!(
            parse_policy("strided:4").unwrap(),
            PolicyKind::StridedSync { stride: 4 }
        );
        assert!(parse_policy("strided:x").is_err());
        assert!(parse_policy("fastest").is_err());
    }

    #[test]
    fn models_parse_and_name_their_shapes() {
        for m in MlpModel::ALL {
            assert_eq!(MlpModel::parse(m.name()).unwrap(), m);
            assert_eq!(MlpModel::of_shape(m.shape(64)), Some(m));
        }
        assert_eq!(MlpModel::parse("LLaMA2-7B").unwrap(), MlpModel::Llama7b);
        assert_eq!(MlpModel::parse("gpt3_tp8").unwrap(), MlpModel::Gpt3);
        assert_eq!(MlpModel::default().shape(256), MlpShape::gpt3(256));
        let llama = MlpModel::Llama7b.shape(8);
        assert_eq!((llama.hidden, llama.ffn), (4096, 11008));
        assert_eq!(llama.label(), "LLaMA-2-7B MLP (H=4096, F=11008, bf16)");
        let e = MlpModel::parse("bert").unwrap_err().to_string();
        assert!(e.contains("gpt3, gpt3-tp4, llama7b"), "{e}");
        let odd = MlpShape {
            batch: 1,
            hidden: 10,
            ffn: 20,
        };
        assert_eq!(MlpModel::of_shape(odd), None);
        assert_eq!(odd.label(), "MLP (H=10, F=20, bf16)");
    }

    #[test]
    fn banded_order_is_a_permutation_that_walks_bands_column_by_column() {
        let g = Grid::new(5, 3, 1);
        let order = banded_column_major(g, 2);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..g.count()).collect::<Vec<_>>());
        let tiles: Vec<(u32, u32)> = order.iter().map(|&id| (g.tile(id).x, g.tile(id).y)).collect();
        assert_eq!(&tiles[..6], &[(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]);
        assert_eq!(&tiles[12..], &[(4, 0), (4, 1), (4, 2)]);
    }

    #[test]
    fn a_band_over_every_row_tile_takes_the_built_in_column_major_order() {
        use cusync_shared::order::nth;
        for g in [Grid::new(1, 48, 2), Grid::new(8, 32, 1), Grid::new(5, 3, 1)] {
            // The buffer such a band would upload is column-major's walk, tile for tile.
            let column_major: Vec<u32> = (0..g.count())
                .map(|i| g.linear(nth(TileOrder::ColumnMajor, g, i)))
                .collect();
            for rows in [g.x, g.x + 3, 64] {
                assert_eq!(banded_column_major(g, rows), column_major);
                assert_eq!(
                    stage_order(MlpOrder::Banded(rows), g, false),
                    (TileOrder::ColumnMajor, None)
                );
            }
        }
        // Narrower bands keep their buffer; skinny stages and the built-in orders take none.
        let g = Grid::new(8, 32, 1);
        assert_eq!(
            stage_order(MlpOrder::Banded(4), g, false),
            (TileOrder::RowMajor, Some(banded_column_major(g, 4)))
        );
        assert_eq!(stage_order(MlpOrder::Banded(4), g, true), (TileOrder::RowMajor, None));
        assert_eq!(stage_order(MlpOrder::RowMajor, g, false), (TileOrder::RowMajor, None));
        assert_eq!(
            stage_order(MlpOrder::ColumnMajor, g, false),
            (TileOrder::ColumnMajor, None)
        );
    }
}
