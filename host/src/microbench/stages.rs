//! Whole-stage microbenchmarks (issues 6 and 7): a persistent stage pair with the protocol on
//! and off, and what tracing costs when it is compiled in but switched off, against switched
//! on and against the kernel without hooks; and what it costs the plain (unsynchronized)
//! GeMM kernels StreamSync runs, off against on ([`PlainGemmTracing`]).
//!
//! Each type here owns (or borrows) its operands and graphs, built once; `time_us` is one
//! launch timed with CUDA events, so `microbench::repeat` and criterion's `iter_custom` can
//! sample it.

use cusync_shared::policy::PolicyKind;

use cusync_shared::gemm::GemmParams;
use cusync_shared::gemm_sm90::WG_RASTER_GROUP;
use half::bf16;
use rand::SeedableRng;

use crate::error::Result;
use crate::mlp::{Mlp, MlpOrder, MlpShape};
use crate::ops::gemm::{Epilogue, Gemm, GemmConfig, TimingOptions};
use crate::persistent::bench::{time_graph, GemmStack};
use crate::persistent::{PersistentGraph, PersistentOptions, PersistentVariant};
use crate::runtime::{Context, DeviceBuffer, Stream};
use crate::stream::StreamGraph;

/// Rows and widths of the persistent pair: `[4096,4096] x [4096,4096] x [4096,4096]` bf16,
/// 32 x 32 tiles of 128 x 128 per layer (2048 tiles, several waves of persistent blocks).
pub const PAIR_M: usize = 4096;
/// See [`PAIR_M`].
pub const PAIR_WIDTH: usize = 4096;

/// The operands of the persistent pair ([`PAIR_M`] x [`PAIR_WIDTH`], two layers).
pub fn pair_stack(cx: &Context) -> Result<GemmStack> {
    GemmStack::new(cx, PAIR_M, &[PAIR_WIDTH, PAIR_WIDTH, PAIR_WIDTH], 0x5eed_0007)
}

/// What [`PersistentPair::time_us`] launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairVariant {
    /// The megakernel's no-protocol twin: tiles from one plain counter, nothing waits or posts
    /// (protocol off).
    NoProtocol,
    /// The megakernel with the protocol on but no real dependency: every tile of both layers
    /// prefilled in its queue, nothing waits, posts skip the scoreboard walk.
    NoDependencies,
    /// The megakernel pipelined: layer 2's tiles wait for their rows of layer 1 (RowSync
    /// dependency arrays), tracing compiled in and off.
    Pipelined,
    /// [`PairVariant::Pipelined`] with tracing on (one event per tile).
    PipelinedTraced,
}

/// A 2-layer bf16 GeMM stack as persistent graphs, one per variant (all with the pipelined
/// graph's block count), over one set of operands.
pub struct PersistentPair<'cx, 'b> {
    pipelined: PersistentGraph<'cx, 'b>,
    no_dependencies: PersistentGraph<'cx, 'b>,
    traced: PersistentGraph<'cx, 'b>,
}

impl<'cx, 'b> PersistentPair<'cx, 'b> {
    /// The graphs over `stack` (RowSync between the layers).
    pub fn new(cx: &'cx Context, stack: &'b GemmStack) -> Result<Self> {
        let spec = stack.spec(PolicyKind::RowSync)?;
        let pipelined = PersistentGraph::new(cx, &spec, PersistentOptions::default())?;
        let same_blocks = |no_dependencies, trace| PersistentOptions {
            no_dependencies,
            trace,
            max_ctas: Some(pipelined.ctas()),
            ..PersistentOptions::default()
        };
        Ok(Self {
            no_dependencies: PersistentGraph::new(cx, &spec, same_blocks(true, false))?,
            traced: PersistentGraph::new(cx, &spec, same_blocks(false, true))?,
            pipelined,
        })
    }

    /// Device µs of one launch of `variant` (CUDA events; checked after the launch).
    pub fn time_us(&mut self, variant: PairVariant) -> Result<f64> {
        let once = TimingOptions {
            warmup: 0,
            iters: 1,
            rotate: false,
        };
        let (graph, v) = match variant {
            PairVariant::NoProtocol => (&mut self.pipelined, PersistentVariant::NoProtocol),
            PairVariant::NoDependencies => (&mut self.no_dependencies, PersistentVariant::NoDependencies),
            PairVariant::Pipelined => (&mut self.pipelined, PersistentVariant::Pipelined),
            PairVariant::PipelinedTraced => (&mut self.traced, PersistentVariant::Pipelined),
        };
        Ok(time_graph(graph, v, once)?[0] as f64 * 1e3)
    }

    /// Blocks per launch (every variant).
    pub fn ctas(&self) -> u32 {
        self.pipelined.ctas()
    }

    /// Tiles of both layers per launch.
    pub fn tiles(&self) -> u32 {
        self.pipelined.total_tiles()
    }
}

/// The GPT-3 MLP batch of the stream-mode tracing benchmark (path-2 stages).
pub const TRACING_BATCH: usize = 1024;

/// The GPT-3 MLP batch of the small-batch stages' hooks benchmark: the device's default
/// stages at B = 1 (`MlpKernel::default_for`: the 128 x 16 tile on the H100 and H200, the
/// skinny kernels elsewhere).
pub const SKINNY_TRACING_BATCH: usize = 1;

/// What [`StreamStageTracing::time_us`] launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracingVariant {
    /// The unsynchronized GeMM kernel (`NoHooks`: no protocol and no trace code at all).
    NoHooks,
    /// The stream-mode GeMM kernel as a one-stage graph (hooks take tiles in the plain
    /// kernel's order, nothing to wait on; posts to no consumer), tracing compiled in and
    /// switched off (`desc.trace == 0`).
    TraceOff,
    /// The same graph with tracing on (one event per tile).
    TraceOn,
}

/// GeMM1 of the GPT-3 MLP ([`TRACING_BATCH`]) alone, three ways ([`TracingVariant`]).
pub struct StreamStageTracing<'cx> {
    mlp: Mlp<'cx>,
    off: StreamGraph<'cx>,
    on: StreamGraph<'cx>,
}

impl<'cx> StreamStageTracing<'cx> {
    /// [`StreamStageTracing::at_batch`] at [`TRACING_BATCH`] (path-2 stages).
    pub fn new(cx: &'cx Context) -> Result<Self> {
        Self::at_batch(cx, TRACING_BATCH)
    }

    /// Uploads the GPT-3 MLP's operands at `batch` (the batch's default kernel) and builds the
    /// two graphs, in the plain kernel's own tile order (bands of [`WG_RASTER_GROUP`] row
    /// tiles, column by column: `raster_tile`; the skinny stages take ranges, no order), so
    /// hooks against NoHooks measures the protocol code alone, not a different walk of L2.
    pub fn at_batch(cx: &'cx Context, batch: usize) -> Result<Self> {
        let mlp = Mlp::new(cx, MlpShape::gpt3(batch), None, 0x5eed_0006)?;
        let order = MlpOrder::Banded(WG_RASTER_GROUP);
        let off = mlp.graph_gemm1_alone(order)?;
        let mut on = mlp.graph_gemm1_alone(order)?;
        on.set_trace(true)?;
        Ok(Self { mlp, off, on })
    }

    /// Device µs of one launch of `variant` (CUDA events).
    pub fn time_us(&mut self, variant: TracingVariant) -> Result<f64> {
        match variant {
            // One untimed and one timed launch of the unsynchronized kernel.
            TracingVariant::NoHooks => Ok(self.mlp.hooks_overhead(&[], 1)?.0),
            // One untimed and one timed launch each, as for NoHooks: every variant's code is as
            // warm as in back-to-back use, whichever variant ran before.
            TracingVariant::TraceOff => {
                self.mlp.run_graph(&mut self.off)?;
                Ok(self.mlp.run_graph(&mut self.off)?.elapsed_ms as f64 * 1e3)
            }
            TracingVariant::TraceOn => {
                self.mlp.run_graph(&mut self.on)?;
                let run = self.mlp.run_graph(&mut self.on)?;
                let (grid, _) = self.mlp.grids();
                let events: usize = run.traces.iter().map(Vec::len).sum();
                if events != grid.count() as usize {
                    return Err(crate::Error::Verification(format!(
                        "traced GeMM1 left {events} trace events for {} tiles",
                        grid.count()
                    )));
                }
                Ok(run.elapsed_ms as f64 * 1e3)
            }
        }
    }

    /// Device µs of `a` and of `b` ([`StreamStageTracing::time_us`]), launched back to back,
    /// `a` first when `a_first`: one interleaved pair. Alternating the order over pairs and
    /// taking each pair's ratio cancels what drifts between pairs (clocks, temperature), which
    /// timing the variants one after another (criterion's groups) cannot.
    pub fn time_pair_us(&mut self, a: TracingVariant, b: TracingVariant, a_first: bool) -> Result<(f64, f64)> {
        if a_first {
            let ta = self.time_us(a)?;
            Ok((ta, self.time_us(b)?))
        } else {
            let tb = self.time_us(b)?;
            Ok((self.time_us(a)?, tb))
        }
    }

    /// Tiles of the stage.
    pub fn tiles(&self) -> u32 {
        self.mlp.grids().0.count()
    }

    /// The stage's kernel family and tile ("wg128x192", "skinny", ...).
    pub fn kernel_name(&self) -> String {
        self.mlp.tile().name()
    }
}

/// One stage's steady-state tile periods (ns, [`crate::trace::tile_periods`]) under StreamSync
/// and under the serialized graph ([`StreamPairOverhead::tile_periods`]), and, for a launch in
/// which every CTA runs one tile (no period), those tiles' spans from the CTA's entry to posted
/// ([`crate::trace::single_tile_spans`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StagePeriods {
    /// The stage ("gemm1+gelu", "gemm2").
    pub stage: &'static str,
    /// StreamSync's periods.
    pub plain: crate::trace::Stats,
    /// The serialized graph's periods.
    pub hooked: crate::trace::Stats,
    /// StreamSync's spans of tiles whose CTA ran no other tile of the stage.
    pub plain_spans: crate::trace::Stats,
    /// The serialized graph's spans of tiles whose CTA ran no other tile of the stage.
    pub hooked_spans: crate::trace::Stats,
    /// StreamSync's lead-ins (entry to main loop) of the same tiles.
    pub plain_lead_ins: crate::trace::Stats,
    /// The serialized graph's lead-ins of the same tiles.
    pub hooked_lead_ins: crate::trace::Stats,
    /// Per traced launch pair, the graph's median over StreamSync's, minus one: of the periods
    /// where both sides have them, else of the one-tile spans ([`launch_ratio`]). Launches a
    /// few µs apart share their clocks, so these pair off what drifts between launches.
    pub paired: Vec<f64>,
}

impl StagePeriods {
    /// The statistics of both sides' periods (no spans).
    pub fn of(stage: &'static str, plain: Vec<u64>, hooked: Vec<u64>) -> Self {
        Self::with_spans(stage, [plain, hooked], Default::default(), Default::default())
    }

    /// The statistics of both sides' periods, one-tile spans and their lead-ins
    /// (`[StreamSync, graph]` each).
    pub fn with_spans(
        stage: &'static str,
        [plain, hooked]: [Vec<u64>; 2],
        [plain_spans, hooked_spans]: [Vec<u64>; 2],
        [plain_lead_ins, hooked_lead_ins]: [Vec<u64>; 2],
    ) -> Self {
        use crate::trace::Stats;
        Self {
            stage,
            plain: Stats::of(plain),
            hooked: Stats::of(hooked),
            plain_spans: Stats::of(plain_spans),
            hooked_spans: Stats::of(hooked_spans),
            plain_lead_ins: Stats::of(plain_lead_ins),
            hooked_lead_ins: Stats::of(hooked_lead_ins),
            paired: Vec::new(),
        }
    }

    /// The same, with the per-launch paired ratios ([`StagePeriods::paired`]).
    pub fn with_paired(self, paired: Vec<f64>) -> Self {
        Self { paired, ..self }
    }

    /// The median and the range of [`StagePeriods::paired`]; `None` without a pair.
    pub fn paired_stats(&self) -> Option<crate::microbench::Stats> {
        let mut v: Vec<f64> = self.paired.iter().copied().filter(|r| r.is_finite()).collect();
        (!v.is_empty()).then(|| crate::microbench::Stats::of(&mut v))
    }

    /// Whether the figure is the one-tile spans' (no period on either side) rather than the
    /// periods'.
    pub fn by_spans(&self) -> bool {
        self.plain.count == 0 || self.hooked.count == 0
    }

    /// The median period with the protocol over the median without, minus one; where either
    /// side has no period (every CTA ran one tile of the stage), the same of the one-tile
    /// spans; NaN where neither exists.
    pub fn overhead(&self) -> f64 {
        median_ratio([&self.plain, &self.hooked], [&self.plain_spans, &self.hooked_spans])
    }

    /// "gemm2 +0.84% (48.37 against 47.97 µs, 380 / 380 periods)", "gemm2 +0.84% (one tile
    /// per CTA: span from the CTA's entry to posted 48.37 against 47.97 µs, of which entry to
    /// main loop 2.61 against 2.60, 96 / 96 tiles)", or why there is no figure.
    pub fn describe(&self) -> String {
        let o = self.overhead();
        if o.is_nan() {
            return format!(
                "{} n/a (a CTA ran at most one tile, and no span was traced)",
                self.stage
            );
        }
        let us = |s: &crate::trace::Stats| s.median_ns / 1e3;
        let (plain, hooked, what, lead_in, unit) = if self.by_spans() {
            (
                &self.plain_spans,
                &self.hooked_spans,
                "one tile per CTA: span from the CTA's entry to posted ",
                format!(
                    ", of which entry to main loop {:.2} against {:.2}",
                    us(&self.hooked_lead_ins),
                    us(&self.plain_lead_ins)
                ),
                "tiles",
            )
        } else {
            (&self.plain, &self.hooked, "", String::new(), "periods")
        };
        let paired = self.paired_stats().map_or(String::new(), |p| {
            format!(
                "; paired by launch {:+.2}% (range {:+.2}% to {:+.2}%, {} launches)",
                p.median * 100.0,
                p.min * 100.0,
                p.max * 100.0,
                p.samples
            )
        });
        format!(
            "{} {:+.2}% ({what}{:.2} against {:.2} µs{lead_in}, {} / {} {unit}{paired})",
            self.stage,
            o * 100.0,
            us(hooked),
            us(plain),
            hooked.count,
            plain.count
        )
    }
}

/// One launch pair's figure for a stage: the graph's median over StreamSync's, minus one, of
/// the periods where both sides have some, else of the one-tile spans; `None` where neither
/// is on both sides. Each argument is `[periods, spans]` of one side's launch.
pub fn launch_ratio([plain_periods, plain_spans]: [&[u64]; 2], [periods, spans]: [&[u64]; 2]) -> Option<f64> {
    let stats = |v: &[u64]| crate::trace::Stats::of(v.to_vec());
    let r = median_ratio(
        [&stats(plain_periods), &stats(periods)],
        [&stats(plain_spans), &stats(spans)],
    );
    r.is_finite().then_some(r)
}

/// The graph's median over StreamSync's, minus one, of the periods (`[StreamSync, graph]`)
/// where both sides have some, else of the one-tile spans; NaN where neither is on both sides
/// or StreamSync's median is 0. [`StagePeriods::overhead`] over pooled launches, and
/// [`launch_ratio`] per launch pair.
fn median_ratio(
    [plain, hooked]: [&crate::trace::Stats; 2],
    [plain_spans, hooked_spans]: [&crate::trace::Stats; 2],
) -> f64 {
    let (plain, hooked) = if plain.count == 0 || hooked.count == 0 {
        (plain_spans, hooked_spans)
    } else {
        (plain, hooked)
    };
    if plain.count == 0 || hooked.count == 0 || plain.median_ns <= 0.0 {
        return f64::NAN;
    }
    hooked.median_ns / plain.median_ns - 1.0
}

/// What [`StreamPairOverhead::tile_periods`] measured: each stage's periods or one-tile spans,
/// and each launch's boundary gap ([`crate::trace::boundary_gap`]: GeMM2's first dispatch less
/// GeMM1's last end), StreamSync's and the serialized graph's.
#[derive(Clone, Debug, PartialEq)]
pub struct PairPeriods {
    /// GeMM1's and GeMM2's.
    pub stages: [StagePeriods; 2],
    /// `[StreamSync, graph]`: one gap per traced launch, ns.
    pub boundary_ns: [Vec<i64>; 2],
}

impl PairPeriods {
    /// The median boundary gap of `side` (0: StreamSync, 1: the graph), µs; NaN without one.
    pub fn boundary_us(&self, side: usize) -> f64 {
        let mut gaps_ns: Vec<f64> = self.boundary_ns[side].iter().map(|&ns| ns as f64).collect();
        if gaps_ns.is_empty() {
            return f64::NAN;
        }
        crate::microbench::Stats::of(&mut gaps_ns).median / 1e3
    }

    /// Both stages' figures, then the boundary: "gemm1+gelu ...; gemm2 ...; GeMM2's first block
    /// 1.10 µs after GeMM1's last post (StreamSync 5.76)".
    pub fn describe(&self) -> String {
        let stages: Vec<String> = self.stages.iter().map(StagePeriods::describe).collect();
        format!(
            "{}; GeMM2's first block {:.2} µs after GeMM1's last post (StreamSync {:.2})",
            stages.join("; "),
            self.boundary_us(1),
            self.boundary_us(0)
        )
    }
}

/// With this environment variable set to a directory, [`StreamPairOverhead::tile_periods`]
/// (`cusync bench`'s per-tile lines) saves each side's last traced launch there.
pub const BENCH_TRACE_DIR_ENV: &str = "CUSYNC_BENCH_TRACE_DIR";

/// The policies [`StreamPairOverhead`] runs: NoSync (both stages' stream-mode kernels with no
/// edge between them: the hooks' code without a post or a wait, so the difference to RowSync is
/// the edge's own cost), RowSync (one wait per consumer tile) and TileSync (one wait per
/// producer column tile a consumer tile reads: the most waits of the built-in policies).
pub const PAIR_OVERHEAD_POLICIES: [PolicyKind; 3] = [PolicyKind::NoSync, PolicyKind::RowSync, PolicyKind::TileSync];

/// How reports name the serialized graph with `policy`: "RowSync, every wait met", or, for
/// NoSync, "NoSync, no edge" (the hooks' code alone).
pub fn pair_variant_label(policy: PolicyKind) -> String {
    if policy == PolicyKind::NoSync {
        format!("{}, no edge", policy.name())
    } else {
        format!("{}, every wait met", policy.name())
    }
}

/// The MLP's stages as [`StreamPairOverhead`] runs them: serialized, in StreamSync's order,
/// with the edge `policy` synchronizes (none under NoSync:
/// [`Mlp::graph_serialized_without_edge`]).
fn serialized_graph<'cx>(mlp: &Mlp<'cx>, policy: PolicyKind) -> Result<StreamGraph<'cx>> {
    let order = MlpOrder::Banded(WG_RASTER_GROUP);
    if policy == PolicyKind::NoSync {
        return mlp.graph_serialized_without_edge(order);
    }
    let mut g = mlp.graph_ordered(policy, crate::stream::WaitKernelPolicy::Never, order)?;
    g.set_serialized(true);
    Ok(g)
}

/// The GPT-3 MLP's two GeMMs ([`Mlp`]) launched two ways on one stream: StreamSync (the plain
/// kernels, no protocol code) and the stream-mode graph serialized
/// ([`StreamGraph::set_serialized`]: GeMM2 starts after GeMM1 ended), where every tile takes a
/// ticket, GeMM1's tiles post to the edge's semaphores and GeMM2's tiles make every wait their
/// policy asks for, each met at its first poll. The difference is the whole protocol's cost on
/// the MLP's tiles with nothing to wait for: issue 7's per-tile overhead, posts and waits
/// included. Under NoSync the graph has no edge (nothing posts or waits), so its difference is
/// the stream-mode kernels' own code. Both ways walk the tiles in the plain kernel's order
/// (`MlpOrder::Banded`), so the L2 walk is the same.
pub struct StreamPairOverhead<'cx> {
    mlp: Mlp<'cx>,
    graphs: Vec<(PolicyKind, StreamGraph<'cx>)>,
}

impl<'cx> StreamPairOverhead<'cx> {
    /// The MLP at `batch` (its default kernel) and one serialized graph per policy of
    /// [`PAIR_OVERHEAD_POLICIES`].
    pub fn at_batch(cx: &'cx Context, batch: usize) -> Result<Self> {
        let mlp = Mlp::new(cx, MlpShape::gpt3(batch), None, 0x5eed_0017)?;
        let graphs = PAIR_OVERHEAD_POLICIES
            .into_iter()
            .map(|policy| Ok((policy, serialized_graph(&mlp, policy)?)))
            .collect::<Result<_>>()?;
        Ok(Self { mlp, graphs })
    }

    /// Device µs of one StreamSync launch pair (one untimed pair first, as for the graphs).
    pub fn stream_sync_us(&mut self) -> Result<f64> {
        self.mlp.run_stream_sync()?;
        Ok(self.mlp.run_stream_sync()? as f64 * 1e3)
    }

    /// Device µs of the serialized graph with `policy` (one untimed launch first). Fails if
    /// `policy` is not one of [`PAIR_OVERHEAD_POLICIES`] or any wait timed out.
    pub fn serialized_us(&mut self, policy: PolicyKind) -> Result<f64> {
        let (_, graph) = self
            .graphs
            .iter_mut()
            .find(|(p, _)| *p == policy)
            .ok_or_else(|| crate::Error::InvalidArgument(format!("no serialized graph for {policy:?}")))?;
        self.mlp.run_graph(graph)?;
        Ok(self.mlp.run_graph(graph)?.elapsed_ms as f64 * 1e3)
    }

    /// StreamSync and the serialized graph with `policy`, back to back (StreamSync first when
    /// `plain_first`): one interleaved pair, as [`StreamStageTracing::time_pair_us`].
    pub fn time_pair_us(&mut self, policy: PolicyKind, plain_first: bool) -> Result<(f64, f64)> {
        if plain_first {
            let plain = self.stream_sync_us()?;
            Ok((plain, self.serialized_us(policy)?))
        } else {
            let hooked = self.serialized_us(policy)?;
            Ok((self.stream_sync_us()?, hooked))
        }
    }

    /// Both stages' steady-state tile periods ([`crate::trace::tile_periods`]) over `launches`
    /// traced launches each of StreamSync and of a serialized graph with `policy` (interleaved,
    /// in alternating order, each right after an untimed launch of its own side; both traced,
    /// so tracing's cost is on both sides), and, where every CTA runs one tile, the tiles' spans:
    /// the protocol's cost per tile with every wait met, as a fraction of a tile's time, without
    /// the launch and the last wave's tail in it. The graph walks StreamSync's order, as the
    /// timed ones do.
    pub fn tile_periods(&mut self, policy: PolicyKind, launches: usize) -> Result<PairPeriods> {
        let mut graph = serialized_graph(&self.mlp, policy)?;
        graph.set_trace(true)?;
        // Per stage: [StreamSync, graph] periods, one-tile spans and their lead-ins; per side,
        // each launch's boundary gap.
        let mut periods: [[Vec<u64>; 2]; 2] = Default::default();
        let mut spans: [[Vec<u64>; 2]; 2] = Default::default();
        let mut lead_ins: [[Vec<u64>; 2]; 2] = Default::default();
        let mut boundary: [Vec<i64>; 2] = Default::default();
        let mut paired: [Vec<f64>; 2] = Default::default();
        let mut last = (Vec::new(), Vec::new());
        for launch in 0..launches.max(1) {
            // Alternating which side goes first, as `time_pair_us` does: a clock that drifts
            // between the two launches of a pair (the power cap) favours neither side. Each
            // traced launch follows an untimed one of its own side, as the timed pairs do: a
            // kernel that follows another function runs its first tile with cold code (~6 µs
            // longer at B = 1: docs/perf-notes.md, session 40), and without the warm-up the
            // side that went second after the other side in more launches paid it more often.
            let (events, graph_events) = if launch % 2 == 0 {
                let events = self.stream_sync_traced_warm()?;
                (events, self.graph_traced_warm(&mut graph)?)
            } else {
                let traces = self.graph_traced_warm(&mut graph)?;
                (self.stream_sync_traced_warm()?, traces)
            };
            let graph_events: Vec<crate::trace::TraceEvent> = graph_events.into_iter().flatten().collect();
            for stage in 0..2 {
                // This launch pair's [periods, spans] per side, then pooled over launches.
                let mut this: [[Vec<u64>; 2]; 2] = Default::default();
                for (side, events) in [&events, &graph_events].into_iter().enumerate() {
                    this[side][0] = crate::trace::tile_periods(events, stage as u32);
                    // One pass over the stage's one-tile events for both figures.
                    for e in crate::trace::single_tile_events(events, stage as u32) {
                        this[side][1].push(e.t_end.saturating_sub(e.t_dispatch));
                        lead_ins[stage][side].push(e.t_start.saturating_sub(e.t_dispatch));
                    }
                }
                let [plain, hooked] = &this;
                paired[stage].extend(launch_ratio([&plain[0], &plain[1]], [&hooked[0], &hooked[1]]));
                for (side, [p, s]) in this.into_iter().enumerate() {
                    periods[stage][side].extend(p);
                    spans[stage][side].extend(s);
                }
            }
            for (side, events) in [&events, &graph_events].into_iter().enumerate() {
                boundary[side].extend(crate::trace::boundary_gap(events, 0, 1));
            }
            last = (events, graph_events);
        }
        if let Some(dir) = std::env::var_os(BENCH_TRACE_DIR_ENV) {
            self.save_traces(std::path::Path::new(&dir), policy, last)?;
        }
        let [p0, p1] = periods;
        let [s0, s1] = spans;
        let [l0, l1] = lead_ins;
        let [r0, r1] = paired;
        Ok(PairPeriods {
            stages: [
                StagePeriods::with_spans("gemm1+gelu", p0, s0, l0).with_paired(r0),
                StagePeriods::with_spans("gemm2", p1, s1, l1).with_paired(r1),
            ],
            boundary_ns: boundary,
        })
    }

    /// StreamSync traced twice back to back: the second launch's events (its kernels' code as
    /// warm as in back-to-back use).
    fn stream_sync_traced_warm(&mut self) -> Result<Vec<crate::trace::TraceEvent>> {
        self.mlp.run_stream_sync_traced()?;
        Ok(self.mlp.run_stream_sync_traced()?.1)
    }

    /// `graph` (traced) launched twice back to back: the second launch's events, per stage.
    fn graph_traced_warm(&mut self, graph: &mut StreamGraph) -> Result<Vec<Vec<crate::trace::TraceEvent>>> {
        self.mlp.run_graph(graph)?;
        Ok(self.mlp.run_graph(graph)?.traces)
    }

    /// Saves the last traced launch of each side ([`StreamPairOverhead::tile_periods`]) in
    /// `dir` as `bench-mlp-b<B>-streamsync` and `bench-mlp-b<B>-<policy>-serialized` (JSON,
    /// CSV and SVG timeline, for `cusync trace analyze`).
    fn save_traces(
        &self,
        dir: &std::path::Path,
        policy: PolicyKind,
        (plain, hooked): (Vec<crate::trace::TraceEvent>, Vec<crate::trace::TraceEvent>),
    ) -> Result<()> {
        let cx = self.mlp.context();
        let (g1, g2) = self.mlp.grids();
        let batch = self.mlp.shape().batch;
        let sides = [
            (
                "StreamSync, traced by `cusync bench`".to_string(),
                "streamsync".to_string(),
                self.mlp.stream_sync_blocks_per_sm()?,
                plain,
            ),
            (
                format!("serialized {}, traced by `cusync bench`", pair_variant_label(policy)),
                format!("{}-serialized", policy.name().to_ascii_lowercase()),
                self.mlp.blocks_per_sm()?,
                hooked,
            ),
        ];
        for (label, name, blocks_per_sm, events) in sides {
            let label = format!("{}, batch {batch}, {label}", self.mlp.shape().label());
            let meta = crate::mlp::trace_meta(cx, label, [g1, g2], blocks_per_sm);
            crate::trace::Trace::new(meta, events)?.save_all(dir, &format!("bench-mlp-b{batch}-{name}"))?;
        }
        Ok(())
    }

    /// Verifies the serialized graph with `policy`: StreamSync and the graph each run once on
    /// NaN-poisoned outputs, their H and Y must be bitwise equal (the same kernels, the same
    /// reduction order), and sampled rows of the graph's must match the f64 CPU reference
    /// ([`Mlp::check_rows`]). Returns the worst relative error.
    pub fn verify(&mut self, policy: PolicyKind) -> Result<f64> {
        self.mlp.poison()?;
        self.mlp.run_stream_sync()?;
        let plain = self.mlp.outputs()?;
        self.mlp.poison()?;
        self.serialized_us(policy)?;
        let hooked = self.mlp.outputs()?;
        let same = |a: &[half::bf16], b: &[half::bf16]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        if !same(&plain.0, &hooked.0) || !same(&plain.1, &hooked.1) {
            return Err(crate::Error::Verification(format!(
                "the serialized {policy:?} graph's outputs differ from StreamSync's"
            )));
        }
        let b = self.mlp.shape().batch;
        let mut rows = vec![0, b / 3, b / 2, b - 1];
        rows.dedup();
        self.mlp.check_rows(&rows)
    }

    /// Tiles of both GeMMs.
    pub fn tiles(&self) -> u32 {
        let (g1, g2) = self.mlp.grids();
        g1.count() + g2.count()
    }

    /// The stages' kernel family and tile ("wg128x192", "skinny", ...).
    pub fn kernel_name(&self) -> String {
        self.mlp.tile().name()
    }
}

/// The plain GeMMs [`PlainGemmTracing`] measures: GeMM1 of the GPT-3 MLP at [`TRACING_BATCH`]
/// (`[B,12288] x [12288,6144]`, GeLU, bf16) with the default kernel (path 2 where the device
/// runs it) and with path 1's heuristic tile.
pub fn plain_tracing_configs() -> [GemmConfig; 2] {
    let shape = MlpShape::gpt3(TRACING_BATCH);
    let cfg = GemmConfig::new(shape.batch, shape.ffn, shape.hidden).epilogue(Epilogue::Gelu);
    [cfg, cfg.path1_only()]
}

/// One plain (unsynchronized, StreamSync's) bf16 GeMM over fixed random operands, launched
/// with tracing off ([`Gemm::launch`]) or on ([`Gemm::launch_traced`]): what
/// `GemmParams::trace` costs when off (one uniform branch per tile) and when on.
pub struct PlainGemmTracing<'cx> {
    cx: &'cx Context,
    gemm: Gemm,
    params: GemmParams,
    a: DeviceBuffer<bf16>,
    b: DeviceBuffer<bf16>,
    c: DeviceBuffer<bf16>,
    trace: DeviceBuffer<u8>,
    stream: Stream,
}

impl<'cx> PlainGemmTracing<'cx> {
    /// Sets up `cfg` (bf16 in and out, no bias) with random operands and a trace buffer.
    pub fn new(cx: &'cx Context, cfg: GemmConfig) -> Result<Self> {
        let gemm = Gemm::new(cx, cfg)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0016);
        let a = cx.upload(&crate::mlp::random_bf16(&mut rng, cfg.a_len(), 1.0))?;
        let b = cx.upload(&crate::mlp::random_bf16(
            &mut rng,
            cfg.b_len(),
            1.0 / (cfg.k as f32).sqrt(),
        ))?;
        let c = cx.alloc_zeros::<bf16>(cfg.c_len())?;
        let params = gemm.check(&a, &b, &c, None)?;
        let trace = crate::stream::trace_buffer(cx, gemm.trace_tiles(&params))?;
        Ok(Self {
            cx,
            params,
            a,
            b,
            c,
            trace,
            stream: cx.new_stream()?,
            gemm,
        })
    }

    /// The entry point the launches run.
    pub fn kernel_name(&self) -> &'static str {
        self.gemm.kernel_name_for(&self.params)
    }

    /// Output tiles per launch (trace events when traced).
    pub fn tiles(&self) -> usize {
        self.gemm.trace_tiles(&self.params)
    }

    /// The kernel and its tiles: "`gemm_sm90_bf16_128x256` (192 tiles)".
    pub fn label(&self) -> String {
        format!("`{}` ({} tiles)", self.kernel_name(), self.tiles())
    }

    /// Device µs of one launch (CUDA events), traced or not. A traced launch's buffer is
    /// poisoned first and every tile's event checked written after it.
    pub fn time_us(&mut self, traced: bool) -> Result<f64> {
        if traced {
            self.trace.fill(0xFF)?;
        }
        let (start, end) = (self.cx.new_event()?, self.cx.new_event()?);
        self.stream.record(&start)?;
        let trace = traced.then_some(&mut self.trace);
        self.gemm
            .launch_with_trace(&self.stream, &self.a, &self.b, &mut self.c, None, trace)?;
        self.stream.record(&end)?;
        self.stream.synchronize()?;
        if let Some(k) = self.gemm.path2() {
            k.errors().check()?;
        }
        if traced {
            self.gemm.trace_events(&self.params, &self.trace, 0)?;
        }
        Ok(start.elapsed_ms(&end)? as f64 * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_periods_compare_medians_and_say_when_there_are_none() {
        let p = StagePeriods::of("gemm2", vec![48_000, 47_900, 48_100], vec![48_500, 48_400, 48_600]);
        assert!((p.overhead() - (48_500.0 / 48_000.0 - 1.0)).abs() < 1e-12);
        assert_eq!(p.describe(), "gemm2 +1.04% (48.50 against 48.00 µs, 3 / 3 periods)");
        let none = StagePeriods::of("gemm1+gelu", Vec::new(), vec![1, 2]);
        assert!(none.overhead().is_nan());
        assert_eq!(
            none.describe(),
            "gemm1+gelu n/a (a CTA ran at most one tile, and no span was traced)"
        );
        // One tile per CTA: the spans give the figure.
        let spans = StagePeriods::with_spans(
            "gemm1+gelu",
            [Vec::new(), Vec::new()],
            [vec![40_000, 41_000, 40_500], vec![40_800, 40_900]],
            [vec![2_000, 2_600, 2_500], vec![3_000, 3_100]],
        );
        assert!(spans.by_spans());
        assert!((spans.overhead() - (40_850.0 / 40_500.0 - 1.0)).abs() < 1e-12);
        assert_eq!(
            spans.describe(),
            "gemm1+gelu +0.86% (one tile per CTA: span from the CTA's entry to posted 40.85 against 40.50 µs, \
             of which entry to main loop 3.05 against 2.50, 2 / 3 tiles)"
        );
        // Periods on both sides win over spans.
        let both = StagePeriods::with_spans("gemm2", [vec![100], vec![101]], [vec![1], vec![9]], [vec![1], vec![1]]);
        assert!(!both.by_spans() && (both.overhead() - 0.01).abs() < 1e-12);
        // The pair's line: both stages, then the median boundary gaps.
        let pair = PairPeriods {
            stages: [spans, both],
            boundary_ns: [vec![5_800, 5_700, 6_000], vec![1_100, -200]],
        };
        assert_eq!((pair.boundary_us(0), pair.boundary_us(1)), (5.8, 0.45));
        assert!(
            pair.describe()
                .ends_with("; GeMM2's first block 0.45 µs after GeMM1's last post (StreamSync 5.80)"),
            "{}",
            pair.describe()
        );
        let none = PairPeriods {
            boundary_ns: Default::default(),
            ..pair
        };
        assert!(none.boundary_us(0).is_nan());
    }

    #[test]
    fn a_launch_pair_compares_periods_else_spans_and_the_line_gives_the_paired_median() {
        // Periods on both sides: their medians (spans ignored).
        let r = launch_ratio([&[100, 200, 300], &[1]], [&[210, 190, 220], &[9]]).unwrap();
        assert!((r - 0.05).abs() < 1e-12);
        // Periods on one side only: the spans' medians.
        let r = launch_ratio([&[], &[40_000, 40_400]], [&[100], &[40_800]]).unwrap();
        assert!((r - (40_800.0 / 40_200.0 - 1.0)).abs() < 1e-12);
        // Nothing comparable, or a zero base: no figure.
        assert_eq!(launch_ratio([&[], &[]], [&[1], &[1]]), None);
        assert_eq!(launch_ratio([&[0], &[]], [&[1], &[]]), None);
        let p =
            StagePeriods::of("gemm2", vec![100, 100], vec![101, 103]).with_paired(vec![0.03, 0.01, -0.02, f64::NAN]);
        let stats = p.paired_stats().unwrap();
        assert_eq!(
            (stats.samples, stats.median, stats.min, stats.max),
            (3, 0.01, -0.02, 0.03)
        );
        assert_eq!(
            p.describe(),
            "gemm2 +2.00% (0.10 against 0.10 µs, 2 / 2 periods; paired by launch +1.00% (range -2.00% to +3.00%, 3 launches))"
        );
        assert_eq!(StagePeriods::of("gemm2", vec![1], vec![1]).paired_stats(), None);
    }
}
