//! Timing the persistent megakernel on GeMM stacks (issue 5's benchmarks): the 2-layer
//! `[M,8192] x [8192,8192] x [8192,8192]` bf16 MLP and deeper stacks, in three variants
//! ([`PersistentVariant`]), so a benchmark script can put them next to the single GeMMs
//! (`ops::gemm::time_gemm`) and cuBLAS (`baselines::cublas`). Each stack runs on the path-1
//! megakernel ([`WorkerKind::GemmBf16x128`]) or the path-2 one ([`WorkerKind::sm90`];
//! [`default_stack_worker`] picks path 2 where the device runs it).

use half::bf16;
use rand::{Rng, SeedableRng};

use cusync_shared::gemm_sm90::{raster_tile, WG_RASTER_GROUP};
use std::sync::Arc;
use std::time::Instant;

use cusync_shared::policy::{Dependency, PolicyKind, RowBandSync};
use cusync_shared::tile::{Grid, TileIdx};

use super::graph::PersistentGraph;
use super::spec::{PersistentOptions, PersistentSpec, SchedulePriority};
use super::work::{StageWork, WorkerKind};
use crate::baselines::microbatch::{default_chunks, Microbatch, MicrobatchOptions, MicrobatchResult, PreparedRun};
use crate::ops::gemm::{median, GemmConfig, TileConfig, TimingOptions};
use crate::ops::gemm_sm90::{choose_wg_tile, device_supports, WgTile};
use crate::plan::{EdgePolicy, StageOrder};
use crate::runtime::clocks::{ClockSampler, ClockStats};
use crate::{Context, DeviceBuffer, Error, Result, Stream};

/// What to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PersistentVariant {
    /// The CTA-pipelining megakernel: layer `i + 1`'s tiles start as soon as their rows of
    /// layer `i` are posted (RowSync-derived dependency arrays).
    Pipelined,
    /// The same megakernel with every dependency satisfied up front: every queue prefilled,
    /// no scoreboard walk (protocol cost with nothing ever waiting; outputs not meaningful).
    NoDependencies,
    /// The same megakernel without protocol code: tiles from one plain counter (outputs not
    /// meaningful). The target: `NoDependencies` within 2% of this.
    NoProtocol,
}

/// Median times of the three variants on one problem (ms), with the launch shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PersistentTimes {
    /// [`PersistentVariant::Pipelined`].
    pub pipelined_ms: f64,
    /// [`PersistentVariant::NoDependencies`].
    pub no_dependencies_ms: f64,
    /// [`PersistentVariant::NoProtocol`].
    pub no_protocol_ms: f64,
    /// Blocks per launch.
    pub ctas: u32,
    /// Tiles of all layers per launch.
    pub tiles: u32,
    /// The megakernel entry point timed (the pipelined variant's).
    pub kernel: &'static str,
}

/// The GeMM worker a stack of `m` rows through `widths` runs on by default on `cx`: path 2
/// ([`WorkerKind::sm90`], one tile for every layer: 128 x 256 when even the narrowest layer has
/// a tile per SM, else 128 x 128) where [`device_supports`] it, else path 1.
pub fn default_stack_worker(cx: &Context, m: usize, widths: &[usize]) -> WorkerKind {
    let pick = pick_stack_worker(device_supports(cx), cx.info().sm_count, m, widths, None, None);
    pick.unwrap_or(WorkerKind::GemmBf16x128)
}

/// The worker a GeMM stack of `m` rows through `widths` runs on, given whether the device runs
/// path 2 (`path2_ok`), its SM count, and what the user asked: `path` 1 or 2 (`None`: path 2
/// where it runs), `tile` a path-2 tile (`None`: 128 x 256 when the narrowest layer has a
/// 128 x 256 tile per SM, else 128 x 128). Refuses path 2 (or a path-2 tile) where it cannot
/// run, a tile with path 1, and a path other than 1 or 2.
pub fn pick_stack_worker(
    path2_ok: bool,
    sm_count: u32,
    m: usize,
    widths: &[usize],
    path: Option<u32>,
    tile: Option<WgTile>,
) -> Result<WorkerKind> {
    let path = match (path, tile) {
        (Some(1), Some(t)) => {
            return Err(Error::InvalidArgument(format!(
                "the path-1 megakernel runs 128x128 tiles; the {} tile is a path-2 tile",
                t.name()
            )))
        }
        (Some(p @ (1 | 2)), _) => p,
        (Some(p), _) => {
            return Err(Error::InvalidArgument(format!(
                "GeMM path {p} does not exist: 1 (cp.async + mma.sync) or 2 (TMA + wgmma, sm_90a)"
            )))
        }
        (None, Some(_)) => 2,
        (None, None) if path2_ok => 2,
        (None, None) => 1,
    };
    if path == 1 {
        return Ok(WorkerKind::GemmBf16x128);
    }
    if !path2_ok {
        return Err(Error::InvalidArgument(
            "the path-2 megakernel needs an sm_90 device and the sm_90a build (CUSYNC_ARCH=sm_90a); \
             use path 1"
                .into(),
        ));
    }
    let narrowest = widths.iter().skip(1).copied().min().unwrap_or(1);
    WorkerKind::sm90(tile.unwrap_or_else(|| choose_wg_tile(m, narrowest, sm_count)))
}

/// An `m x n x k` bf16 GeMM layer as worker `kind` computes it: the path-1 128 x 128 tile, or
/// for path 2 the worker's tile with split-K off, so a plain `Gemm` launch of the config runs
/// the same per-tile computation as the megakernel (bitwise equal results).
pub fn layer_config(m: usize, n: usize, k: usize, kind: WorkerKind) -> GemmConfig {
    let cfg = GemmConfig::new(m, n, k);
    match kind.wg_tile() {
        Some(t) => cfg.wg_tile(t).split_k(1),
        None => cfg.tile(TileConfig::T128x128),
    }
}

/// Activations and weights of a bf16 GeMM stack: `x [m, widths[0]]`, `w[i] [widths[i],
/// widths[i + 1]]` uniform in `[-1, 1) / sqrt(widths[i])` (outputs stay near unit scale), and
/// one zeroed output per layer.
pub struct GemmStack {
    /// Rows.
    pub m: usize,
    /// Layer widths.
    pub widths: Vec<usize>,
    /// The input.
    pub x: DeviceBuffer<bf16>,
    /// The weights.
    pub weights: Vec<DeviceBuffer<bf16>>,
    /// Each layer's output.
    pub outputs: Vec<DeviceBuffer<bf16>>,
}

/// `n` values uniform in `[-scale, scale)`, in parallel over the host's cores (deterministic
/// for a seed).
pub fn random_bf16(seed: u64, n: usize, scale: f32) -> Vec<bf16> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(32);
    let chunk = n.div_ceil(threads).max(1 << 16);
    let mut out = vec![bf16::ZERO; n];
    std::thread::scope(|s| {
        for (i, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for v in part {
                    *v = bf16::from_f32(rng.random_range(-scale..scale));
                }
            });
        }
    });
    out
}

impl GemmStack {
    /// Random operands for `m` rows through `widths` (at least two widths).
    pub fn new(cx: &Context, m: usize, widths: &[usize], seed: u64) -> Result<Self> {
        if widths.len() < 2 || m == 0 || widths.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "a GeMM stack needs rows and at least two nonzero widths, got m = {m}, widths {widths:?}"
            )));
        }
        let x = cx.upload(&random_bf16(seed, m * widths[0], 1.0))?;
        let mut weights = Vec::new();
        let mut outputs = Vec::new();
        for (i, w) in widths.windows(2).enumerate() {
            let scale = 1.0 / (w[0] as f32).sqrt();
            weights.push(cx.upload(&random_bf16(seed + 1 + i as u64, w[0] * w[1], scale))?);
            outputs.push(cx.alloc_zeros::<bf16>(m * w[1])?);
        }
        Ok(Self {
            m,
            widths: widths.to_vec(),
            x,
            weights,
            outputs,
        })
    }

    /// Layer `i`'s operands: its input (the stack's input or layer `i - 1`'s output), its
    /// weight, and its output, writable.
    pub fn layer_operands_mut(
        &mut self,
        i: usize,
    ) -> (&DeviceBuffer<bf16>, &DeviceBuffer<bf16>, &mut DeviceBuffer<bf16>) {
        let (before, rest) = self.outputs.split_at_mut(i);
        let a = if i == 0 { &self.x } else { &before[i - 1] };
        (a, &self.weights[i], &mut rest[0])
    }

    /// Layer `i`'s problem (bf16 in and out, row-major, 128 x 128 tiles).
    pub fn config(&self, i: usize) -> GemmConfig {
        GemmConfig::new(self.m, self.widths[i + 1], self.widths[i]).tile(TileConfig::T128x128)
    }

    /// Layer `i`'s problem as the worker `kind` computes it: [`GemmStack::config`] for path 1;
    /// for path 2 the worker's tile with split-K off, so a plain `Gemm` launch of this config
    /// runs the same per-tile computation as the megakernel (bitwise equal results).
    pub fn config_for(&self, i: usize, kind: WorkerKind) -> GemmConfig {
        layer_config(self.m, self.widths[i + 1], self.widths[i], kind)
    }

    /// The stack as a persistent graph: one tensor-core stage per layer (path 1), layer
    /// `i + 1` reading layer `i`'s rows (`Dependency::GemmRow`) under `policy`.
    pub fn spec(&self, policy: impl Into<EdgePolicy>) -> Result<PersistentSpec<'_>> {
        self.spec_for(policy, WorkerKind::GemmBf16x128)
    }

    /// [`GemmStack::spec`] with every layer on worker `kind` (`GemmBf16x128` or a path-2
    /// worker; others are refused).
    pub fn spec_for(&self, policy: impl Into<EdgePolicy>, kind: WorkerKind) -> Result<PersistentSpec<'_>> {
        self.spec_ordered(policy, kind, StackOrder::RowMajor)
    }

    /// [`GemmStack::spec_for`] with every layer's queue order `order` (the order of its
    /// initially ready tiles: all of the first layer's, and every layer's without
    /// dependencies).
    pub fn spec_ordered(
        &self,
        policy: impl Into<EdgePolicy>,
        kind: WorkerKind,
        order: StackOrder,
    ) -> Result<PersistentSpec<'_>> {
        let policy = policy.into();
        let mut spec = PersistentSpec::new();
        let mut prev = None;
        for i in 0..self.weights.len() {
            let a = if i == 0 { &self.x } else { &self.outputs[i - 1] };
            let cfg = self.config_for(i, kind);
            let (w, c) = (&self.weights[i], &self.outputs[i]);
            let work = match kind {
                WorkerKind::GemmBf16x128 => StageWork::gemm_bf16(&cfg, a, w, c, None)?,
                WorkerKind::GemmSm90Bf16x256 | WorkerKind::GemmSm90Bf16x128 => {
                    let tile = kind
                        .wg_tile()
                        .ok_or_else(|| Error::InvalidArgument("no path-2 tile".into()))?;
                    StageWork::gemm_sm90_bf16(&cfg, tile, a, w, c, None)?
                }
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "a bf16 GeMM stack runs on a tensor-core GeMM worker, not {other:?}"
                    )))
                }
            };
            let grid = work.grid();
            let id = spec.stage(format!("layer{i}"), work);
            if order == StackOrder::Raster {
                spec.set_order(id, raster_order(grid, WG_RASTER_GROUP));
            }
            if let Some(p) = prev {
                spec.edge(p, id, Dependency::GemmRow, policy.clone());
            }
            prev = Some(id);
        }
        Ok(spec)
    }
}

/// The order of a GeMM stack's queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StackOrder {
    /// Row by row of each layer's tiles (the library's default, which the GPU tests use).
    #[default]
    RowMajor,
    /// The plain path-2 kernel's grouped raster ([`raster_tile`] with [`WG_RASTER_GROUP`] row
    /// tiles walked column by column), so the tiles running at once share A's rows and B's
    /// columns in L2: `cusync run layers`' default, measured on the H200 (session 5, run 9)
    /// at 1.16x (2 layers) and 1.07x (4 layers) the row-major pipelined megakernel, with the
    /// dependencies-met launch within 0.5-3% of the no-protocol twin at 4 layers.
    Raster,
}

impl StackOrder {
    /// Parses `row` or `raster`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "row" => Ok(Self::RowMajor),
            "raster" => Ok(Self::Raster),
            other => Err(Error::InvalidArgument(format!(
                "unknown stack order `{other}`: row or raster"
            ))),
        }
    }
}

/// The policy between a GeMM stack's layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StackPolicy {
    /// RowSync: a layer's tile waits for its row of the layer before. A row's tiles are
    /// pushed when the row completes, so the next layer runs in the order rows complete.
    #[default]
    RowSync,
    /// [`RowBandSync`] over `rows` rows (`band`: [`WG_RASTER_GROUP`], the raster order's row
    /// group): a tile waits for its band of the layer before, and the band's tiles are pushed
    /// together in the consumer's queue order (the grouped raster with
    /// [`StackOrder::Raster`]), so the next layer walks L2 as the plain kernel does.
    Band {
        /// Row tiles per band.
        rows: u32,
    },
}

impl StackPolicy {
    /// Parses `rowsync`, `band` (bands of [`WG_RASTER_GROUP`] rows) or `bandN` (N rows).
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidArgument(format!(
                "unknown stack policy `{s}`: rowsync, band or bandN (N row tiles per band, N >= 1)"
            ))
        };
        match s {
            "rowsync" | "row" => Ok(Self::RowSync),
            "band" => Ok(Self::Band { rows: WG_RASTER_GROUP }),
            _ => match s.strip_prefix("band").map(str::parse::<u32>) {
                Some(Ok(rows)) if rows >= 1 => Ok(Self::Band { rows }),
                _ => Err(bad()),
            },
        }
    }

    /// The edge policy of every layer-to-layer edge.
    pub fn edge_policy(self) -> EdgePolicy {
        match self {
            Self::RowSync => EdgePolicy::Builtin(PolicyKind::RowSync),
            Self::Band { rows } => EdgePolicy::Custom {
                name: format!("RowBandSync{rows}"),
                policy: Arc::new(RowBandSync { rows }),
            },
        }
    }

    /// Its name in reports ("RowSync", "RowBandSync8").
    pub fn name(self) -> String {
        self.edge_policy().name().to_string()
    }
}

/// One pipelined megakernel variant of [`time_layers_side_by_side`]: the policy between
/// layers and the scheduler's priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pipelining {
    /// The policy between layers.
    pub policy: StackPolicy,
    /// Which stage's ready tiles the scheduler takes first.
    pub priority: SchedulePriority,
}

impl Pipelining {
    /// "RowBandSync8, downstream first".
    pub fn name(self) -> String {
        format!("{}, {}", self.policy.name(), self.priority.name())
    }
}

/// `grid`'s tiles (split-K slices adjacent) in the grouped raster order of the plain path-2
/// kernel, as a queue order: a permutation of the linear tile ids.
pub fn raster_order(grid: Grid, group: u32) -> StageOrder {
    let mut ids = Vec::with_capacity(grid.count() as usize);
    for n in 0..grid.x * grid.y {
        let (tm, tn) = raster_tile(n, grid.x, grid.y, group);
        for z in 0..grid.z {
            ids.push(grid.linear(TileIdx::new(tm, tn, z)));
        }
    }
    StageOrder::Custom(ids)
}

/// Per-launch device times (ms, sorted) of one variant on a graph: `opts.warmup` untimed
/// launches, then `opts.iters` launches each between two CUDA events on the graph's stream;
/// the launches are checked (error slot, counters) once at the end.
pub fn time_graph(graph: &mut PersistentGraph, variant: PersistentVariant, opts: TimingOptions) -> Result<Vec<f32>> {
    let launch = |g: &mut PersistentGraph| match variant {
        PersistentVariant::NoProtocol => g.launch_noprotocol(),
        PersistentVariant::Pipelined | PersistentVariant::NoDependencies => g.launch(),
    };
    for _ in 0..opts.warmup {
        launch(graph)?;
    }
    let mut events = Vec::with_capacity(opts.iters);
    for _ in 0..opts.iters {
        let (start, end) = (graph.context().new_event()?, graph.context().new_event()?);
        graph.stream().record(&start)?;
        launch(graph)?;
        graph.stream().record(&end)?;
        events.push((start, end));
    }
    graph.finish()?;
    let mut samples = events
        .iter()
        .map(|(s, e)| s.elapsed_ms(e))
        .collect::<Result<Vec<f32>>>()?;
    samples.sort_by(f32::total_cmp);
    Ok(samples)
}

/// Median ms of `variant` on the bf16 GeMM stack `m x widths` (RowSync dependency arrays) on
/// the path-1 megakernel, after warm-up (see [`time_graph`]). `opts.rotate` is ignored: the
/// graph is built on one operand set (at the benchmark sizes the operands are far larger than
/// L2 anyway).
pub fn time_persistent_chain(
    cx: &Context,
    m: usize,
    widths: &[usize],
    variant: PersistentVariant,
    opts: TimingOptions,
) -> Result<f64> {
    time_persistent_chain_on(cx, m, widths, WorkerKind::GemmBf16x128, variant, opts)
}

/// [`time_persistent_chain`] with every layer on worker `kind` (path 1 or a path-2 tile).
pub fn time_persistent_chain_on(
    cx: &Context,
    m: usize,
    widths: &[usize],
    kind: WorkerKind,
    variant: PersistentVariant,
    opts: TimingOptions,
) -> Result<f64> {
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let options = PersistentOptions {
        no_dependencies: variant == PersistentVariant::NoDependencies,
        ..PersistentOptions::default()
    };
    let mut graph = PersistentGraph::new(cx, &stack.spec_for(PolicyKind::RowSync, kind)?, options)?;
    Ok(median(&time_graph(&mut graph, variant, opts)?))
}

/// Median ms of `variant` on the 2-layer `[m,8192] x [8192,8192] x [8192,8192]` bf16 stack.
pub fn time_persistent_2layer(cx: &Context, m: usize, variant: PersistentVariant, opts: TimingOptions) -> Result<f64> {
    time_persistent_chain(cx, m, &[8192, 8192, 8192], variant, opts)
}

/// All three variants on one stack of `m x widths` (operands generated once) on the path-1
/// megakernel, in the order no-protocol, no-dependencies, pipelined.
pub fn time_persistent_variants(
    cx: &Context,
    m: usize,
    widths: &[usize],
    opts: TimingOptions,
) -> Result<PersistentTimes> {
    time_persistent_variants_on(cx, m, widths, WorkerKind::GemmBf16x128, opts)
}

/// [`time_persistent_variants`] with every layer on worker `kind` (path 1 or a path-2 tile;
/// [`default_stack_worker`] picks the default).
pub fn time_persistent_variants_on(
    cx: &Context,
    m: usize,
    widths: &[usize],
    kind: WorkerKind,
    opts: TimingOptions,
) -> Result<PersistentTimes> {
    time_persistent_variants_ordered(cx, m, widths, kind, StackOrder::RowMajor, opts)
}

/// The two graphs the variants run on: the pipelined one (whose no-protocol twin launches on
/// it too) and the dependencies-met one, on as many CTAs as the first.
fn variant_graphs<'cx, 'b>(
    cx: &'cx Context,
    spec: &PersistentSpec<'b>,
    priority: SchedulePriority,
) -> Result<(PersistentGraph<'cx, 'b>, PersistentGraph<'cx, 'b>)> {
    let options = PersistentOptions {
        priority,
        ..PersistentOptions::default()
    };
    let pipelined = PersistentGraph::new(cx, spec, options.clone())?;
    let no_deps_options = PersistentOptions {
        no_dependencies: true,
        max_ctas: Some(pipelined.ctas()),
        ..options
    };
    let no_deps = PersistentGraph::new(cx, spec, no_deps_options)?;
    Ok((pipelined, no_deps))
}

/// [`time_persistent_variants_on`] with the stack's queues in `order`.
pub fn time_persistent_variants_ordered(
    cx: &Context,
    m: usize,
    widths: &[usize],
    kind: WorkerKind,
    order: StackOrder,
    opts: TimingOptions,
) -> Result<PersistentTimes> {
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let spec = stack.spec_ordered(PolicyKind::RowSync, kind, order)?;
    let (mut pipelined, mut no_deps) = variant_graphs(cx, &spec, SchedulePriority::DownstreamFirst)?;
    let no_protocol_ms = median(&time_graph(&mut pipelined, PersistentVariant::NoProtocol, opts)?);
    let no_dependencies_ms = median(&time_graph(&mut no_deps, PersistentVariant::NoDependencies, opts)?);
    let pipelined_ms = median(&time_graph(&mut pipelined, PersistentVariant::Pipelined, opts)?);
    Ok(PersistentTimes {
        pipelined_ms,
        no_dependencies_ms,
        no_protocol_ms,
        ctas: pipelined.ctas(),
        tiles: pipelined.total_tiles(),
        kernel: pipelined.family().kernel(),
    })
}

/// Every `run layers` variant on one stack, medians in ms, measured side by side
/// ([`time_layers_side_by_side`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerTimes {
    /// The three megakernel variants (pipelined: under the first policy asked for).
    pub persistent: PersistentTimes,
    /// The pipelined megakernel under each policy asked for, in order: (policy, ms).
    pub pipelined_by_policy: Vec<(Pipelining, f64)>,
    /// Our GeMM in the megakernel's per-tile configuration ([`GemmStack::config_for`]), one
    /// launch per layer back to back: the whole stack.
    pub singles_ms: f64,
    /// Our GeMM's default configuration for each layer, back to back, when asked for.
    pub default_singles_ms: Option<f64>,
    /// cuBLAS back to back (`None`: cuBLAS is not available).
    pub cublas_ms: Option<f64>,
    /// Single-GPU micro-batching with cuBLAS, when asked for and cuBLAS is available.
    pub microbatch: Option<MicrobatchTimes>,
    /// The clocks each variant's timed launches ran at, `(short name, stats)` in the order the
    /// variants were timed (names: [`variant_names`]); `Err`: why none were read (e.g. no
    /// NVML).
    pub clocks: std::result::Result<Vec<(String, ClockStats)>, String>,
    /// Every variant's timed launches, `(short name, ms per round)` in the order of
    /// [`LayerTimes::clocks`]' names, round by round: the rounds pair the variants
    /// ([`LayerTimes::paired`]).
    pub rounds: Vec<(String, Vec<f32>)>,
}

impl LayerTimes {
    /// The per-round times of the variant named `name` ([`variant_names`]); `None` where it was
    /// not timed.
    pub fn round_samples(&self, name: &str) -> Option<&[f32]> {
        self.rounds.iter().find(|(n, _)| n == name).map(|(_, s)| s.as_slice())
    }

    /// The ratio `a / b` of two variants ([`variant_names`]) taken round by round, then its
    /// median and range ([`paired_round_ratios`]); `None` where either was not timed. The
    /// variants of one round ran within a few hundred milliseconds of each other, so what
    /// drifts between rounds (the clock under the power cap, the GPU's temperature) mostly
    /// cancels in each round's ratio.
    pub fn paired(&self, a: &str, b: &str) -> Option<crate::microbench::Stats> {
        paired_round_ratios(self.round_samples(a)?, self.round_samples(b)?)
    }

    /// [`paired_round_signs`] of variants `a` and `b`: in how many rounds `a` was faster, and
    /// in how many slower.
    pub fn paired_signs(&self, a: &str, b: &str) -> Option<(usize, usize)> {
        Some(paired_round_signs(self.round_samples(a)?, self.round_samples(b)?))
    }
}

/// Median, smallest and largest of `a[r] / b[r]` over the rounds `r` where both were timed
/// (positive and finite); `None` where no round has both.
pub fn paired_round_ratios(a: &[f32], b: &[f32]) -> Option<crate::microbench::Stats> {
    let mut ratios: Vec<f64> = timed_pairs(a, b).map(|(x, y)| x as f64 / y as f64).collect();
    (!ratios.is_empty()).then(|| crate::microbench::Stats::of(&mut ratios))
}

/// Of the rounds where both `a[r]` and `b[r]` were timed (positive and finite), how many had
/// `a[r] < b[r]` and how many `a[r] > b[r]` (ties in neither): the sign test's split
/// ([`crate::microbench::sign_test_two_sided`]).
pub fn paired_round_signs(a: &[f32], b: &[f32]) -> (usize, usize) {
    timed_pairs(a, b).fold((0, 0), |(below, above), (x, y)| {
        (below + usize::from(x < y), above + usize::from(x > y))
    })
}

/// The rounds `(a[r], b[r])` where both sides were timed (positive and finite).
fn timed_pairs<'s>(a: &'s [f32], b: &'s [f32]) -> impl Iterator<Item = (f32, f32)> + 's {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x, y))
        .filter(|&(x, y)| x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0)
}

/// Micro-batching in [`time_layers_side_by_side`]: the chunk sweep that picked the best chunk
/// size, and that chunk size timed side by side with the other variants.
#[derive(Clone, Debug, PartialEq)]
pub struct MicrobatchTimes {
    /// The sweep (every chunk size, each checked against the f64 reference on sampled rows).
    pub sweep: MicrobatchResult,
    /// The best chunk size's median in the side-by-side rounds, ms.
    pub best_ms: f64,
}

/// What [`time_layers_side_by_side`] runs beside the megakernel's no-protocol twin and its
/// dependencies-met launch.
#[derive(Clone, Debug, PartialEq)]
pub struct SideBySide {
    /// Queue order of every layer.
    pub order: StackOrder,
    /// The pipelined megakernel under each of these (at least one; the first also gives
    /// [`LayerTimes::persistent`]'s pipelined time, and its priority is the twin's and the
    /// dependencies-met launch's).
    pub policies: Vec<Pipelining>,
    /// Our default GeMM configuration's single launches too.
    pub with_default: bool,
    /// Single-GPU micro-batching with cuBLAS: the chunk size swept
    /// ([`crate::baselines::microbatch::default_chunks`]), the best one timed side by side.
    pub microbatch: bool,
    /// Warm-up rounds and timed rounds.
    pub timing: TimingOptions,
}

/// What one round of [`time_layers_side_by_side`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LayerVariant {
    Twin,
    DepsMet,
    /// The pipelined graph of the `i`-th policy.
    Pipelined(usize),
    Singles,
    DefaultSingles,
    Cublas,
    Microbatch,
}

impl LayerVariant {
    /// The variant's name in [`LayerTimes::clocks`] and [`LayerTimes::rounds`].
    fn short_name(self, policies: &[Pipelining]) -> String {
        match self {
            LayerVariant::Twin => variant_names::TWIN.into(),
            LayerVariant::DepsMet => variant_names::DEPS_MET.into(),
            LayerVariant::Pipelined(i) => variant_names::pipelined(policies[i]),
            LayerVariant::Singles => variant_names::SINGLES.into(),
            LayerVariant::DefaultSingles => variant_names::DEFAULT_SINGLES.into(),
            LayerVariant::Cublas => variant_names::CUBLAS.into(),
            LayerVariant::Microbatch => variant_names::MICROBATCH.into(),
        }
    }
}

/// The short names [`LayerTimes::rounds`] and [`LayerTimes::clocks`] give the variants of
/// [`time_layers_side_by_side`] (what [`LayerTimes::paired`] takes).
pub mod variant_names {
    use super::Pipelining;

    /// The megakernel without protocol code.
    pub const TWIN: &str = "twin";
    /// The megakernel with every dependency met up front.
    pub const DEPS_MET: &str = "deps met";
    /// Our single GeMMs in the megakernel's per-tile configuration.
    pub const SINGLES: &str = "singles";
    /// Our single GeMMs in their default configuration.
    pub const DEFAULT_SINGLES: &str = "default singles";
    /// cuBLAS back to back.
    pub const CUBLAS: &str = "cuBLAS";
    /// Best-chunk micro-batching with cuBLAS.
    pub const MICROBATCH: &str = "micro-batching";

    /// The pipelined megakernel under `p`: "pipelined RowBandSync8, upstream first".
    pub fn pipelined(p: Pipelining) -> String {
        format!("pipelined {}", p.name())
    }
}

/// The megakernel graphs and the micro-batching run of one side-by-side measurement.
struct Graphs<'cx, 'b> {
    /// The first policy's pipelined graph (the twin launches on it too).
    pipelined: PersistentGraph<'cx, 'b>,
    no_deps: PersistentGraph<'cx, 'b>,
    /// The other policies' pipelined graphs.
    others: Vec<PersistentGraph<'cx, 'b>>,
    micro: Option<(Microbatch<'cx>, PreparedRun)>,
}

impl<'cx, 'b> Graphs<'cx, 'b> {
    fn pipelined(&mut self, i: usize) -> &mut PersistentGraph<'cx, 'b> {
        if i == 0 {
            &mut self.pipelined
        } else {
            &mut self.others[i - 1]
        }
    }

    /// Checks every megakernel launch (error slot, counters) and waits for micro-batching.
    fn finish(&mut self) -> Result<()> {
        let mut result = self.pipelined.finish().and(self.no_deps.finish());
        for g in &mut self.others {
            result = result.and(g.finish());
        }
        if let Some((mb, _)) = &self.micro {
            result = result.and(mb.wait_idle());
        }
        result
    }
}

/// Times the megakernel's three variants ([`PersistentVariant`]; the pipelined one under each
/// of `what.policies`), our single GeMMs (the megakernel's per-tile configuration, and with
/// `what.with_default` our default configuration), cuBLAS back to back and, with
/// `what.microbatch`, the best chunk of cuBLAS micro-batching, on one stack of `m x widths`
/// in worker `kind`'s tiles and queue order `what.order`, side by side: after
/// `what.timing.warmup` untimed rounds, each of `what.timing.iters` rounds runs every variant
/// once untimed and once timed (so its code and L2 are as warm as in back-to-back use
/// whichever variant ran before), the timed run from a queued start ([`Context::hold`]), and
/// the round's first variant rotates. Clock drift over the run (the GPU heats up) then falls
/// on every variant alike instead of on whichever is timed last. Every graph's launches are
/// checked at the end.
pub fn time_layers_side_by_side(
    cx: &Context,
    m: usize,
    widths: &[usize],
    kind: WorkerKind,
    what: &SideBySide,
) -> Result<LayerTimes> {
    use crate::baselines::cublas::Cublas;
    use crate::ops::gemm::Gemm;

    let (order, policies, opts) = (what.order, &what.policies, what.timing);
    let Some(&first_policy) = policies.first() else {
        return Err(Error::InvalidArgument(
            "time the pipelined megakernel under at least one policy".into(),
        ));
    };
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let spec = stack.spec_ordered(first_policy.policy.edge_policy(), kind, order)?;
    let (pipelined, no_deps) = variant_graphs(cx, &spec, first_policy.priority)?;
    // The other policies' pipelined graphs, on as many blocks as the first.
    let mut others = Vec::with_capacity(policies.len() - 1);
    for p in &policies[1..] {
        let options = PersistentOptions {
            max_ctas: Some(pipelined.ctas()),
            priority: p.priority,
            ..PersistentOptions::default()
        };
        others.push(PersistentGraph::new(
            cx,
            &stack.spec_ordered(p.policy.edge_policy(), kind, order)?,
            options,
        )?);
    }
    let layers = stack.weights.len();
    // Layer i reads x (i = 0) or layer i - 1's output and writes its own.
    let addrs: Vec<(u64, u64, u64)> = (0..layers)
        .map(|i| {
            let a = if i == 0 {
                stack.x.addr()
            } else {
                stack.outputs[i - 1].addr()
            };
            (a, stack.weights[i].addr(), stack.outputs[i].addr())
        })
        .collect();
    let same: Vec<Gemm> = (0..layers)
        .map(|i| Gemm::new(cx, stack.config_for(i, kind)))
        .collect::<Result<_>>()?;
    let defaults: Vec<GemmConfig> = (0..layers)
        .map(|i| GemmConfig::new(m, widths[i + 1], widths[i]))
        .collect();
    let default_gemms: Vec<Gemm> = if what.with_default {
        defaults.iter().map(|c| Gemm::new(cx, *c)).collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let singles_stream = cx.new_stream()?;
    let blas = Cublas::new(&singles_stream).ok();
    // Micro-batching: its own operands (it checks its results), the chunk size swept first.
    let (micro, sweep) = if what.microbatch && blas.is_some() {
        // Checking every chunk size downloads every layer each time (gigabytes at 8 layers):
        // the best one is checked, once, before it is timed.
        let sweep_opts = MicrobatchOptions {
            warmup: 1,
            iters: opts.iters.clamp(1, 5),
            verify: false,
            ..MicrobatchOptions::default()
        };
        let mut mb = Microbatch::new(cx, m, widths, sweep_opts.streams, sweep_opts.seed)?;
        let mut sweep = mb.sweep(&default_chunks(m), &sweep_opts)?;
        let err = mb.check_chunk(sweep.best_chunk)?;
        if let Some(t) = sweep.per_chunk.iter_mut().find(|t| t.chunk == sweep.best_chunk) {
            t.error = Some(err);
        }
        let (run, _) = mb.prepare(sweep.best_chunk, true)?;
        (Some((mb, run)), Some(sweep))
    } else {
        (None, None)
    };
    let mut g = Graphs {
        pipelined,
        no_deps,
        others,
        micro,
    };

    let mut variants = vec![LayerVariant::Twin, LayerVariant::DepsMet];
    variants.extend((0..policies.len()).map(LayerVariant::Pipelined));
    variants.push(LayerVariant::Singles);
    if what.with_default {
        variants.push(LayerVariant::DefaultSingles);
    }
    if blas.is_some() {
        variants.push(LayerVariant::Cublas);
    }
    if g.micro.is_some() {
        variants.push(LayerVariant::Microbatch);
    }
    let enqueue = |v: LayerVariant, g: &mut Graphs| -> Result<()> {
        match v {
            LayerVariant::Twin => g.pipelined.launch_noprotocol(),
            LayerVariant::DepsMet => g.no_deps.launch(),
            LayerVariant::Pipelined(i) => g.pipelined(i).launch(),
            LayerVariant::Singles | LayerVariant::DefaultSingles => {
                let gemms = if v == LayerVariant::Singles {
                    &same
                } else {
                    &default_gemms
                };
                for (gemm, &(a, b, c)) in gemms.iter().zip(&addrs) {
                    // SAFETY: the stack's buffers have exactly layer i's shapes and types and
                    // outlive the stream's work (synchronized before they are dropped).
                    unsafe { gemm.launch_params(&singles_stream, &gemm.params(a, b, c, 0))? };
                }
                Ok(())
            }
            LayerVariant::Cublas => {
                let blas = blas.as_ref().expect("cuBLAS variant only with a handle");
                for (cfg, &(a, b, c)) in defaults.iter().zip(&addrs) {
                    // SAFETY: as above.
                    unsafe { blas.gemm_addrs(cfg, a, b, c)? };
                }
                Ok(())
            }
            LayerVariant::Microbatch => {
                let (mb, run) = g.micro.as_mut().expect("micro-batching variant only when prepared");
                mb.launch(run)
            }
        }
    };
    // The stream a variant's launches go to (its events are recorded there).
    let stream_of = |v: LayerVariant, g: &mut Graphs| -> Stream {
        match v {
            LayerVariant::Twin => g.pipelined.stream().clone(),
            LayerVariant::Pipelined(i) => g.pipelined(i).stream().clone(),
            LayerVariant::DepsMet => g.no_deps.stream().clone(),
            LayerVariant::Microbatch => g
                .micro
                .as_ref()
                .map_or_else(|| singles_stream.clone(), |(mb, _)| mb.main_stream().clone()),
            LayerVariant::Singles | LayerVariant::DefaultSingles | LayerVariant::Cublas => singles_stream.clone(),
        }
    };
    let mut samples: Vec<Vec<f32>> = vec![Vec::with_capacity(opts.iters); variants.len()];
    // Each variant's timed windows on the host clock (the hold before its launches included),
    // and the device's clocks sampled through them.
    let mut windows: Vec<Vec<(Instant, Instant)>> = vec![Vec::with_capacity(opts.iters); variants.len()];
    let sampler = ClockSampler::start(cx, CLOCK_SAMPLE_PERIOD);
    let result = (|| -> Result<()> {
        for _ in 0..opts.warmup {
            for &v in &variants {
                enqueue(v, &mut g)?;
            }
        }
        for round in 0..opts.iters {
            for j in 0..variants.len() {
                let slot = (round + j) % variants.len();
                let v = variants[slot];
                enqueue(v, &mut g)?;
                let stream = stream_of(v, &mut g);
                let (start, end) = (cx.new_event()?, cx.new_event()?);
                let from = Instant::now();
                cx.hold(&stream, crate::runtime::TIMING_HOLD_NS)?;
                stream.record(&start)?;
                enqueue(v, &mut g)?;
                stream.record(&end)?;
                stream.synchronize()?;
                windows[slot].push((from, Instant::now()));
                samples[slot].push(start.elapsed_ms(&end)?);
            }
        }
        Ok(())
    })();
    // Whatever happened, nothing may still read the stack when it is dropped.
    let synced = singles_stream.synchronize();
    let checked = g.finish();
    result?;
    synced?;
    checked?;
    let median_of = |v: LayerVariant| variants.iter().position(|&x| x == v).map(|i| median(&samples[i]));
    let clock_samples = sampler.map(ClockSampler::stop);
    let clocks = clock_samples.map(|cs| {
        variants
            .iter()
            .zip(&windows)
            .filter_map(|(&v, w)| ClockStats::within(&cs, w).map(|st| (v.short_name(policies), st)))
            .collect()
    });
    Ok(LayerTimes {
        persistent: PersistentTimes {
            pipelined_ms: median_of(LayerVariant::Pipelined(0)).unwrap_or(0.0),
            no_dependencies_ms: median_of(LayerVariant::DepsMet).unwrap_or(0.0),
            no_protocol_ms: median_of(LayerVariant::Twin).unwrap_or(0.0),
            ctas: g.pipelined.ctas(),
            tiles: g.pipelined.total_tiles(),
            kernel: g.pipelined.family().kernel(),
        },
        pipelined_by_policy: policies
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, median_of(LayerVariant::Pipelined(i)).unwrap_or(0.0)))
            .collect(),
        singles_ms: median_of(LayerVariant::Singles).unwrap_or(0.0),
        default_singles_ms: median_of(LayerVariant::DefaultSingles),
        cublas_ms: median_of(LayerVariant::Cublas),
        microbatch: sweep.map(|sweep| MicrobatchTimes {
            sweep,
            best_ms: median_of(LayerVariant::Microbatch).unwrap_or(0.0),
        }),
        clocks,
        rounds: variants
            .iter()
            .zip(samples)
            .map(|(&v, s)| (v.short_name(policies), s))
            .collect(),
    })
}

/// How often [`time_layers_side_by_side`] reads the clocks (each variant's timed launches take
/// 3 to 30 ms at the paper's shapes, so a few samples land in each).
const CLOCK_SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raster_order_is_the_plain_kernels_permutation() {
        let grid = Grid::new(5, 7, 2);
        let StageOrder::Custom(ids) = raster_order(grid, 4) else {
            panic!("a custom order")
        };
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..grid.count()).collect::<Vec<_>>(), "a permutation");
        // Groups of 4 row tiles, column by column; split-K slices adjacent.
        assert_eq!(grid.tile(ids[0]), TileIdx::new(0, 0, 0));
        assert_eq!(grid.tile(ids[1]), TileIdx::new(0, 0, 1));
        assert_eq!(grid.tile(ids[2]), TileIdx::new(1, 0, 0));
        assert_eq!(grid.tile(ids[8]), TileIdx::new(0, 1, 0));
        // The last group holds the one remaining row tile.
        assert_eq!(grid.tile(ids[4 * 7 * 2]), TileIdx::new(4, 0, 0));
        assert_eq!(StackOrder::parse("raster").unwrap(), StackOrder::Raster);
        assert!(StackOrder::parse("diagonal")
            .unwrap_err()
            .to_string()
            .contains("row or raster"));
    }

    #[test]
    fn stack_policies_parse_and_name_their_edge_policy() {
        assert_eq!(
            StackPolicy::parse("band").unwrap(),
            StackPolicy::Band { rows: WG_RASTER_GROUP }
        );
        assert_eq!(StackPolicy::parse("band16").unwrap(), StackPolicy::Band { rows: 16 });
        assert!(StackPolicy::parse("band0").is_err());
        assert_eq!(StackPolicy::parse("rowsync").unwrap(), StackPolicy::RowSync);
        assert!(StackPolicy::parse("tilesync")
            .unwrap_err()
            .to_string()
            .contains("rowsync, band or bandN"));
        assert_eq!(StackPolicy::RowSync.name(), "RowSync");
        assert_eq!(StackPolicy::Band { rows: 4 }.name(), "RowBandSync4");
        let p = Pipelining {
            policy: StackPolicy::Band { rows: 8 },
            priority: SchedulePriority::UpstreamFirst,
        };
        assert_eq!(p.name(), "RowBandSync8, upstream first");
        assert!(matches!(
            StackPolicy::RowSync.edge_policy(),
            EdgePolicy::Builtin(PolicyKind::RowSync)
        ));
    }

    #[test]
    fn paired_round_ratios_pair_equal_rounds_and_skip_missing_ones() {
        // Round 1 is 10% slower on both sides (drift): its ratio is the others'.
        let a = [1.02f32, 1.122, 1.02, f32::NAN, 1.05];
        let b = [1.0f32, 1.1, 1.0, 1.0, 0.0];
        let st = paired_round_ratios(&a, &b).expect("three rounds have both");
        assert_eq!(st.samples, 3);
        assert!((st.median - 1.02).abs() < 1e-6, "{st:?}");
        assert!((st.max - 1.02).abs() < 1e-6 && (st.min - 1.02).abs() < 1e-6, "{st:?}");
        // Series of different lengths pair only the rounds both have.
        let st = paired_round_ratios(&[2.0, 3.0, 9.0], &[1.0, 1.0]).unwrap();
        assert_eq!((st.samples, st.min, st.max), (2, 2.0, 3.0));
        assert!(paired_round_ratios(&[1.0], &[]).is_none());
        assert!(paired_round_ratios(&[f32::NAN], &[1.0]).is_none());
        // The sign test's split: ties and rounds missing a side count on neither side.
        assert_eq!(paired_round_signs(&a, &b), (0, 3));
        assert_eq!(paired_round_signs(&[1.0, 2.0, 2.0, 0.5], &[2.0, 2.0, 1.0, 1.0]), (2, 1));
        assert_eq!(paired_round_signs(&[f32::NAN, 1.0], &[1.0]), (0, 0));

        let times = LayerTimes {
            persistent: PersistentTimes {
                pipelined_ms: 1.0,
                no_dependencies_ms: 1.0,
                no_protocol_ms: 1.0,
                ctas: 1,
                tiles: 1,
                kernel: "k",
            },
            pipelined_by_policy: Vec::new(),
            singles_ms: 1.0,
            default_singles_ms: None,
            cublas_ms: None,
            microbatch: None,
            clocks: Err("none".into()),
            rounds: vec![
                (variant_names::DEPS_MET.into(), vec![1.03, 1.2]),
                (variant_names::TWIN.into(), vec![1.0, 1.2]),
            ],
        };
        let st = times.paired(variant_names::DEPS_MET, variant_names::TWIN).unwrap();
        assert!((st.median - 1.015).abs() < 1e-6 && st.min == 1.0, "{st:?}");
        assert!(times.paired(variant_names::DEPS_MET, variant_names::CUBLAS).is_none());
    }
}
