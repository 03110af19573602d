//! Host-side benchmark: per-wave analysis of a large trace (issue 7 item 2: "trace analysis of a
//! million events"). A synthetic two-stage run of 132 SMs x 4 CTA slots, about a million tiles.

use criterion::{criterion_group, criterion_main, Criterion};
use cusync::trace::{SyntheticTwoStage, Trace};
use std::time::Duration;

fn analysis(c: &mut Criterion) {
    let spec = SyntheticTwoStage {
        label: "1M-tile synthetic".into(),
        sms: 132,
        blocks_per_sm: 4,
        rows: 1024,
        producer_cols: 512,
        consumer_cols: 512,
        ..SyntheticTwoStage::default()
    };
    let trace = Trace::synthetic_two_stage(&spec);
    assert!(trace.events.len() >= 1_000_000, "{} events", trace.events.len());
    let mut g = c.benchmark_group("trace");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("analyze_1M_events", |b| b.iter(|| trace.analyze().expect("analysis")));
    g.finish();
}

criterion_group!(benches, analysis);
criterion_main!(benches);
