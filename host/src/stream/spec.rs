//! [`GraphSpec`]: the pure description of a stream-mode graph (stages, typed dependencies)
//! and everything checked about it before anything touches a GPU: empty grids, orders that are
//! not permutations, policies that do not fit their grids, self-dependencies, unsupported
//! fan-in/fan-out, cycles. No device is needed, so all of it is tested on the CPU.

use crate::error::{Error, Result};
use cusync_shared::order::TileOrder;
use cusync_shared::policy::{validate, Dependency, PolicyKind};
use cusync_shared::Grid;

/// A stage's index in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageId(pub usize);

/// What the graph needs to know about a stage's kernel.
#[derive(Clone, Debug)]
pub struct StageConfig {
    /// Name for errors and traces.
    pub name: String,
    /// The stage's tile grid (one block per tile in stream mode).
    pub grid: Grid,
    /// Built-in tile order (ignored when `custom_order` is set).
    pub order: TileOrder,
    /// A user-defined order: linear tile ids ([`Grid::linear`]), one per ticket.
    pub custom_order: Option<Vec<u32>>,
    /// The kernel's entry point (for the occupancy that decides optimization W).
    pub kernel: &'static str,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// `Some(n)`: a persistent kernel (GeMM path 2's stream stage) launched with `n` blocks
    /// that take tiles until the stage's run out (with [`StageConfig::ranges`], one range each);
    /// `None`: one block per tile.
    pub persistent_blocks: Option<u32>,
    /// The blocks take work ranges, not tiles: each of the `persistent_blocks` draws one ticket
    /// for one of that many ranges of the work (the skinny GeMM's balanced ranges of the
    /// weight, `cusync_shared::skinny`), and the stage's tiles are only what it posts (a range
    /// may end inside a tile; whichever block completes a tile posts it). The tile order does
    /// not apply; there may be more blocks than tiles.
    pub ranges: bool,
    /// Work units per tile: the kernel's split-K factor (1: none; GeMM path 2 passes
    /// `Sm90Gemm::split_k`, whose units of one tile take consecutive tickets). A persistent
    /// launch may have up to tiles x `split_k` blocks.
    pub split_k: u32,
}

impl StageConfig {
    /// Blocks a launch of the stage has.
    pub fn launch_blocks(&self) -> u32 {
        self.persistent_blocks.unwrap_or(self.grid.count())
    }

    /// The start count a wait kernel in front of this stage's consumer waits for in launch
    /// `epoch` (`cusync_shared::lanes::start_target`): every block of a persistent stage (its
    /// blocks own their lanes or ranges), the first of one with a block per tile.
    pub fn start_target(&self, epoch: u32) -> u32 {
        cusync_shared::lanes::start_target(epoch, self.launch_blocks(), self.persistent_blocks.is_some())
    }

    /// Work units of a launch: tiles times [`StageConfig::split_k`].
    pub fn work_units(&self) -> u32 {
        self.grid.count().saturating_mul(self.split_k.max(1))
    }
}

/// Blocks of a persistent (path-2) stage: one per resident slot (`sm_count` SMs times
/// `blocks_per_sm`, at least one), at most one per work unit ([`StageConfig::work_units`]:
/// tiles times the split-K factor).
pub fn persistent_blocks(units: u32, sm_count: u32, blocks_per_sm: u32) -> u32 {
    units.min(sm_count.saturating_mul(blocks_per_sm.max(1))).max(1)
}

/// One producer -> consumer dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The stage whose output is read.
    pub producer: StageId,
    /// The stage that reads it.
    pub consumer: StageId,
    /// What the consumer reads.
    pub dependency: Dependency,
    /// How it synchronizes.
    pub policy: PolicyKind,
    /// The producer's output tile width (consumer K elements per producer column tile).
    pub producer_tile_n: u32,
}

/// Stages and edges, validated as they are added.
#[derive(Clone, Debug, Default)]
pub struct GraphSpec {
    stages: Vec<StageConfig>,
    edges: Vec<Edge>,
}

impl GraphSpec {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stages, indexed by [`StageId`].
    pub fn stages(&self) -> &[StageConfig] {
        &self.stages
    }

    /// The edges, in the order they were declared.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// A stage's configuration.
    pub fn config(&self, id: StageId) -> Result<&StageConfig> {
        self.stages
            .get(id.0)
            .ok_or_else(|| Error::InvalidArgument(format!("no stage {} in this graph", id.0)))
    }

    /// Index of the edge `stage` waits on, if any.
    pub fn wait_edge(&self, stage: StageId) -> Option<usize> {
        self.edges.iter().position(|e| e.consumer == stage)
    }

    /// Index of the edge `stage` posts to, if any.
    pub fn post_edge(&self, stage: StageId) -> Option<usize> {
        self.edges.iter().position(|e| e.producer == stage)
    }

    /// Adds a stage; refuses an empty grid, a threadless block and a custom order that is not a
    /// permutation of the grid's tiles.
    pub fn add_stage(&mut self, config: StageConfig) -> Result<StageId> {
        if config.grid.count() == 0 {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` has an empty grid {:?}",
                config.name, config.grid
            )));
        }
        if config.threads == 0 || config.threads > 1024 {
            return Err(Error::InvalidArgument(format!(
                "stage `{}`: {} threads per block (1..=1024)",
                config.name, config.threads
            )));
        }
        if let Some(order) = &config.custom_order {
            check_custom_order(&config.name, config.grid, order)?;
        }
        if config.split_k == 0 || (config.split_k > 1 && config.persistent_blocks.is_none()) {
            return Err(Error::InvalidArgument(format!(
                "stage `{}`: split-K factor {} (1 for none; more only for a persistent stage, whose \
                 blocks take the units)",
                config.name, config.split_k
            )));
        }
        if config.ranges && (config.persistent_blocks.is_none_or(|n| n == 0) || config.split_k != 1) {
            return Err(Error::InvalidArgument(format!(
                "stage `{}`: a range-taking stage needs its block count (persistent blocks) and no \
                 split-K (got {:?} blocks, split-K {})",
                config.name, config.persistent_blocks, config.split_k
            )));
        }
        if let Some(n) = config.persistent_blocks.filter(|_| !config.ranges) {
            if n == 0 || n > config.work_units() {
                return Err(Error::InvalidArgument(format!(
                    "stage `{}`: {n} persistent blocks for {} tiles x {} split-K units (1..=units)",
                    config.name,
                    config.grid.count(),
                    config.split_k
                )));
            }
        }
        self.stages.push(config);
        Ok(StageId(self.stages.len() - 1))
    }

    /// Declares that `consumer` reads `producer`'s output as `dependency`, synchronized by
    /// `policy`; refuses what cannot work: a policy that does not fit the grids, a self-edge, a
    /// second dependent operand or consumer (stream mode has one of each per stage), a cycle.
    pub fn depend(
        &mut self,
        producer: StageId,
        consumer: StageId,
        dependency: Dependency,
        policy: PolicyKind,
        producer_tile_n: u32,
    ) -> Result<()> {
        let (p, c) = (self.config(producer)?, self.config(consumer)?);
        if producer == consumer {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` cannot depend on itself",
                p.name
            )));
        }
        if dependency != Dependency::GemmRow {
            return Err(Error::InvalidArgument(format!(
                "edge `{}` -> `{}`: stream-mode kernels wait on GeMM-row dependencies (A operand = the producer's output); {dependency:?} is not supported yet",
                p.name, c.name
            )));
        }
        if producer_tile_n == 0 {
            return Err(Error::InvalidArgument(format!(
                "edge `{}` -> `{}`: producer tile width 0",
                p.name, c.name
            )));
        }
        validate(policy, dependency, p.grid, c.grid).map_err(|e| {
            Error::InvalidArgument(format!("{} between `{}` and `{}`: {e}", policy.name(), p.name, c.name))
        })?;
        if self.wait_edge(consumer).is_some() {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` already waits on a producer; stream mode supports one dependent operand per stage",
                c.name
            )));
        }
        if self.post_edge(producer).is_some() {
            return Err(Error::InvalidArgument(format!(
                "stage `{}` already posts to a consumer; stream mode supports one consumer per stage",
                p.name
            )));
        }
        self.edges.push(Edge {
            producer,
            consumer,
            dependency,
            policy,
            producer_tile_n,
        });
        if let Err(cycle) = self.topological_order() {
            self.edges.pop();
            return Err(cycle);
        }
        Ok(())
    }

    /// Stage ids in an order where every producer comes before its consumers, and otherwise
    /// in the order the stages were added; a cycle is an error naming the stages on it.
    pub fn topological_order(&self) -> Result<Vec<StageId>> {
        let n = self.stages.len();
        let mut indegree = vec![0usize; n];
        for e in &self.edges {
            indegree[e.consumer.0] += 1;
        }
        // Of the stages ready at each step, the one added first: independent stages launch in
        // the order they were added (a serialized graph without edges runs them that way).
        let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            order.push(StageId(i));
            for e in self.edges.iter().filter(|e| e.producer.0 == i) {
                indegree[e.consumer.0] -= 1;
                if indegree[e.consumer.0] == 0 {
                    ready.insert(e.consumer.0);
                }
            }
        }
        if order.len() == n {
            return Ok(order);
        }
        let in_cycle: Vec<&str> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .map(|i| self.stages[i].name.as_str())
            .collect();
        Err(Error::InvalidArgument(format!(
            "dependency cycle among stages {in_cycle:?}"
        )))
    }

    /// Each stage's distance from a source stage (0 for stages that wait on nothing).
    pub fn depths(&self) -> Result<Vec<u32>> {
        let mut depth = vec![0u32; self.stages.len()];
        for id in self.topological_order()? {
            for e in self.edges.iter().filter(|e| e.producer == id) {
                depth[e.consumer.0] = depth[e.consumer.0].max(depth[id.0] + 1);
            }
        }
        Ok(depth)
    }
}

/// A custom order must name every tile of the grid exactly once.
fn check_custom_order(name: &str, grid: Grid, order: &[u32]) -> Result<()> {
    if order.len() != grid.count() as usize {
        return Err(Error::InvalidArgument(format!(
            "stage `{name}`: custom order has {} entries for {} tiles",
            order.len(),
            grid.count()
        )));
    }
    let mut seen = vec![false; order.len()];
    for &id in order {
        if id >= grid.count() || std::mem::replace(&mut seen[id as usize], true) {
            return Err(Error::InvalidArgument(format!(
                "stage `{name}`: custom order is not a permutation (tile id {id})"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
