//! Whole-stage microbenchmarks (issues 6 and 7): a persistent stage pair with the protocol on
//! and off, and what tracing costs when it is compiled in but switched off, against switched
//! on and against the kernel without hooks.
//!
//! Each type here owns (or borrows) its operands and graphs, built once; `time_us` is one
//! launch timed with CUDA events, so `microbench::repeat` and criterion's `iter_custom` can
//! sample it.

use cusync_shared::policy::PolicyKind;

use crate::error::Result;
use crate::mlp::{Mlp, MlpOrder, MlpShape};
use crate::ops::gemm::TimingOptions;
use crate::persistent::bench::{time_graph, GemmStack};
use crate::persistent::{PersistentGraph, PersistentOptions, PersistentVariant};
use crate::runtime::Context;
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

/// The GPT-3 MLP batch of the stream-mode tracing benchmark.
pub const TRACING_BATCH: usize = 1024;

/// What [`StreamStageTracing::time_us`] launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TracingVariant {
    /// The unsynchronized GeMM kernel (`NoHooks`: no protocol and no trace code at all).
    NoHooks,
    /// The stream-mode GeMM kernel as a one-stage graph (hooks take tiles, nothing to wait on
    /// or post), tracing compiled in and switched off (`desc.trace == 0`).
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
    /// Uploads the MLP's operands and builds the two graphs (row-major tile order).
    pub fn new(cx: &'cx Context) -> Result<Self> {
        let mlp = Mlp::new(cx, MlpShape::gpt3(TRACING_BATCH), None, 0x5eed_0006)?;
        let off = mlp.graph_gemm1_alone(MlpOrder::RowMajor)?;
        let mut on = mlp.graph_gemm1_alone(MlpOrder::RowMajor)?;
        on.set_trace(true)?;
        Ok(Self { mlp, off, on })
    }

    /// Device µs of one launch of `variant` (CUDA events).
    pub fn time_us(&mut self, variant: TracingVariant) -> Result<f64> {
        match variant {
            // One untimed and one timed launch of the unsynchronized kernel.
            TracingVariant::NoHooks => Ok(self.mlp.hooks_overhead(&[], 1)?.0),
            TracingVariant::TraceOff => Ok(self.mlp.run_graph(&mut self.off)?.elapsed_ms as f64 * 1e3),
            TracingVariant::TraceOn => {
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

    /// Tiles of the stage.
    pub fn tiles(&self) -> u32 {
        self.mlp.grids().0.count()
    }
}
