//! [`PlanError`]: why a graph cannot be planned, naming the stages involved.

use cusync_shared::policy::PolicyError;
use cusync_shared::{Grid, TileIdx};

/// Why [`super::plan`] refused a graph.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// An edge names a stage the graph does not have.
    #[error("edge {edge} names stage {stage}, but the graph has {stages} stages")]
    UnknownStage {
        /// The edge's index.
        edge: usize,
        /// The stage id it names.
        stage: usize,
        /// How many stages there are.
        stages: usize,
    },
    /// A stage's grid has a zero dimension.
    #[error("stage `{stage}` has an empty grid {}x{}x{}", grid.x, grid.y, grid.z)]
    EmptyGrid {
        /// The stage.
        stage: String,
        /// Its grid.
        grid: Grid,
    },
    /// A stage has more tiles than a launch window can count (2^31).
    #[error("stage `{stage}` has {tiles} tiles; at most 2^31 - 1 fit the protocol's counters")]
    TooManyTiles {
        /// The stage.
        stage: String,
        /// Its tile count.
        tiles: u64,
    },
    /// A custom tile order is not a permutation of the stage's tiles.
    #[error("stage `{stage}`: custom order is not a permutation of its {tiles} tiles ({problem})")]
    BadOrder {
        /// The stage.
        stage: String,
        /// Its tile count.
        tiles: u32,
        /// What is wrong.
        problem: String,
    },
    /// The graph has a cycle; the stages are listed along it, the first repeated at the end.
    #[error("dependency cycle: {}", stages.join(" -> "))]
    Cycle {
        /// Stage names along the cycle (`a -> b -> a`).
        stages: Vec<String>,
    },
    /// Two edges join the same producer and consumer.
    #[error("two edges from `{producer}` to `{consumer}`")]
    DuplicateEdge {
        /// The producer stage.
        producer: String,
        /// The consumer stage.
        consumer: String,
    },
    /// A built-in policy does not fit the dependency or the grids.
    #[error("{policy} from `{producer}` to `{consumer}`: {source}")]
    Policy {
        /// The producer stage.
        producer: String,
        /// The consumer stage.
        consumer: String,
        /// The policy's name.
        policy: String,
        /// What `validate` found.
        source: PolicyError,
    },
    /// A (custom) policy posts to or waits on a semaphore past its own semaphore count.
    #[error(
        "{policy} from `{producer}` to `{consumer}`: tile ({}, {}, {}) {action} semaphore {semaphore} of {count}",
        tile.x, tile.y, tile.z
    )]
    SemaphoreOutOfRange {
        /// The producer stage.
        producer: String,
        /// The consumer stage.
        consumer: String,
        /// The policy's name.
        policy: String,
        /// "posts to" or "waits on".
        action: &'static str,
        /// The producer or consumer tile.
        tile: TileIdx,
        /// The semaphore.
        semaphore: u32,
        /// The policy's semaphore count.
        count: u32,
    },
    /// A (custom) policy lets a consumer tile start without a producer tile it reads.
    #[error(
        "{policy} from `{producer}` to `{consumer}`: consumer tile ({}, {}, {}) reads producer tile ({}, {}, {}) \
         but does not wait for it",
        consumer_tile.x, consumer_tile.y, consumer_tile.z, producer_tile.x, producer_tile.y, producer_tile.z
    )]
    Uncovered {
        /// The producer stage.
        producer: String,
        /// The consumer stage.
        consumer: String,
        /// The policy's name.
        policy: String,
        /// The consumer tile.
        consumer_tile: TileIdx,
        /// The producer tile (slice) it reads unprotected.
        producer_tile: TileIdx,
    },
    /// A dependency array or a scoreboard target does not fit in `u32`.
    #[error("edges into `{consumer}`: {count} entries do not fit the protocol's u32 arrays")]
    TooManyEdges {
        /// The consumer stage.
        consumer: String,
        /// The entry count.
        count: u64,
    },
}

impl From<PlanError> for crate::Error {
    fn from(e: PlanError) -> Self {
        crate::Error::InvalidArgument(e.to_string())
    }
}
