//! [`PlanSpec`]: what the planner is given (stages, edges, policies, tile orders).

use std::fmt;
use std::sync::Arc;

use cusync_shared::order::TileOrder;
use cusync_shared::policy::{Dependency, PolicyKind, SyncPolicy};
use cusync_shared::Grid;

/// A stage's index in its [`PlanSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageId(pub usize);

/// The order in which a stage's initially ready tiles are queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageOrder {
    /// A built-in order ([`cusync_shared::order::nth`]).
    Builtin(TileOrder),
    /// A permutation of the stage's linear tile ids, one per ticket.
    Custom(Vec<u32>),
}

impl Default for StageOrder {
    fn default() -> Self {
        StageOrder::Builtin(TileOrder::RowMajor)
    }
}

impl StageOrder {
    /// Every tile of a stage of grid `grid` in this order, as linear tile ids (a custom order
    /// as given: the planner checks it is a permutation).
    pub fn tiles(&self, grid: Grid) -> Vec<u32> {
        match self {
            StageOrder::Builtin(o) => (0..grid.count())
                .map(|n| grid.linear(cusync_shared::order::nth(*o, grid, n)))
                .collect(),
            StageOrder::Custom(ids) => ids.clone(),
        }
    }
}

/// One stage: a name (for errors), its tile grid and its tile order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageSpec {
    /// Name used in errors.
    pub name: String,
    /// The stage's tile grid (split-K slices are separate tiles).
    pub grid: Grid,
    /// Order of its initially ready tiles in its queue.
    pub order: StageOrder,
}

/// The synchronization policy of an edge.
#[derive(Clone)]
pub enum EdgePolicy {
    /// A built-in policy, validated against the dependency and grids.
    Builtin(PolicyKind),
    /// A user-written policy, checked tile by tile to cover what each consumer tile reads.
    Custom {
        /// Name used in errors.
        name: String,
        /// The policy.
        policy: Arc<dyn SyncPolicy + Send + Sync>,
    },
}

impl EdgePolicy {
    /// The policy's name ("RowSync", or the custom name).
    pub fn name(&self) -> &str {
        match self {
            EdgePolicy::Builtin(kind) => kind.name(),
            EdgePolicy::Custom { name, .. } => name,
        }
    }
}

impl fmt::Debug for EdgePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EdgePolicy::Builtin(kind) => write!(f, "{kind:?}"),
            EdgePolicy::Custom { name, .. } => write!(f, "Custom({name})"),
        }
    }
}

impl From<PolicyKind> for EdgePolicy {
    fn from(kind: PolicyKind) -> Self {
        EdgePolicy::Builtin(kind)
    }
}

/// One producer -> consumer edge.
#[derive(Clone, Debug)]
pub struct EdgeSpec {
    /// The stage whose output is read.
    pub producer: StageId,
    /// The stage that reads it.
    pub consumer: StageId,
    /// What the consumer reads.
    pub dependency: Dependency,
    /// Which producer tiles a consumer tile waits for.
    pub policy: EdgePolicy,
}

/// Stages and edges of a persistent-mode graph. Nothing is checked until [`PlanSpec::plan`].
#[derive(Clone, Debug, Default)]
pub struct PlanSpec {
    /// The stages, indexed by [`StageId`].
    pub stages: Vec<StageSpec>,
    /// The edges, in declaration order.
    pub edges: Vec<EdgeSpec>,
}

impl PlanSpec {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a stage with the row-major order.
    pub fn stage(&mut self, name: impl Into<String>, grid: Grid) -> StageId {
        self.stages.push(StageSpec {
            name: name.into(),
            grid,
            order: StageOrder::default(),
        });
        StageId(self.stages.len() - 1)
    }

    /// Sets the order of a stage's initially ready tiles (ignored for an unknown id; `plan`
    /// reports unknown ids in edges).
    pub fn set_order(&mut self, stage: StageId, order: StageOrder) {
        if let Some(s) = self.stages.get_mut(stage.0) {
            s.order = order;
        }
    }

    /// Adds an edge: `consumer` reads `producer`'s output as `dependency`, synchronized by
    /// `policy` (a [`PolicyKind`] or an [`EdgePolicy::Custom`]).
    pub fn edge(
        &mut self,
        producer: StageId,
        consumer: StageId,
        dependency: Dependency,
        policy: impl Into<EdgePolicy>,
    ) -> &mut Self {
        self.edges.push(EdgeSpec {
            producer,
            consumer,
            dependency,
            policy: policy.into(),
        });
        self
    }

    /// Validates the graph and builds its tables ([`super::plan`]).
    pub fn plan(&self) -> Result<super::Plan, super::PlanError> {
        super::plan(self)
    }
}
