//! Every bad graph input we know of, and the error it gets (docs/reliability.md has the table).

use super::*;

fn stage(name: &str, grid: Grid) -> StageConfig {
    StageConfig {
        name: name.into(),
        grid,
        order: TileOrder::RowMajor,
        custom_order: None,
        kernel: "scalar_gemm_stream",
        threads: 256,
        smem_bytes: 0,
        persistent_blocks: None,
        ranges: false,
        split_k: 1,
    }
}

fn message(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn two_stages(p: Grid, c: Grid) -> (GraphSpec, StageId, StageId) {
    let mut g = GraphSpec::new();
    let a = g.add_stage(stage("producer", p)).unwrap();
    let b = g.add_stage(stage("consumer", c)).unwrap();
    (g, a, b)
}

/// A graph of `n` stages `s0..` on 4 x 8 grids, no edges yet.
fn stages(n: usize) -> (GraphSpec, Vec<StageId>) {
    let mut g = GraphSpec::new();
    let ids = (0..n)
        .map(|i| g.add_stage(stage(&format!("s{i}"), Grid::new(4, 8, 1))).unwrap())
        .collect();
    (g, ids)
}

#[test]
fn independent_stages_keep_the_order_they_were_added_in() {
    // No edges: declaration order. With an edge from the last to the first, the rest keep
    // theirs around it.
    let (mut g, ids) = stages(4);
    assert_eq!(g.topological_order().unwrap(), ids);
    g.depend(ids[3], ids[0], Dependency::GemmRow, PolicyKind::RowSync, 128)
        .unwrap();
    assert_eq!(g.topological_order().unwrap(), vec![ids[1], ids[2], ids[3], ids[0]]);
}

#[test]
fn a_valid_chain_is_accepted_in_topological_order() {
    let (mut g, ids) = stages(4);
    for w in [(2, 3), (0, 1), (1, 2)] {
        g.depend(ids[w.0], ids[w.1], Dependency::GemmRow, PolicyKind::RowSync, 128)
            .unwrap();
    }
    let order = g.topological_order().unwrap();
    let pos = |s: StageId| order.iter().position(|&x| x == s).unwrap();
    assert!(pos(ids[0]) < pos(ids[1]) && pos(ids[1]) < pos(ids[2]) && pos(ids[2]) < pos(ids[3]));
    assert_eq!(g.depths().unwrap(), vec![0, 1, 2, 3]);
}

#[test]
fn empty_grid_is_refused() {
    let mut g = GraphSpec::new();
    assert!(message(g.add_stage(stage("empty", Grid::new(0, 4, 1)))).contains("empty grid"));
}

#[test]
fn bad_thread_counts_are_refused() {
    let mut g = GraphSpec::new();
    let mut s = stage("s", Grid::new(1, 1, 1));
    s.threads = 2048;
    assert!(message(g.add_stage(s)).contains("threads per block"));
}

#[test]
fn persistent_blocks_are_bounded_by_the_work_units() {
    let mut g = GraphSpec::new();
    let mut s = stage("split", Grid::new(2, 32, 1));
    s.persistent_blocks = Some(128);
    // 64 tiles: 128 blocks only when each tile is two split-K units.
    assert!(message(g.add_stage(s.clone())).contains("128 persistent blocks for 64 tiles x 1"));
    s.split_k = 2;
    assert_eq!(s.work_units(), 128);
    assert!(g.add_stage(s.clone()).is_ok());
    s.persistent_blocks = Some(129);
    assert!(message(g.add_stage(s.clone())).contains("(1..=units)"));
    s.persistent_blocks = Some(0);
    assert!(message(g.add_stage(s.clone())).contains("(1..=units)"));
    s.split_k = 0;
    s.persistent_blocks = Some(1);
    assert!(message(g.add_stage(s.clone())).contains("split-K factor 0"));
    // One block per tile has no blocks to take a tile's other units.
    s.split_k = 2;
    s.persistent_blocks = None;
    assert!(message(g.add_stage(s)).contains("only for a persistent stage"));
}

#[test]
fn wait_kernels_wait_for_every_block_of_a_persistent_producer_and_the_first_of_others() {
    // A block per tile (64 blocks a launch): launch 2 is released by its first block.
    let mut s = stage("per tile", Grid::new(2, 32, 1));
    assert_eq!(s.start_target(2), 2 * 64 + 1);
    // Persistent, 40 blocks owning their lanes: launch 2 needs all 40 of its blocks.
    s.persistent_blocks = Some(40);
    assert_eq!(s.start_target(0), 40);
    assert_eq!(s.start_target(2), 3 * 40);
}

#[test]
fn range_stages_may_have_more_blocks_than_tiles_but_need_a_count_and_no_split() {
    let mut g = GraphSpec::new();
    // The skinny GeMM1 of the GPT-3 MLP: 96 column blocks, 132 ranges.
    let mut s = stage("skinny", Grid::new(1, 96, 1));
    s.persistent_blocks = Some(132);
    assert!(message(g.add_stage(s.clone())).contains("132 persistent blocks for 96 tiles"));
    s.ranges = true;
    assert!(g.add_stage(s.clone()).is_ok());
    assert_eq!(s.launch_blocks(), 132);
    s.persistent_blocks = None;
    assert!(message(g.add_stage(s.clone())).contains("range-taking stage needs its block count"));
    s.persistent_blocks = Some(0);
    assert!(message(g.add_stage(s.clone())).contains("range-taking stage"));
    s.persistent_blocks = Some(132);
    s.split_k = 2;
    assert!(message(g.add_stage(s)).contains("no split-K"));
}

#[test]
fn custom_orders_must_be_permutations() {
    let mut g = GraphSpec::new();
    let mut s = stage("short", Grid::new(2, 2, 1));
    s.custom_order = Some(vec![0, 1, 2]);
    assert!(message(g.add_stage(s.clone())).contains("3 entries for 4 tiles"));
    s.custom_order = Some(vec![0, 1, 1, 3]);
    assert!(message(g.add_stage(s.clone())).contains("not a permutation"));
    s.custom_order = Some(vec![0, 1, 2, 9]);
    assert!(message(g.add_stage(s.clone())).contains("not a permutation"));
    s.custom_order = Some(vec![3, 1, 2, 0]);
    assert!(g.add_stage(s).is_ok());
}

#[test]
fn row_sync_with_different_row_tiling_is_refused() {
    let (mut g, a, b) = two_stages(Grid::new(4, 8, 1), Grid::new(8, 8, 1));
    let m = message(g.depend(a, b, Dependency::GemmRow, PolicyKind::RowSync, 128));
    assert!(
        m.contains("RowSync") && m.contains("producer has 4 row tiles, consumer 8"),
        "{m}"
    );
}

#[test]
fn strided_sync_stride_must_divide_the_columns() {
    let (mut g, a, b) = two_stages(Grid::new(4, 10, 1), Grid::new(4, 8, 1));
    let m = message(g.depend(a, b, Dependency::GemmRow, PolicyKind::StridedSync { stride: 4 }, 128));
    assert!(
        m.contains("stride 4 does not divide the producer's 10 column tiles"),
        "{m}"
    );
    let m = message(g.depend(a, b, Dependency::GemmRow, PolicyKind::StridedSync { stride: 0 }, 128));
    assert!(m.contains("stride must be at least 1"), "{m}");
    assert!(g
        .depend(a, b, Dependency::GemmRow, PolicyKind::StridedSync { stride: 5 }, 128)
        .is_ok());
}

#[test]
fn no_sync_on_a_real_dependency_is_refused() {
    let (mut g, a, b) = two_stages(Grid::new(4, 8, 1), Grid::new(4, 8, 1));
    let m = message(g.depend(a, b, Dependency::GemmRow, PolicyKind::NoSync, 128));
    assert!(m.contains("NoSync cannot synchronize a GemmRow dependency"), "{m}");
}

#[test]
fn self_dependencies_and_zero_tile_widths_are_refused() {
    let (mut g, a, b) = two_stages(Grid::new(4, 8, 1), Grid::new(4, 8, 1));
    assert!(message(g.depend(a, a, Dependency::GemmRow, PolicyKind::RowSync, 128)).contains("itself"));
    assert!(message(g.depend(a, b, Dependency::GemmRow, PolicyKind::RowSync, 0)).contains("tile width 0"));
}

#[test]
fn unknown_stages_are_refused() {
    let (mut g, a, _) = two_stages(Grid::new(4, 8, 1), Grid::new(4, 8, 1));
    assert!(message(g.depend(a, StageId(7), Dependency::GemmRow, PolicyKind::RowSync, 128)).contains("no stage 7"));
}

#[test]
fn cycles_are_refused_and_leave_the_graph_unchanged() {
    let (mut g, ids) = stages(3);
    g.depend(ids[0], ids[1], Dependency::GemmRow, PolicyKind::TileSync, 128)
        .unwrap();
    g.depend(ids[1], ids[2], Dependency::GemmRow, PolicyKind::TileSync, 128)
        .unwrap();
    // s2 -> s0 would close a cycle; s0 has no wait edge and s2 no post edge, so only the cycle
    // check can refuse it.
    let m = message(g.depend(ids[2], ids[0], Dependency::GemmRow, PolicyKind::TileSync, 128));
    assert!(
        m.contains("cycle") && m.contains("s0") && m.contains("s1") && m.contains("s2"),
        "{m}"
    );
    assert_eq!(g.edges().len(), 2);
    assert!(g.topological_order().is_ok());
}

#[test]
fn a_second_dependent_operand_or_consumer_is_refused() {
    let (mut g, ids) = stages(3);
    g.depend(ids[0], ids[2], Dependency::GemmRow, PolicyKind::TileSync, 128)
        .unwrap();
    assert!(
        message(g.depend(ids[1], ids[2], Dependency::GemmRow, PolicyKind::TileSync, 128)).contains("already waits")
    );
    assert!(
        message(g.depend(ids[0], ids[1], Dependency::GemmRow, PolicyKind::TileSync, 128)).contains("already posts")
    );
}

#[test]
fn dependencies_other_than_gemm_row_are_refused_in_stream_mode() {
    let (mut g, a, b) = two_stages(Grid::new(4, 8, 1), Grid::new(4, 8, 1));
    let m = message(g.depend(
        a,
        b,
        Dependency::Strided { stride: 2 },
        PolicyKind::StridedSync { stride: 2 },
        128,
    ));
    assert!(m.contains("not supported yet"), "{m}");
}
