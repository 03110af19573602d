//! [`PersistentSpec`] (stages with their work, edges with policies) and [`PersistentOptions`],
//! with the checks that need no device: one worker family, a stage count the scheduler can
//! track, tile counts its counters can hold, and a block count that can make progress.

use std::time::Duration;

use cusync_shared::layout::DEFAULT_TIMEOUT_NS;
use cusync_shared::persistent::MAX_STAGES;
use cusync_shared::policy::Dependency;
use cusync_shared::Grid;

use super::work::{Family, StageWork};
use crate::ops::gemm_sm90::operands_fit;
use crate::plan::{EdgePolicy, Plan, PlanSpec, StageId, StageOrder};
use crate::{Error, Result};

/// Stages (each with its [`StageWork`]) and edges of a persistent-mode graph; planned and
/// checked by [`PersistentGraph::new`](super::PersistentGraph::new).
#[derive(Clone, Debug, Default)]
pub struct PersistentSpec<'b> {
    plan: PlanSpec,
    work: Vec<StageWork<'b>>,
}

impl<'b> PersistentSpec<'b> {
    /// An empty graph.
    pub fn new() -> Self {
        Self {
            plan: PlanSpec::new(),
            work: Vec::new(),
        }
    }

    /// Adds a stage (row-major tile order) whose tiles `work` computes.
    pub fn stage(&mut self, name: impl Into<String>, work: StageWork<'b>) -> StageId {
        self.work.push(work);
        self.plan.stage(name, work.grid())
    }

    /// Sets the order of a stage's initially ready tiles (ignored for an unknown id).
    pub fn set_order(&mut self, stage: StageId, order: StageOrder) {
        self.plan.set_order(stage, order);
    }

    /// Adds an edge: `consumer` reads `producer`'s output as `dependency`; `policy` derives
    /// which producer tiles each consumer tile waits for (the planner's dependency arrays).
    pub fn edge(
        &mut self,
        producer: StageId,
        consumer: StageId,
        dependency: Dependency,
        policy: impl Into<EdgePolicy>,
    ) -> &mut Self {
        self.plan.edge(producer, consumer, dependency, policy);
        self
    }

    /// The planner's view (stages as grids, edges).
    pub fn plan_spec(&self) -> &PlanSpec {
        &self.plan
    }

    /// Each stage's work, by [`StageId`].
    pub fn work(&self) -> &[StageWork<'b>] {
        &self.work
    }

    /// Checks what needs no device and returns the graph's worker family: at least one and at
    /// most [`MAX_STAGES`] stages, all of one family (path-2 stages: one tile shape, row-major
    /// operands TMA can load), all on device `ordinal`.
    pub fn check(&self, ordinal: usize) -> Result<Family> {
        let n = self.work.len();
        if n == 0 {
            return Err(Error::InvalidArgument(
                "a persistent graph needs at least one stage".into(),
            ));
        }
        if n > MAX_STAGES as usize {
            return Err(Error::InvalidArgument(format!(
                "a persistent graph has at most {MAX_STAGES} stages (one scheduler bit each), not {n}"
            )));
        }
        let family = self.work[0].kind().family();
        for (i, w) in self.work.iter().enumerate() {
            let name = &self.plan.stages[i].name;
            let (this, first) = (w.kind().wg_tile(), self.work[0].kind().wg_tile());
            match (this, first) {
                (Some(t), Some(t0)) if t != t0 => {
                    return Err(Error::InvalidArgument(format!(
                        "stage `{name}` runs path-2 tiles of {}, but stage `{}` runs {}: the stages of one path-2 \
                         megakernel launch must share one tile shape (128x256 or 128x128)",
                        t.name(),
                        self.plan.stages[0].name,
                        t0.name()
                    )))
                }
                _ => {}
            }
            if let Some(t) = this {
                let p = w.params();
                if p.a_trans() || p.b_trans() || !operands_fit(&p) {
                    return Err(Error::InvalidArgument(format!(
                        "stage `{name}`: the path-2 megakernel ({} tiles) runs row-major A and B that TMA can \
                         load (16-byte aligned bases, leading dimensions multiples of 8), not lda {} ldb {}{}",
                        t.name(),
                        p.lda,
                        p.ldb,
                        if p.a_trans() || p.b_trans() {
                            " (transposed)"
                        } else {
                            ""
                        }
                    )));
                }
            }
            if w.kind().family() != family {
                return Err(Error::InvalidArgument(format!(
                    "stage `{name}` runs {:?} tiles, but stage `{}` runs {:?}: one persistent launch runs one \
                     worker family ({family:?} here), since every block must hold any stage's tile",
                    w.kind(),
                    self.plan.stages[0].name,
                    self.work[0].kind()
                )));
            }
            if w.ordinal() != ordinal {
                return Err(Error::InvalidArgument(format!(
                    "stage `{name}`'s buffers are on device {}, but the graph runs on device {ordinal}",
                    w.ordinal()
                )));
            }
        }
        Ok(family)
    }
}

/// How a [`PersistentGraph`](super::PersistentGraph) runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistentOptions {
    /// Bound on every device wait (default 2 s). The path-2 megakernel bounds its queue waits by
    /// it and its shared-memory pipeline waits by it plus a margin
    /// (`cusync_shared::persistent::sm90_pipeline_timeout_ns`), so a starved queue is always
    /// what gets reported.
    pub timeout: Duration,
    /// Record one `TraceEvent` per tile.
    pub trace: bool,
    /// The overhead benchmark's "no dependencies" mode: every stage's queue is prefilled with
    /// all its tiles and the epilogue skips the scoreboard walk. Consumers may then read their
    /// producers' output before it is written: only for timing.
    pub no_dependencies: bool,
    /// At most this many blocks (default: every block that can be resident).
    pub max_ctas: Option<u32>,
    /// Which stage's ready tiles a block's scheduler takes first (default: downstream first).
    pub priority: SchedulePriority,
}

impl Default for PersistentOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_nanos(DEFAULT_TIMEOUT_NS),
            trace: false,
            no_dependencies: false,
            max_ctas: None,
            priority: SchedulePriority::default(),
        }
    }
}

/// Which ready tiles a block's scheduler takes first when several stages have some. The
/// device polls the stage queues from the highest stage index down
/// (`cusync_shared::persistent::poll_queues`), so the host sets the priority by the order it
/// gives the stages on the device ([`device_order`]); any order makes progress, since a block
/// only ever takes a tile whose inputs are all posted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SchedulePriority {
    /// The most downstream stage first (the CTA-pipelining paper's order): a tile's consumers
    /// run as soon as they are ready, which keeps the pipeline short and drains it early.
    #[default]
    DownstreamFirst,
    /// The most upstream stage first: a stage's ready tiles wait until the stages before it
    /// have handed out all theirs, so the blocks run one stage at a time (one weight matrix
    /// in L2) and a stage's tail wave is filled with its consumers' first ready tiles. A
    /// scheduler timeout then names the most downstream unfinished stage (the one starved).
    UpstreamFirst,
}

impl SchedulePriority {
    /// Parses `down` or `up`.
    pub fn parse(s: &str) -> crate::Result<Self> {
        match s {
            "down" | "downstream" => Ok(Self::DownstreamFirst),
            "up" | "upstream" => Ok(Self::UpstreamFirst),
            other => Err(Error::InvalidArgument(format!(
                "unknown schedule priority `{other}`: down or up"
            ))),
        }
    }

    /// "downstream first" or "upstream first".
    pub fn name(self) -> &'static str {
        match self {
            Self::DownstreamFirst => "downstream first",
            Self::UpstreamFirst => "upstream first",
        }
    }
}

/// The stages in device index order for `priority`, from the plan's topological order (every
/// producer before its consumers): the scheduler prefers higher indices, so downstream first
/// keeps the topological order and upstream first reverses it.
pub fn device_order(topo: &[StageId], priority: SchedulePriority) -> Vec<StageId> {
    match priority {
        SchedulePriority::DownstreamFirst => topo.to_vec(),
        SchedulePriority::UpstreamFirst => topo.iter().rev().copied().collect(),
    }
}

/// Per device index (the stages in `device` order, [`device_order`]), the device indices (a bit
/// each) of every stage upstream of it in `plan`: its producers, theirs, and so on. The
/// megakernel's `PersistentStage::upstream`: the path-2 scheduler pops a stage's queue with
/// one fetch-add once all of them are finished (`cusync_shared::persistent::poll_queues_committing`).
/// At most [`MAX_STAGES`] stages (the host refuses more before this).
pub fn upstream_masks(plan: &Plan, device: &[StageId]) -> Vec<u32> {
    let mut index = vec![0u32; plan.stages.len()];
    for (i, s) in device.iter().enumerate() {
        index[s.0] = i as u32;
    }
    // Producers before consumers: each stage's mask is complete before its consumers read it.
    let mut by_stage = vec![0u32; plan.stages.len()];
    for s in &plan.topo_order {
        let mut mask = 0u32;
        for &e in &plan.stages[s.0].incoming {
            let producer = plan.edges[e].producer;
            mask |= (1 << index[producer.0]) | by_stage[producer.0];
        }
        by_stage[s.0] = mask;
    }
    device.iter().map(|s| by_stage[s.0]).collect()
}

/// The block count of a persistent launch: every block that can be resident
/// (`per_sm * sms`, from the occupancy API), at most `cap` when given, at most `tiles`.
/// Refuses a kernel that cannot hold one block per SM (the launch could not make progress)
/// and a cap above what can be resident (a block that is not resident would hold an SM's
/// worth of tiles hostage only after the others exit: persistent blocks must all be resident).
pub fn resident_ctas(kernel: &str, smem: u32, per_sm: u32, sms: u32, cap: Option<u32>, tiles: u32) -> Result<u32> {
    if per_sm == 0 || sms == 0 {
        return Err(Error::InvalidArgument(format!(
            "`{kernel}` cannot keep one block with {smem} bytes of dynamic shared memory resident on an SM \
             (occupancy 0): a persistent launch could not make progress"
        )));
    }
    let resident = per_sm.saturating_mul(sms);
    let ctas = match cap {
        Some(0) => {
            return Err(Error::InvalidArgument(
                "a persistent launch needs at least one block".into(),
            ))
        }
        Some(c) if c > resident => {
            return Err(Error::InvalidArgument(format!(
                "{c} blocks asked for `{kernel}`, but only {resident} can be resident ({per_sm} per SM x {sms} SMs); \
                 persistent blocks must all be resident"
            )))
        }
        Some(c) => c,
        None => resident,
    };
    Ok(ctas.min(tiles.max(1)))
}

/// Tiles of all stages per launch, refused when the no-protocol counter window
/// (`tiles + blocks` per launch) or a launch window could not count them.
pub fn total_tiles(grids: &[Grid]) -> Result<u32> {
    let total: u64 = grids.iter().map(|g| g.count() as u64).sum();
    if total >= 1 << 30 {
        return Err(Error::InvalidArgument(format!(
            "a persistent graph of {total} tiles is too large: at most 2^30 tiles per launch"
        )));
    }
    Ok(total as u32)
}

/// All of a stage's tiles in its order (the "no dependencies" mode's prefill).
pub fn full_order(grid: Grid, order: &StageOrder) -> Vec<u32> {
    order.tiles(grid)
}
