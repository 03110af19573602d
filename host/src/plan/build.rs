//! [`plan`]: validation, then the per-edge dependency arrays and per-stage scoreboard targets
//! and prefilled queues.

use cusync_shared::layout::WorkQueueSlot;
use cusync_shared::policy::{validate, Dependency, PolicyKind, SyncPolicy};
use cusync_shared::protocol::{prefill_head, prefill_slot, prefill_tail, LaunchWindow};
use cusync_shared::{Grid, TileIdx};

use super::spec::{EdgePolicy, EdgeSpec, PlanSpec, StageId, StageOrder, StageSpec};
use super::topo::topological_order;
use super::PlanError;

/// The planned graph: what the host writes to the device before the first launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Per stage, indexed by [`StageId`].
    pub stages: Vec<StagePlan>,
    /// Per edge, in declaration order.
    pub edges: Vec<EdgePlan>,
    /// Stage ids, every producer before its consumers.
    pub topo_order: Vec<StageId>,
}

/// One stage's scoreboard targets and prefilled queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagePlan {
    /// The stage's name.
    pub name: String,
    /// Its tile grid.
    pub grid: Grid,
    /// Per linear tile id: producer tiles (of all incoming edges) it needs per launch. Zero
    /// for every tile of a source stage.
    pub needed: Vec<u32>,
    /// Linear ids of the tiles that need nothing, in the stage's tile order: the queue's
    /// first tickets of every launch.
    pub initial_ready: Vec<u32>,
    /// Slots of its workqueue: one per tile, the least the protocol allows (every tile is
    /// pushed once per launch).
    pub queue_capacity: u32,
    /// Indices into [`Plan::edges`] of the edges it consumes.
    pub incoming: Vec<usize>,
    /// Indices into [`Plan::edges`] of the edges it produces.
    pub outgoing: Vec<usize>,
}

/// What the host writes into a stage's queue before launch `epoch`: slots `0..slots.len()`
/// and the `tail` counter (the head is where the previous launch left it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefill {
    /// Slots from position 0.
    pub slots: Vec<WorkQueueSlot>,
    /// The queue's `tail`.
    pub tail: u32,
    /// The queue's `head` (the window's start: `cusync_shared::protocol::prefill_head`).
    pub head: u32,
}

impl StagePlan {
    /// Tiles per launch.
    pub fn tiles(&self) -> u32 {
        self.needed.len() as u32
    }

    /// The queue contents to write before launch `epoch` (counting up for ever: the slots'
    /// `seq` and the tail depend on the epoch).
    pub fn prefill(&self, epoch: u32) -> Prefill {
        let window = LaunchWindow::new(epoch, self.tiles());
        Prefill {
            slots: self
                .initial_ready
                .iter()
                .enumerate()
                .map(|(i, &tile)| prefill_slot(window, i as u32, tile))
                .collect(),
            tail: prefill_tail(window, self.initial_ready.len() as u32),
            head: prefill_head(window),
        }
    }
}

/// One edge's dependency array (CSR indexed by the producer's linear tile id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgePlan {
    /// The producer stage.
    pub producer: StageId,
    /// The consumer stage.
    pub consumer: StageId,
    /// What the consumer reads.
    pub dependency: Dependency,
    /// The policy's name.
    pub policy: String,
    /// `producer tiles + 1` offsets into `consumers`.
    pub offsets: Vec<u32>,
    /// Consumer linear tile ids; row `p` has no duplicates and lists its consumer tiles in the
    /// consumer stage's order ([`StageOrder`]), so a producer tile that readies several pushes
    /// them in that order.
    pub consumers: Vec<u32>,
}

impl EdgePlan {
    /// The consumer tiles producer tile `producer` (linear id) feeds.
    ///
    /// # Panics
    /// If `producer` is not a tile of the producer grid.
    pub fn row(&self, producer: u32) -> &[u32] {
        let (a, b) = (self.offsets[producer as usize], self.offsets[producer as usize + 1]);
        &self.consumers[a as usize..b as usize]
    }
}

/// Validates `spec` (stage ids, grids, custom orders, duplicate edges, cycles, each edge's
/// policy) and builds its [`Plan`].
pub fn plan(spec: &PlanSpec) -> Result<Plan, PlanError> {
    for s in &spec.stages {
        check_stage(&s.name, s.grid, &s.order)?;
    }
    let pairs = check_edge_ends(spec)?;
    let topo = topological_order(spec.stages.len(), &pairs).map_err(|cycle| PlanError::Cycle {
        stages: cycle.into_iter().map(|s| spec.stages[s].name.clone()).collect(),
    })?;
    let mut stages: Vec<StagePlan> = spec.stages.iter().map(empty_stage).collect();
    let mut edges = Vec::with_capacity(spec.edges.len());
    for (i, e) in spec.edges.iter().enumerate() {
        edges.push(plan_edge(spec, e, &mut stages[e.consumer.0].needed)?);
        stages[e.consumer.0].incoming.push(i);
        stages[e.producer.0].outgoing.push(i);
    }
    for (stage, s) in stages.iter_mut().zip(&spec.stages) {
        stage.initial_ready = ready_in_order(s.grid, &s.order, &stage.needed);
    }
    Ok(Plan {
        stages,
        edges,
        topo_order: topo.into_iter().map(StageId).collect(),
    })
}

/// Every edge names existing stages and no two join the same pair; returns the pairs.
fn check_edge_ends(spec: &PlanSpec) -> Result<Vec<(usize, usize)>, PlanError> {
    let stages = spec.stages.len();
    let mut pairs = Vec::with_capacity(spec.edges.len());
    for (edge, e) in spec.edges.iter().enumerate() {
        if let Some(stage) = [e.producer.0, e.consumer.0].into_iter().find(|&s| s >= stages) {
            return Err(PlanError::UnknownStage { edge, stage, stages });
        }
        if pairs.contains(&(e.producer.0, e.consumer.0)) {
            return Err(PlanError::DuplicateEdge {
                producer: spec.stages[e.producer.0].name.clone(),
                consumer: spec.stages[e.consumer.0].name.clone(),
            });
        }
        pairs.push((e.producer.0, e.consumer.0));
    }
    Ok(pairs)
}

/// A stage with no edges yet: nothing needed, one queue slot per tile.
fn empty_stage(s: &StageSpec) -> StagePlan {
    StagePlan {
        name: s.name.clone(),
        grid: s.grid,
        needed: vec![0; s.grid.count() as usize],
        initial_ready: Vec::new(),
        queue_capacity: s.grid.count(),
        incoming: Vec::new(),
        outgoing: Vec::new(),
    }
}

/// Validates and builds one edge, adding what its consumer tiles need to `needed`.
fn plan_edge(spec: &PlanSpec, e: &EdgeSpec, needed: &mut [u32]) -> Result<EdgePlan, PlanError> {
    let (p, c) = (&spec.stages[e.producer.0], &spec.stages[e.consumer.0]);
    let names = EdgeNames {
        producer: &p.name,
        consumer: &c.name,
        policy: e.policy.name(),
    };
    let built = match &e.policy {
        EdgePolicy::Builtin(kind) => {
            check_builtin(*kind, e.dependency, p.grid, c.grid, &names)?;
            build_edge(kind, e.dependency, p.grid, (c.grid, &c.order), &names, false)?
        }
        EdgePolicy::Custom { policy, .. } => {
            build_edge(&**policy, e.dependency, p.grid, (c.grid, &c.order), &names, true)?
        }
    };
    for (total, add) in needed.iter_mut().zip(&built.needed) {
        *total = total.checked_add(*add).ok_or_else(|| PlanError::TooManyEdges {
            consumer: c.name.clone(),
            count: *total as u64 + *add as u64,
        })?;
    }
    Ok(EdgePlan {
        producer: e.producer,
        consumer: e.consumer,
        dependency: e.dependency,
        policy: e.policy.name().to_string(),
        offsets: built.offsets,
        consumers: built.consumers,
    })
}

/// Stage and policy names for errors.
struct EdgeNames<'a> {
    producer: &'a str,
    consumer: &'a str,
    policy: &'a str,
}

impl EdgeNames<'_> {
    fn owned(&self) -> (String, String, String) {
        (
            self.producer.to_string(),
            self.consumer.to_string(),
            self.policy.to_string(),
        )
    }
}

fn check_stage(name: &str, grid: Grid, order: &StageOrder) -> Result<(), PlanError> {
    let tiles = grid.x as u64 * grid.y as u64 * grid.z as u64;
    if tiles == 0 {
        return Err(PlanError::EmptyGrid {
            stage: name.to_string(),
            grid,
        });
    }
    if tiles >= 1 << 31 {
        return Err(PlanError::TooManyTiles {
            stage: name.to_string(),
            tiles,
        });
    }
    if let StageOrder::Custom(ids) = order {
        let bad = |problem: String| PlanError::BadOrder {
            stage: name.to_string(),
            tiles: tiles as u32,
            problem,
        };
        if ids.len() as u64 != tiles {
            return Err(bad(format!("{} entries", ids.len())));
        }
        let mut seen = vec![false; ids.len()];
        for &id in ids {
            match seen.get_mut(id as usize) {
                None => return Err(bad(format!("tile id {id} out of range"))),
                Some(true) => return Err(bad(format!("tile id {id} twice"))),
                Some(s) => *s = true,
            }
        }
    }
    Ok(())
}

fn check_builtin(
    kind: PolicyKind,
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
    names: &EdgeNames,
) -> Result<(), PlanError> {
    validate(kind, dependency, producer, consumer).map_err(|source| {
        let (producer, consumer, policy) = names.owned();
        PlanError::Policy {
            producer,
            consumer,
            policy,
            source,
        }
    })
}

/// One edge's tables before they are merged into the consumer stage.
struct BuiltEdge {
    offsets: Vec<u32>,
    consumers: Vec<u32>,
    needed: Vec<u32>,
}

/// A CSR table: row `i` is `items[offsets[i]..offsets[i + 1]]`.
struct Csr {
    offsets: Vec<usize>,
    items: Vec<u32>,
}

impl Csr {
    fn row(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// Builds one edge. A consumer tile needs every producer tile that posts to a semaphore one of
/// its steps waits on. Each producer tile posts to one semaphore, so the producer sets of
/// distinct semaphores are disjoint and rows come out without duplicates; walking consumers in
/// the consumer stage's `order` fills every row in that order (the order the megakernel then
/// pushes a row's ready tiles in). `check_reads` also proves, per consumer tile, that every
/// producer tile (every split-K slice) a step reads is among them.
fn build_edge<P: SyncPolicy + ?Sized>(
    policy: &P,
    dependency: Dependency,
    producer: Grid,
    (consumer, order): (Grid, &StageOrder),
    names: &EdgeNames,
    check_reads: bool,
) -> Result<BuiltEdge, PlanError> {
    let semaphores = policy.semaphore_count(producer, consumer);
    let (posts, members) = posters_by_semaphore(policy, producer, consumer, semaphores, names)?;
    let waits = waits_by_consumer(policy, dependency, producer, consumer, semaphores, names)?;
    if check_reads {
        check_reads_covered(dependency, producer, consumer, &posts, &waits, names)?;
    }

    let producers = producer.count() as usize;
    let mut needed = vec![0u32; consumer.count() as usize];
    let mut row_len = vec![0u32; producers];
    let mut total = 0u64;
    for (c, need) in needed.iter_mut().enumerate() {
        for &s in waits.row(c) {
            let feeders = members.row(s as usize);
            total += feeders.len() as u64;
            if total > u32::MAX as u64 {
                return Err(PlanError::TooManyEdges {
                    consumer: names.consumer.to_string(),
                    count: total,
                });
            }
            // Both stay below `total`, which fits in u32.
            *need += feeders.len() as u32;
            for &p in feeders {
                row_len[p as usize] += 1;
            }
        }
    }
    let mut offsets = Vec::with_capacity(producers + 1);
    let mut acc = 0u32;
    offsets.push(0);
    for len in &row_len {
        acc += len;
        offsets.push(acc);
    }
    let mut cursor: Vec<u32> = offsets[..producers].to_vec();
    let mut consumers = vec![0u32; total as usize];
    for c in order.tiles(consumer) {
        let c = c as usize;
        for &s in waits.row(c) {
            for &p in members.row(s as usize) {
                let at = &mut cursor[p as usize];
                consumers[*at as usize] = c as u32;
                *at += 1;
            }
        }
    }
    Ok(BuiltEdge {
        offsets,
        consumers,
        needed,
    })
}

/// Per producer tile, the semaphore it posts to (`u32::MAX`: none), and per semaphore, the
/// producer tiles posting to it in increasing order.
fn posters_by_semaphore<P: SyncPolicy + ?Sized>(
    policy: &P,
    producer: Grid,
    consumer: Grid,
    semaphores: u32,
    names: &EdgeNames,
) -> Result<(Vec<u32>, Csr), PlanError> {
    let mut posts = vec![u32::MAX; producer.count() as usize];
    let mut count = vec![0usize; semaphores as usize + 1];
    for (p, post) in posts.iter_mut().enumerate() {
        let tile = producer.tile(p as u32);
        if let Some(x) = policy.post(producer, consumer, tile) {
            if x.semaphore >= semaphores {
                return Err(out_of_range(names, "posts to", tile, x.semaphore, semaphores));
            }
            *post = x.semaphore;
            count[x.semaphore as usize + 1] += 1;
        }
    }
    for s in 0..semaphores as usize {
        count[s + 1] += count[s];
    }
    let mut cursor = count.clone();
    let mut items = vec![0u32; count[semaphores as usize]];
    for (p, &s) in posts.iter().enumerate() {
        if s != u32::MAX {
            items[cursor[s as usize]] = p as u32;
            cursor[s as usize] += 1;
        }
    }
    Ok((posts, Csr { offsets: count, items }))
}

/// Per consumer tile, the semaphores its steps wait on, sorted, without duplicates.
fn waits_by_consumer<P: SyncPolicy + ?Sized>(
    policy: &P,
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
    semaphores: u32,
    names: &EdgeNames,
) -> Result<Csr, PlanError> {
    let tiles = consumer.count() as usize;
    let mut offsets = Vec::with_capacity(tiles + 1);
    let mut items = Vec::new();
    offsets.push(0);
    for c in 0..tiles {
        let tile = consumer.tile(c as u32);
        let start = items.len();
        for i in 0..dependency.step_count(producer, tile) {
            let step = dependency.step(producer, tile, i);
            if let Some(w) = policy.wait(producer, consumer, tile, step) {
                if w.semaphore >= semaphores {
                    return Err(out_of_range(names, "waits on", tile, w.semaphore, semaphores));
                }
                items.push(w.semaphore);
            }
        }
        let row = &mut items[start..];
        if !row.is_sorted() {
            row.sort_unstable();
        }
        let unique = dedup_sorted(row);
        items.truncate(start + unique);
        offsets.push(items.len());
    }
    Ok(Csr { offsets, items })
}

/// Moves the distinct values of a sorted slice to its front; returns how many there are.
fn dedup_sorted(row: &mut [u32]) -> usize {
    let mut kept = 0;
    for i in 0..row.len() {
        if kept == 0 || row[i] != row[kept - 1] {
            row[kept] = row[i];
            kept += 1;
        }
    }
    kept
}

/// Every producer tile (all split-K slices) each step reads posts to a waited semaphore.
fn check_reads_covered(
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
    posts: &[u32],
    waits: &Csr,
    names: &EdgeNames,
) -> Result<(), PlanError> {
    for c in 0..consumer.count() as usize {
        let tile = consumer.tile(c as u32);
        let waited = waits.row(c);
        for i in 0..dependency.step_count(producer, tile) {
            let read = dependency.reads(dependency.step(producer, tile, i));
            for z in 0..producer.z {
                let slice = TileIdx::new(read.x, read.y, z);
                let covered =
                    producer.contains(slice) && waited.binary_search(&posts[producer.linear(slice) as usize]).is_ok();
                if !covered {
                    let (producer, consumer, policy) = names.owned();
                    return Err(PlanError::Uncovered {
                        producer,
                        consumer,
                        policy,
                        consumer_tile: tile,
                        producer_tile: slice,
                    });
                }
            }
        }
    }
    Ok(())
}

fn out_of_range(names: &EdgeNames, action: &'static str, tile: TileIdx, semaphore: u32, count: u32) -> PlanError {
    let (producer, consumer, policy) = names.owned();
    PlanError::SemaphoreOutOfRange {
        producer,
        consumer,
        policy,
        action,
        tile,
        semaphore,
        count,
    }
}

/// Linear ids of the tiles with `needed == 0`, in the stage's order.
fn ready_in_order(grid: Grid, order: &StageOrder, needed: &[u32]) -> Vec<u32> {
    let mut ids = order.tiles(grid);
    ids.retain(|&id| needed[id as usize] == 0);
    ids
}
