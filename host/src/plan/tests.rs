//! Planner tests: exact tables on small graphs, every error, a property test over random grids
//! and every policy, and random schedules of the shared protocol over a planned image.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use cusync_shared::order::TileOrder;
use cusync_shared::policy::{
    for_each_read, validate, Conv2DTileSync, Dependency, PolicyError, PolicyKind, Post, RowBandSync, RowSync, Step,
    SyncPolicy, Wait,
};
use cusync_shared::protocol::{post_producer_tile, try_pop, AtomicWords, LaunchWindow, Pop, ProtocolMemory};
use cusync_shared::{Grid, TileIdx};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn two_stages(p: Grid, c: Grid, dependency: Dependency, policy: PolicyKind) -> Result<Plan, PlanError> {
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.edge(a, b, dependency, policy);
    g.plan()
}

#[test]
fn row_sync_gemm_feeds_every_consumer_of_the_row() {
    let plan = two_stages(
        Grid::new(2, 3, 1),
        Grid::new(2, 4, 1),
        Dependency::GemmRow,
        PolicyKind::RowSync,
    )
    .unwrap();
    let e = &plan.edges[0];
    assert_eq!(e.offsets.len(), 7);
    assert_eq!(e.row(0), &[0, 1, 2, 3]); // producer (0, 0) -> consumer row 0
    assert_eq!(e.row(5), &[4, 5, 6, 7]); // producer (1, 2) -> consumer row 1
    assert_eq!(plan.stages[1].needed, vec![3; 8]);
    assert_eq!(plan.stages[0].needed, vec![0; 6]);
    assert_eq!(plan.stages[0].initial_ready, (0..6).collect::<Vec<_>>());
    assert!(plan.stages[1].initial_ready.is_empty());
    assert_eq!(plan.topo_order, vec![StageId(0), StageId(1)]);
    // TileSync under a GeMM dependency waits on the same tiles, one semaphore each.
    let tile = two_stages(
        Grid::new(2, 3, 1),
        Grid::new(2, 4, 1),
        Dependency::GemmRow,
        PolicyKind::TileSync,
    )
    .unwrap();
    assert_eq!(tile.edges[0].consumers, e.consumers);
}

#[test]
fn split_k_slices_are_separate_producer_tiles() {
    let plan = two_stages(
        Grid::new(1, 2, 3),
        Grid::new(1, 1, 1),
        Dependency::GemmRow,
        PolicyKind::TileSync,
    )
    .unwrap();
    assert_eq!(plan.stages[1].needed, vec![6]);
    assert!((0..6).all(|p| plan.edges[0].row(p) == [0]));
}

#[test]
fn conv2d_edge_rows_need_fewer_producers() {
    let dep = Dependency::Conv2D { taps: 9, halo: 1 };
    let plan = two_stages(
        Grid::new(4, 2, 1),
        Grid::new(4, 1, 1),
        dep,
        PolicyKind::Conv2DTileSync { taps: 9 },
    )
    .unwrap();
    // Rows 0 and 3 reach 2 producer rows, rows 1 and 2 reach 3; 2 column tiles each.
    assert_eq!(plan.stages[1].needed, vec![4, 6, 6, 4]);
    assert_eq!(plan.edges[0].row(0), &[0, 1]); // producer row 0 feeds consumer rows 0 and 1
    assert_eq!(plan.edges[0].row(2), &[0, 1, 2]);
}

#[test]
fn fan_in_sums_targets_and_fan_out_lists_both_edges() {
    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(2, 2, 1));
    let b = g.stage("b", Grid::new(2, 3, 1));
    let c = g.stage("c", Grid::new(2, 1, 1));
    let d = g.stage("d", Grid::new(2, 2, 1));
    g.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(a, c, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(b, d, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(c, d, Dependency::GemmRow, PolicyKind::RowSync);
    let plan = g.plan().unwrap();
    assert_eq!(plan.stages[d.0].needed, vec![3 + 1; 4]);
    assert_eq!(plan.stages[d.0].incoming, vec![2, 3]);
    assert_eq!(plan.stages[a.0].outgoing, vec![0, 1]);
    assert_eq!(plan.topo_order, vec![a, b, c, d]);
}

#[test]
fn independent_stages_start_ready_in_their_order() {
    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(2, 2, 1));
    let b = g.stage("b", Grid::new(2, 3, 1));
    g.set_order(b, StageOrder::Builtin(TileOrder::ColumnMajor));
    g.edge(a, b, Dependency::Independent, PolicyKind::NoSync);
    let plan = g.plan().unwrap();
    assert_eq!(plan.edges[0].consumers, Vec::<u32>::new());
    assert_eq!(plan.stages[1].initial_ready, vec![0, 3, 1, 4, 2, 5]);
}

#[test]
fn prefill_counts_up_with_the_epoch() {
    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(1, 3, 1));
    g.set_order(a, StageOrder::Custom(vec![2, 0, 1]));
    let plan = g.plan().unwrap();
    let p = plan.stages[0].prefill(2);
    assert_eq!(p.tail, 9);
    let slots: Vec<(u32, u32)> = p.slots.iter().map(|s| (s.tile, s.seq)).collect();
    assert_eq!(slots, vec![(2, 7), (0, 8), (1, 9)]);
}

#[test]
fn a_cycle_is_named_along_its_edges() {
    let mut g = PlanSpec::new();
    let names = ["src", "a", "b", "c"];
    let ids: Vec<StageId> = names.iter().map(|n| g.stage(*n, Grid::new(1, 1, 1))).collect();
    let gemm = Dependency::GemmRow;
    g.edge(ids[0], ids[1], gemm, PolicyKind::RowSync)
        .edge(ids[1], ids[2], gemm, PolicyKind::RowSync)
        .edge(ids[2], ids[3], gemm, PolicyKind::RowSync)
        .edge(ids[3], ids[1], gemm, PolicyKind::RowSync);
    let err = g.plan().unwrap_err();
    assert_eq!(err.to_string(), "dependency cycle: a -> b -> c -> a");
    let mut self_loop = PlanSpec::new();
    let s = self_loop.stage("s", Grid::new(1, 1, 1));
    self_loop.edge(s, s, gemm, PolicyKind::RowSync);
    assert_eq!(self_loop.plan().unwrap_err().to_string(), "dependency cycle: s -> s");
}

#[test]
fn invalid_graphs_are_refused_with_the_stage_names() {
    let err = two_stages(
        Grid::new(2, 3, 1),
        Grid::new(3, 4, 1),
        Dependency::GemmRow,
        PolicyKind::RowSync,
    )
    .unwrap_err();
    assert_eq!(
        err,
        PlanError::Policy {
            producer: "a".into(),
            consumer: "b".into(),
            policy: "RowSync".into(),
            source: PolicyError::RowTilingMismatch {
                producer_rows: 2,
                consumer_rows: 3
            }
        }
    );
    assert!(err.to_string().starts_with("RowSync from `a` to `b`:"), "{err}");
    let err = two_stages(
        Grid::new(0, 3, 1),
        Grid::new(3, 4, 1),
        Dependency::GemmRow,
        PolicyKind::RowSync,
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::EmptyGrid { ref stage, .. } if stage == "a"));
    let err = two_stages(
        Grid::new(1 << 16, 1 << 15, 1),
        Grid::new(1, 1, 1),
        Dependency::Independent,
        PolicyKind::NoSync,
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::TooManyTiles { tiles, .. } if tiles == 1 << 31));

    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(1, 1, 1));
    g.edge(a, StageId(7), Dependency::GemmRow, PolicyKind::RowSync);
    assert_eq!(
        g.plan().unwrap_err(),
        PlanError::UnknownStage {
            edge: 0,
            stage: 7,
            stages: 1
        }
    );

    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", Grid::new(1, 1, 1)), g.stage("b", Grid::new(1, 1, 1)));
    g.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(a, b, Dependency::GemmRow, PolicyKind::TileSync);
    assert!(matches!(g.plan(), Err(PlanError::DuplicateEdge { .. })));

    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(1, 3, 1));
    g.set_order(a, StageOrder::Custom(vec![0, 2, 2]));
    assert_eq!(
        g.plan().unwrap_err().to_string(),
        "stage `a`: custom order is not a permutation of its 3 tiles (tile id 2 twice)"
    );
}

/// Conv2DTileSync without the halo rows (the reference implementation's bug).
struct NoHalo;

impl SyncPolicy for NoHalo {
    fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
        Conv2DTileSync { taps: 9 }.semaphore_count(p, c)
    }

    fn post(&self, p: Grid, c: Grid, t: TileIdx) -> Option<Post> {
        Conv2DTileSync { taps: 9 }.post(p, c, t)
    }

    fn wait(&self, p: Grid, c: Grid, t: TileIdx, s: Step) -> Option<Wait> {
        (s.row == t.x)
            .then(|| Conv2DTileSync { taps: 9 }.wait(p, c, t, s))
            .flatten()
    }
}

/// A policy that posts past its own semaphore count.
struct OffByOne;

impl SyncPolicy for OffByOne {
    fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
        RowSync.semaphore_count(p, c)
    }

    fn post(&self, _: Grid, _: Grid, t: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: t.x + 1,
            amount: 1,
        })
    }

    fn wait(&self, p: Grid, c: Grid, t: TileIdx, s: Step) -> Option<Wait> {
        RowSync.wait(p, c, t, s)
    }
}

/// RowSync's semaphores, waited before every step rather than once per row.
struct RowEveryStep;

impl SyncPolicy for RowEveryStep {
    fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
        RowSync.semaphore_count(p, c)
    }

    fn post(&self, p: Grid, c: Grid, t: TileIdx) -> Option<Post> {
        RowSync.post(p, c, t)
    }

    fn wait(&self, p: Grid, _: Grid, _: TileIdx, s: Step) -> Option<Wait> {
        Some(Wait {
            semaphore: s.row,
            value: p.y * p.z,
        })
    }
}

fn custom(name: &str, policy: impl SyncPolicy + Send + Sync + 'static) -> EdgePolicy {
    EdgePolicy::Custom {
        name: name.into(),
        policy: Arc::new(policy),
    }
}

/// A band of rows readies every consumer tile of the band at its last producer post, and the
/// dependency arrays list them in the consumer stage's order (here column by column within
/// the band), so the megakernel pushes the band in that order.
#[test]
fn banded_rows_feed_the_band_in_the_consumer_order() {
    let (p, c) = (Grid::new(5, 3, 1), Grid::new(5, 2, 1));
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    // Consumer order: bands of 2 rows, column by column (the last band: row 4 alone).
    let order: Vec<u32> = vec![0, 2, 1, 3, 4, 6, 5, 7, 8, 9];
    g.set_order(b, StageOrder::Custom(order.clone()));
    g.edge(
        a,
        b,
        Dependency::GemmRow,
        custom("RowBandSync2", RowBandSync { rows: 2 }),
    );
    let plan = g.plan().unwrap();
    let e = &plan.edges[0];
    // Producer (1, 2) is in band 0: it feeds the band's 4 consumer tiles, in the given order.
    assert_eq!(e.row(p.linear(TileIdx::new(1, 2, 0))), &[0, 2, 1, 3]);
    assert_eq!(e.row(p.linear(TileIdx::new(2, 0, 0))), &[4, 6, 5, 7]);
    assert_eq!(e.row(p.linear(TileIdx::new(4, 1, 0))), &[8, 9]);
    // Each consumer waits for its whole band: 2 rows x 3 tiles, the last band 1 row.
    assert_eq!(plan.stages[1].needed, vec![6, 6, 6, 6, 6, 6, 6, 6, 3, 3]);
    // The same edge under RowSync lists a row's tiles in the consumer order too.
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.set_order(b, StageOrder::Custom(vec![1, 0, 3, 2, 5, 4, 7, 6, 9, 8]));
    g.edge(a, b, Dependency::GemmRow, PolicyKind::RowSync);
    assert_eq!(g.plan().unwrap().edges[0].row(0), &[1, 0]);
}

/// `run layers`' stack shape (M = 16384 in 128 x 256 tiles of 8192 columns) under 8-row
/// bands: every producer tile feeds its band's 256 consumer tiles, each waits for 256.
#[test]
fn banded_rows_plan_the_megakernel_stack() {
    let grid = Grid::new(128, 32, 1);
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("layer0", grid), g.stage("layer1", grid));
    g.edge(
        a,
        b,
        Dependency::GemmRow,
        custom("RowBandSync8", RowBandSync { rows: 8 }),
    );
    let plan = g.plan().unwrap();
    let e = &plan.edges[0];
    assert_eq!(e.consumers.len(), 4096 * 256);
    assert!(plan.stages[1].needed.iter().all(|&n| n == 256));
    // Producer (13, 5) is in band 1 (rows 8..16): its row lists rows 8..16 of the consumer.
    let row = e.row(grid.linear(TileIdx::new(13, 5, 0)));
    assert!(row.iter().all(|&c| (8..16).contains(&grid.tile(c).x)), "{row:?}");
}

#[test]
fn custom_policies_are_checked_tile_by_tile() {
    let (p, c) = (Grid::new(3, 2, 1), Grid::new(3, 2, 1));
    let conv = Dependency::Conv2D { taps: 9, halo: 1 };
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.edge(a, b, conv, custom("NoHalo", NoHalo));
    let err = g.plan().unwrap_err();
    assert!(
        matches!(err, PlanError::Uncovered { consumer_tile, producer_tile, .. }
            if consumer_tile == TileIdx::new(0, 0, 0) && producer_tile == TileIdx::new(1, 0, 0)),
        "{err}"
    );
    assert!(err.to_string().contains("does not wait for it"), "{err}");

    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.edge(a, b, Dependency::GemmRow, custom("OffByOne", OffByOne));
    assert!(matches!(
        g.plan(),
        Err(PlanError::SemaphoreOutOfRange {
            action: "posts to",
            semaphore: 3,
            count: 3,
            ..
        })
    ));

    // A custom policy that behaves like a built-in one plans like it.
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.edge(a, b, conv, custom("Conv", Conv2DTileSync { taps: 9 }));
    let builtin = two_stages(p, c, conv, PolicyKind::Conv2DTileSync { taps: 9 }).unwrap();
    assert_eq!(g.plan().unwrap().edges[0].consumers, builtin.edges[0].consumers);
}

#[test]
fn a_semaphore_waited_at_every_step_counts_its_producers_once() {
    let (p, c) = (Grid::new(2, 3, 2), Grid::new(2, 2, 1));
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("a", p), g.stage("b", c));
    g.edge(a, b, Dependency::GemmRow, custom("RowEveryStep", RowEveryStep));
    let plan = g.plan().unwrap();
    assert_eq!(plan.stages[1].needed, vec![6; 4]);
    assert_eq!(plan.edges[0].row(0), &[0, 1]);
    let row_sync = two_stages(p, c, Dependency::GemmRow, PolicyKind::RowSync).unwrap();
    assert_eq!(plan.edges[0].offsets, row_sync.edges[0].offsets);
    assert_eq!(plan.edges[0].consumers, row_sync.edges[0].consumers);
}

/// Grids, dependencies and policies as in `tests/policies.rs`: producer columns a multiple of
/// the stride, consumer rows equal to producer rows (others fail `validate`, also checked).
fn edge_cases() -> impl Strategy<Value = (Grid, Grid, Dependency, PolicyKind)> {
    (
        1u32..5,
        1u32..4,
        1u32..4,
        1u32..3,
        1u32..6,
        1u32..3,
        0u32..3,
        0usize..4,
        0usize..6,
    )
        .prop_map(|(rows, groups, stride, pz, cy, cz, halo, d, k)| {
            let taps = [1, 4, 9][(rows as usize + cy as usize) % 3];
            let dependency = [
                Dependency::Independent,
                Dependency::GemmRow,
                Dependency::Strided { stride },
                Dependency::Conv2D { taps, halo },
            ][d];
            let policy = [
                PolicyKind::NoSync,
                PolicyKind::TileSync,
                PolicyKind::RowSync,
                PolicyKind::StridedSync { stride },
                PolicyKind::Conv2DTileSync { taps },
                PolicyKind::Conv2DTileSync { taps: 4 },
            ][k];
            (
                Grid::new(rows, stride * groups, pz),
                Grid::new(rows, cy, cz),
                dependency,
                policy,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The CSR, followed from every producer tile, arrives at each consumer tile exactly its
    /// target; every producer tile (slice) a consumer reads is among those that arrive; rows list
    /// their consumers in the consumer stage's order without duplicates; and the rows are exactly "producers posting to a semaphore
    /// the consumer waits on".
    #[test]
    fn dependency_arrays_reach_exactly_the_targets((p, c, dep, kind) in edge_cases()) {
        let planned = two_stages(p, c, dep, kind);
        let Ok(plan) = planned else {
            prop_assert!(validate(kind, dep, p, c).is_err(), "plan refused a valid edge: {planned:?}");
            return Ok(());
        };
        let edge = &plan.edges[0];
        let needed = &plan.stages[1].needed;
        prop_assert_eq!(edge.offsets.len() as u32, p.count() + 1);
        let mut arrivals = vec![0u32; c.count() as usize];
        let mut fed_by = vec![BTreeSet::new(); c.count() as usize];
        // Each consumer tile's position in the consumer stage's (default) order.
        let mut rank = vec![0u32; c.count() as usize];
        for (n, id) in StageOrder::default().tiles(c).into_iter().enumerate() {
            rank[id as usize] = n as u32;
        }
        for pid in 0..p.count() {
            let row = edge.row(pid);
            prop_assert!(
                row.windows(2).all(|w| rank[w[0] as usize] < rank[w[1] as usize]),
                "row {} not in the consumer order without duplicates: {:?}",
                pid,
                row
            );
            for &cid in row {
                arrivals[cid as usize] += 1;
                fed_by[cid as usize].insert(pid);
            }
        }
        prop_assert_eq!(&arrivals, needed);
        for cid in 0..c.count() {
            let tile = c.tile(cid);
            let waited: BTreeSet<u32> = (0..dep.step_count(p, tile))
                .filter_map(|i| kind.wait(p, c, tile, dep.step(p, tile, i)))
                .map(|w| w.semaphore)
                .collect();
            let expected: BTreeSet<u32> = (0..p.count())
                .filter(|&pid| matches!(kind.post(p, c, p.tile(pid)), Some(x) if waited.contains(&x.semaphore)))
                .collect();
            prop_assert_eq!(&fed_by[cid as usize], &expected, "consumer {:?}", tile);
            let mut missing = None;
            for_each_read(dep, p, tile, |read| {
                for z in 0..p.z {
                    let pid = p.linear(TileIdx::new(read.x, read.y, z));
                    if !fed_by[cid as usize].contains(&pid) {
                        missing = Some(pid);
                    }
                }
            });
            prop_assert_eq!(missing, None, "consumer {:?} reads an unposted producer tile", tile);
        }
        let ready: BTreeSet<u32> = plan.stages[1].initial_ready.iter().copied().collect();
        let zero: BTreeSet<u32> = (0..c.count()).filter(|&i| needed[i as usize] == 0).collect();
        prop_assert_eq!(ready, zero);
    }

    /// Random sequential schedules of the shared protocol over a planned image of a diamond
    /// (fan-out and fan-in) run every tile exactly once per launch, each only after every
    /// producer tile it reads ran in that launch, for three launches without clearing.
    #[test]
    fn random_schedules_run_each_tile_once_after_its_producers(seed in any::<u64>(), rows in 1u32..4, cols in 1u32..4) {
        let mut g = PlanSpec::new();
        let a = g.stage("a", Grid::new(rows, cols, 1));
        let b = g.stage("b", Grid::new(rows, cols + 1, 2));
        let c = g.stage("c", Grid::new(rows, 2, 1));
        let d = g.stage("d", Grid::new(rows, 1, 1));
        g.set_order(a, StageOrder::Builtin(TileOrder::ColumnMajor));
        g.edge(a, b, Dependency::GemmRow, PolicyKind::TileSync)
            .edge(a, c, Dependency::Conv2D { taps: 1, halo: 1 }, PolicyKind::RowSync)
            .edge(b, d, Dependency::GemmRow, PolicyKind::RowSync)
            .edge(c, d, Dependency::GemmRow, PolicyKind::TileSync);
        let plan = g.plan().unwrap();
        let spec = g;
        run_schedules(&spec, &plan, seed);
    }
}

/// Runs three launches of `plan` through the shared protocol on the host, picking a random
/// stage to pop from at every step, and checks each tile runs once, after what it reads.
fn run_schedules(spec: &PlanSpec, plan: &Plan, seed: u64) {
    let image = ProtocolImage::new(plan, 0x10_0000);
    let words: Vec<AtomicU32> = image.words.iter().map(|&w| AtomicU32::new(w)).collect();
    let mem = AtomicWords::new(image.base, &words);
    let mut rng = StdRng::seed_from_u64(seed);
    // `ran[s][t]` = launches of tile t of stage s so far.
    let mut ran: Vec<Vec<u32>> = plan.stages.iter().map(|s| vec![0; s.tiles() as usize]).collect();
    for epoch in 0..3u32 {
        for (addr, value) in image.prefill_writes(plan, epoch) {
            mem.store_relaxed(addr, value);
        }
        let mut finished = vec![false; plan.stages.len()];
        while finished.iter().any(|f| !f) {
            let s = rng.random_range(0..plan.stages.len());
            let window = LaunchWindow::new(epoch, plan.stages[s].tiles());
            match try_pop(&mem, &image.stages[s].queue, window, 1000).unwrap() {
                Pop::Tile(t) => {
                    for &e in &plan.stages[s].incoming {
                        let edge = &spec.edges[e];
                        let pg = plan.stages[edge.producer.0].grid;
                        for_each_read(edge.dependency, pg, plan.stages[s].grid.tile(t), |read| {
                            for z in 0..pg.z {
                                let pid = pg.linear(TileIdx::new(read.x, read.y, z));
                                assert_eq!(ran[edge.producer.0][pid as usize], epoch + 1, "read before posted");
                            }
                        });
                    }
                    ran[s][t as usize] += 1;
                    assert_eq!(ran[s][t as usize], epoch + 1, "stage {s} tile {t} ran twice");
                    for edge in image.outgoing(plan, StageId(s)) {
                        post_producer_tile(&mem, edge, t, epoch).unwrap();
                    }
                }
                Pop::Empty => {}
                Pop::Finished => finished[s] = true,
            }
        }
        assert!(
            ran.iter().flatten().all(|&n| n == epoch + 1),
            "a tile did not run in launch {epoch}"
        );
    }
}
