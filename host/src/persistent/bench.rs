//! Timing the persistent megakernel on GeMM stacks (issue 5's benchmarks): the 2-layer
//! `[M,8192] x [8192,8192] x [8192,8192]` bf16 MLP and deeper stacks, in three variants
//! ([`PersistentVariant`]), so a benchmark script can put them next to the single GeMMs
//! (`ops::gemm::time_gemm`) and cuBLAS (`baselines::cublas`).

use half::bf16;
use rand::{Rng, SeedableRng};

use cusync_shared::policy::{Dependency, PolicyKind};

use super::graph::PersistentGraph;
use super::spec::{PersistentOptions, PersistentSpec};
use super::work::StageWork;
use crate::ops::gemm::{median, GemmConfig, TileConfig, TimingOptions};
use crate::{Context, DeviceBuffer, Error, Result};

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

    /// Layer `i`'s problem (bf16 in and out, row-major, 128 x 128 tiles).
    pub fn config(&self, i: usize) -> GemmConfig {
        GemmConfig::new(self.m, self.widths[i + 1], self.widths[i]).tile(TileConfig::T128x128)
    }

    /// The stack as a persistent graph: one tensor-core stage per layer, layer `i + 1` reading
    /// layer `i`'s rows (`Dependency::GemmRow`) under `policy`.
    pub fn spec(&self, policy: PolicyKind) -> Result<PersistentSpec<'_>> {
        let mut spec = PersistentSpec::new();
        let mut prev = None;
        for i in 0..self.weights.len() {
            let a = if i == 0 { &self.x } else { &self.outputs[i - 1] };
            let work = StageWork::gemm_bf16(&self.config(i), a, &self.weights[i], &self.outputs[i], None)?;
            let id = spec.stage(format!("layer{i}"), work);
            if let Some(p) = prev {
                spec.edge(p, id, Dependency::GemmRow, policy);
            }
            prev = Some(id);
        }
        Ok(spec)
    }
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

/// Median ms of `variant` on the bf16 GeMM stack `m x widths` (RowSync dependency arrays),
/// after warm-up (see [`time_graph`]). `opts.rotate` is ignored: the graph is built on one
/// operand set (at the benchmark sizes the operands are far larger than L2 anyway).
pub fn time_persistent_chain(
    cx: &Context,
    m: usize,
    widths: &[usize],
    variant: PersistentVariant,
    opts: TimingOptions,
) -> Result<f64> {
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let options = PersistentOptions {
        no_dependencies: variant == PersistentVariant::NoDependencies,
        ..PersistentOptions::default()
    };
    let mut graph = PersistentGraph::new(cx, &stack.spec(PolicyKind::RowSync)?, options)?;
    Ok(median(&time_graph(&mut graph, variant, opts)?))
}

/// Median ms of `variant` on the 2-layer `[m,8192] x [8192,8192] x [8192,8192]` bf16 stack.
pub fn time_persistent_2layer(cx: &Context, m: usize, variant: PersistentVariant, opts: TimingOptions) -> Result<f64> {
    time_persistent_chain(cx, m, &[8192, 8192, 8192], variant, opts)
}

/// All three variants on one stack of `m x widths` (operands generated once), in the order
/// no-protocol, no-dependencies, pipelined.
pub fn time_persistent_variants(
    cx: &Context,
    m: usize,
    widths: &[usize],
    opts: TimingOptions,
) -> Result<PersistentTimes> {
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let spec = stack.spec(PolicyKind::RowSync)?;
    let mut pipelined = PersistentGraph::new(cx, &spec, PersistentOptions::default())?;
    let no_deps_options = PersistentOptions {
        no_dependencies: true,
        max_ctas: Some(pipelined.ctas()),
        ..PersistentOptions::default()
    };
    let mut no_deps = PersistentGraph::new(cx, &spec, no_deps_options)?;
    let no_protocol_ms = median(&time_graph(&mut pipelined, PersistentVariant::NoProtocol, opts)?);
    let no_dependencies_ms = median(&time_graph(&mut no_deps, PersistentVariant::NoDependencies, opts)?);
    let pipelined_ms = median(&time_graph(&mut pipelined, PersistentVariant::Pipelined, opts)?);
    Ok(PersistentTimes {
        pipelined_ms,
        no_dependencies_ms,
        no_protocol_ms,
        ctas: pipelined.ctas(),
        tiles: pipelined.total_tiles(),
    })
}
