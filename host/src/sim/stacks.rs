//! Issue 5's GeMM stacks in the persistent model ([`super::persistent`]): `layers` layers of
//! `[M, 8192] x [8192, 8192]` on 128 x 256 tiles and 132 blocks, pipelined under a band or
//! row policy, against the same layers as separate kernels and the bound of whole waves.

use std::fmt::Write as _;

use cusync_shared::gemm_sm90::WG_RASTER_GROUP;
use cusync_shared::policy::Dependency;
use cusync_shared::Grid;

use super::microbatch::{best_microbatch, MicrobatchCase};
use super::persistent::{
    separate_kernels_time, simulate_persistent, waves_bound, PersistentSimError, PersistentSimOptions,
};
use crate::baselines::microbatch::{default_chunks, DEFAULT_STREAMS};
use crate::persistent::bench::{raster_order, StackPolicy};
use crate::persistent::SchedulePriority;
use crate::plan::{Plan, PlanSpec};

/// Post latency of the default table, in tile times: about 3 µs of a 90 µs 128 x 256 tile
/// (session 50's trace: layer 1 started 3.14 µs after the last layer-0 tile it read ended).
pub const STACK_POST_LATENCY: f64 = 0.035;

/// Persistent blocks of the default table: one 128 x 256 block per SM on an H100 or H200.
pub const STACK_BLOCKS: u32 = 132;

/// One GeMM stack: `layers` layers whose tile grid is `rows` x `cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackCase {
    /// Rows of the activations (M).
    pub m: u32,
    /// Rows of one tile.
    pub tile_m: u32,
    /// Layers.
    pub layers: u32,
    /// Row tiles per layer.
    pub rows: u32,
    /// Column tiles per layer.
    pub cols: u32,
}

impl StackCase {
    /// `[m, n] x [n, n]` layers on `tile_m` x `tile_n` tiles.
    pub fn new(m: u32, n: u32, layers: u32, tile_m: u32, tile_n: u32) -> Self {
        Self {
            m,
            tile_m,
            layers,
            rows: m.div_ceil(tile_m),
            cols: n.div_ceil(tile_n),
        }
    }
}

/// Issue 5's stacks on the megakernel's 128 x 256 tile: 2 layers at M = 1024, 4096, 16384 and
/// 32768, and 4 and 8 layers at M = 16384 (N = K = 8192).
pub fn issue5_stacks() -> Vec<StackCase> {
    let mut cases: Vec<StackCase> = [1024, 4096, 16384, 32768]
        .iter()
        .map(|&m| StackCase::new(m, 8192, 2, 128, 256))
        .collect();
    cases.extend([4, 8].iter().map(|&l| StackCase::new(16384, 8192, l, 128, 256)));
    cases
}

/// The stack's plan as `cusync run layers` builds it: layer `i + 1` reads layer `i`'s rows
/// (`Dependency::GemmRow`) under `policy`, every queue in the plain kernel's grouped raster.
pub fn stack_plan(case: StackCase, policy: StackPolicy) -> Result<Plan, crate::plan::PlanError> {
    let grid = Grid::new(case.rows, case.cols, 1);
    let mut spec = PlanSpec::new();
    let mut prev = None;
    for i in 0..case.layers {
        let id = spec.stage(format!("layer{i}"), grid);
        spec.set_order(id, raster_order(grid, WG_RASTER_GROUP));
        if let Some(p) = prev {
            spec.edge(p, id, Dependency::GemmRow, policy.edge_policy());
        }
        prev = Some(id);
    }
    spec.plan()
}

/// One row of the stacks table.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRow {
    /// The stack.
    pub case: StackCase,
    /// The policy between layers.
    pub policy: StackPolicy,
    /// The scheduler priority.
    pub priority: SchedulePriority,
    /// Pipelined makespan, in tile times.
    pub pipelined: f64,
    /// The layers as separate kernels, in tile times.
    pub separate: f64,
    /// Whole waves of all the stack's tiles: no schedule is shorter.
    pub bound: f64,
    /// When the last layer's first tile started.
    pub last_layer_start: f64,
    /// Best-chunk micro-batching on 4 streams ([`super::microbatch`]): rows per chunk and its
    /// makespan in tile times.
    pub microbatch: Option<(u32, f64)>,
}

/// Streams of the micro-batching model: `cusync run layers`' default.
pub const MICROBATCH_STREAMS: u32 = DEFAULT_STREAMS as u32;

/// Best-chunk micro-batching of `case` over `cusync run layers`' chunk sizes (rows per chunk,
/// makespan in tile times).
pub fn stack_microbatch(case: StackCase, blocks: u32) -> Option<(u32, f64)> {
    let tile_m = case.tile_m.max(1);
    let candidates: Vec<u32> = default_chunks(case.m as usize)
        .into_iter()
        .map(|c| (c as u32).div_ceil(tile_m))
        .collect();
    let mb = MicrobatchCase {
        rows: case.rows,
        cols: case.cols,
        layers: case.layers,
        chunk_rows: 1,
        streams: MICROBATCH_STREAMS,
        blocks,
    };
    best_microbatch(&mb, &candidates).map(|(rows, t)| (rows * tile_m, t))
}

/// Simulates `case` under each policy and priority.
pub fn stack_rows(
    case: StackCase,
    policies: &[StackPolicy],
    priorities: &[SchedulePriority],
    blocks: u32,
    post_latency: f64,
) -> Result<Vec<StackRow>, PersistentSimError> {
    let mut rows = Vec::new();
    let microbatch = stack_microbatch(case, blocks);
    for &policy in policies {
        let plan = stack_plan(case, policy).map_err(|e| PersistentSimError::Options(e.to_string()))?;
        for &priority in priorities {
            let opts = PersistentSimOptions::unit(blocks, post_latency, priority);
            let out = simulate_persistent(&plan, &opts)?;
            rows.push(StackRow {
                case,
                policy,
                priority,
                pipelined: out.makespan,
                separate: separate_kernels_time(&plan, &opts),
                bound: waves_bound(&plan, &opts),
                last_layer_start: out.stages.last().map_or(0.0, |s| s.first_start),
                microbatch,
            });
        }
    }
    Ok(rows)
}

/// The stacks table of the default report: issue 5's stacks under RowBandSync8 and RowSync,
/// upstream and downstream first, on [`STACK_BLOCKS`] blocks with [`STACK_POST_LATENCY`].
pub fn render_stacks() -> String {
    render_stacks_with(STACK_BLOCKS, STACK_POST_LATENCY)
}

/// [`render_stacks`] on `blocks` blocks, each post visible `post_latency` tile times after its
/// tile (`cusync simulate --stacks --blocks N --post-latency T`).
pub fn render_stacks_with(blocks: u32, post_latency: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "MODEL, persistent megakernel ({blocks} blocks, 128 x 256 tiles, [M,8192] x [8192,8192] layers): \
         the shared protocol run on the host with every tile taking one tile time T and each post \
         visible {post_latency} T after its tile; \"separate\" = each layer's whole waves, \
         one layer after another; \"bound\" = whole waves of all tiles. Pipelining can only win \
         the difference between them. \"micro-batching\" = the best chunk of the same tiles as \
         chunk kernels on {MICROBATCH_STREAMS} streams, an earlier kernel's blocks dispatched first."
    );
    let _ = writeln!(
        out,
        "{:>6} {:>6} {:>13} {:>11} {:>10} {:>9} {:>6} {:>11} {:>16} {:>20}",
        "M",
        "layers",
        "policy",
        "priority",
        "pipelined",
        "separate",
        "bound",
        "pipe / sep",
        "last layer from",
        "micro-batching"
    );
    let policies = [StackPolicy::Band { rows: WG_RASTER_GROUP }, StackPolicy::RowSync];
    let priorities = [SchedulePriority::UpstreamFirst, SchedulePriority::DownstreamFirst];
    for case in issue5_stacks() {
        match stack_rows(case, &policies, &priorities, blocks, post_latency) {
            Ok(rows) => {
                for r in rows {
                    let mb = r
                        .microbatch
                        .map_or_else(|| "-".to_string(), |(rows, t)| format!("{t:.0}T ({rows} rows)"));
                    let _ = writeln!(
                        out,
                        "{:>6} {:>6} {:>13} {:>11} {:>9.2}T {:>8.0}T {:>5.0}T {:>11.4} {:>15.2}T {:>20}",
                        r.case.m,
                        r.case.layers,
                        r.policy.name(),
                        match r.priority {
                            SchedulePriority::UpstreamFirst => "upstream",
                            SchedulePriority::DownstreamFirst => "downstream",
                        },
                        r.pipelined,
                        r.separate,
                        r.bound,
                        r.pipelined / r.separate,
                        r.last_layer_start,
                        mb
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(out, "M = {}, {} layers: model failed: {e}", case.m, case.layers);
            }
        }
    }
    out
}
