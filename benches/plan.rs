//! Criterion benchmarks of the persistent-mode planner (`cusync::plan`), CPU only:
//! `cargo bench --bench plan`. The target is planning a graph of a million tiles in well under
//! a second (it runs once per graph, before the first launch).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cusync::plan::{PlanSpec, ProtocolImage};
use cusync_shared::policy::{Dependency, PolicyKind};
use cusync_shared::Grid;
use std::hint::black_box;
use std::time::Duration;

/// Producer and consumer grids joined by one dependency and policy.
fn pair(p: Grid, c: Grid, dependency: Dependency, policy: PolicyKind) -> PlanSpec {
    let mut g = PlanSpec::new();
    let (a, b) = (g.stage("producer", p), g.stage("consumer", c));
    g.edge(a, b, dependency, policy);
    g
}

/// The benchmarked graphs, by name.
fn graphs() -> Vec<(&'static str, PlanSpec)> {
    vec![
        // 2^20 + 2^20 tiles, one producer tile per consumer tile (the attention dependency
        // with one tile per slice): the protocol's per-tile cost, no fan-in.
        (
            "strided_1to1_2M_tiles",
            pair(
                Grid::new(1024, 1024, 1),
                Grid::new(1024, 1024, 1),
                Dependency::Strided { stride: 1024 },
                PolicyKind::StridedSync { stride: 1024 },
            ),
        ),
        // 2^20 + 2^20 tiles, a 3x3 convolution with a one-row-tile halo: 12 producers and
        // 108 main-loop steps per consumer tile.
        (
            "conv3x3_halo_2M_tiles",
            pair(
                Grid::new(1 << 18, 4, 1),
                Grid::new(1 << 18, 4, 1),
                Dependency::Conv2D { taps: 9, halo: 1 },
                PolicyKind::Conv2DTileSync { taps: 9 },
            ),
        ),
        // The GPT-3 MLP of the paper at 8-way tensor parallelism, 128x128 tiles, a batch of
        // 65536 tokens: each consumer tile needs the 48 producer tiles of its row (RowSync).
        (
            "mlp_rowsync_b65536",
            pair(
                Grid::new(512, 48, 1),
                Grid::new(512, 96, 1),
                Dependency::GemmRow,
                PolicyKind::RowSync,
            ),
        ),
    ]
}

fn plan_graphs(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    for (name, spec) in graphs() {
        let plan = spec.plan().expect("benchmark graphs are valid");
        let tiles: u32 = plan.stages.iter().map(|s| s.tiles()).sum();
        let entries: usize = plan.edges.iter().map(|e| e.consumers.len()).sum();
        eprintln!("{name}: {tiles} tiles, {entries} dependency-array entries");
        group.bench_with_input(BenchmarkId::new("plan", name), &spec, |b, spec| {
            b.iter(|| black_box(spec.plan().unwrap()))
        });
        group.bench_with_input(BenchmarkId::new("image", name), &plan, |b, plan| {
            b.iter(|| black_box(ProtocolImage::new(plan, 0x1000_0000)))
        });
    }
    group.finish();
}

criterion_group!(benches, plan_graphs);
criterion_main!(benches);
