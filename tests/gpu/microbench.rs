//! The protocol microbenchmarks of issue 7 on the GPU: what each measurement must also get
//! right (every pushed item popped exactly once; every consumer tile pushed exactly once with
//! its scoreboard counter at its target; every variant of the stage-pair and tracing
//! benchmarks runs; `cusync bench` renders every row). Nothing here asserts a speed.

use cusync::microbench::{
    plain_tracing_configs, protocol_table, queue_bench, scoreboard_bench, Fan, PairVariant, PersistentPair,
    PlainGemmTracing, QueueMode, StreamPairOverhead, StreamStageTracing, TracingVariant, PAIR_OVERHEAD_POLICIES,
    QUEUE_ITEMS_PER_PRODUCER, SKINNY_TRACING_BATCH, TRACING_BATCH,
};
use cusync::Context;
use cusync_tests::{ensure, fail, GpuTest};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "microbench::workqueue_pops_every_pushed_item_exactly_once",
        run: workqueue_exactly_once,
    },
    GpuTest {
        name: "microbench::scoreboard_posts_push_every_consumer_tile_once",
        run: scoreboard_exactly_once,
    },
    GpuTest {
        name: "microbench::stage_pair_and_tracing_variants_run",
        run: stage_variants,
    },
    GpuTest {
        name: "microbench::serialized_mlp_pair_equals_stream_sync_and_the_reference",
        run: serialized_pair,
    },
    GpuTest {
        name: "microbench::bench_table_has_every_row",
        run: table,
    },
];

fn positive(what: &str, x: f64) -> Result<(), String> {
    ensure(x.is_finite() && x > 0.0, || {
        format!("{what}: {x} is not a positive time")
    })
}

/// 1 to 132 producers and consumers, phased and racing, and lopsided mixes: the device's
/// exactly-once verdict and the host's counts (pushes, pops, distinct items, head and tail at
/// the launch's end) all agree with the items pushed.
fn workqueue_exactly_once(cx: &Context) -> Result<(), String> {
    let cases = [
        (1u32, 1u32, QueueMode::Phased),
        (8, 8, QueueMode::Phased),
        (32, 32, QueueMode::Phased),
        (132, 132, QueueMode::Phased),
        (1, 1, QueueMode::Racing),
        (8, 8, QueueMode::Racing),
        (132, 132, QueueMode::Racing),
        (1, 132, QueueMode::Racing),
        (132, 1, QueueMode::Racing),
        (132, 1, QueueMode::Phased),
    ];
    for (producers, consumers, mode) in cases {
        let what = format!("{producers} producers, {consumers} consumers, {mode:?}");
        let q = queue_bench(cx, producers, consumers, mode).map_err(|e| format!("{what}: {e}"))?;
        let items = producers * QUEUE_ITEMS_PER_PRODUCER;
        ensure(q.items == items, || {
            format!("{what}: {} items, expected {items}", q.items)
        })?;
        ensure(q.pushed == items, || format!("{what}: {} of {items} pushed", q.pushed))?;
        ensure(q.popped == items, || {
            format!("{what}: the device counted {} pops of {items}", q.popped)
        })?;
        ensure(q.popped_by_blocks == items, || {
            format!("{what}: the consumers reported {} pops of {items}", q.popped_by_blocks)
        })?;
        ensure(q.distinct == items, || {
            format!("{what}: {} distinct items popped of {items}", q.distinct)
        })?;
        ensure(q.device_verdict, || {
            format!("{what}: the device's exactly-once check failed")
        })?;
        ensure(q.tail == items && q.head.wrapping_sub(items) <= q.consumers, || {
            format!(
                "{what}: head {} tail {}: the tail should end at {items}, the head at most {} past it",
                q.head, q.tail, q.consumers
            )
        })?;
        ensure(q.exactly_once() && q.verify().is_ok(), || {
            format!("{what}: exactly_once() disagrees")
        })?;
        positive(&format!("{what}: push"), q.push_ns)?;
        positive(&format!("{what}: pop"), q.pop_ns)?;
        println!(
            "    {what}: {items} items exactly once; {:.1} ns/push, {:.1} ns/pop",
            q.push_ns, q.pop_ns
        );
    }
    ensure(queue_bench(cx, 0, 1, QueueMode::Phased).is_err(), || {
        "no producers accepted".into()
    })
}

/// Both dependency-array shapes with 1, 7 and 132 posting blocks: every producer tile posted
/// once, every arrival made (the CSR's entries), every consumer tile pushed exactly once (the
/// queue's slots a permutation of the consumer tiles, each published for its position), every
/// scoreboard counter at its target.
fn scoreboard_exactly_once(cx: &Context) -> Result<(), String> {
    for fan in [Fan::OneToOne, Fan::Row] {
        let (p, c) = fan.grids();
        let per_post = match fan {
            Fan::OneToOne => 1,
            Fan::Row => c.y,
        };
        for blocks in [1u32, 7, 132] {
            let what = format!("{} with {blocks} blocks", fan.name());
            let s = scoreboard_bench(cx, fan, blocks).map_err(|e| format!("{what}: {e}"))?;
            ensure(s.producer_tiles == p.count() && s.posts == p.count(), || {
                format!("{what}: {} posts of {} producer tiles", s.posts, p.count())
            })?;
            ensure(s.arrivals == p.count() * per_post, || {
                format!("{what}: {} arrivals, expected {}", s.arrivals, p.count() * per_post)
            })?;
            let n = c.count();
            ensure(s.consumer_tiles == n && s.pushed == n && s.tail == n, || {
                format!(
                    "{what}: {} consumer tiles, {} pushed, tail {} (expected {n})",
                    s.consumer_tiles, s.pushed, s.tail
                )
            })?;
            ensure(s.queued_once == n, || {
                format!("{what}: {} of {n} consumer tiles queued exactly once", s.queued_once)
            })?;
            ensure(s.counters_at_target == n, || {
                format!(
                    "{what}: {} of {n} scoreboard counters at their target",
                    s.counters_at_target
                )
            })?;
            ensure(s.verify().is_ok(), || format!("{what}: verify() disagrees"))?;
            positive(&what, s.post_ns)?;
            println!("    {what}: exactly once; {:.1} ns per post", s.post_ns);
        }
    }
    ensure(scoreboard_bench(cx, Fan::Row, 0).is_err(), || {
        "0 blocks accepted".into()
    })
}

/// Every variant of the persistent stage pair, of the stream-stage tracing benchmark and of
/// the plain-GeMM tracing benchmark runs (each launch checked: the pair's error slot and
/// tiles-done counter, the traced stage's one event per tile, the traced plain GeMM's event in
/// every slot of a poisoned buffer).
fn stage_variants(cx: &Context) -> Result<(), String> {
    let stack = cusync::microbench::pair_stack(cx).map_err(fail)?;
    let mut pair = PersistentPair::new(cx, &stack).map_err(fail)?;
    for v in [
        PairVariant::NoProtocol,
        PairVariant::NoDependencies,
        PairVariant::Pipelined,
        PairVariant::PipelinedTraced,
    ] {
        let us = pair.time_us(v).map_err(|e| format!("persistent pair {v:?}: {e}"))?;
        positive(&format!("persistent pair {v:?}"), us)?;
        println!(
            "    persistent pair {v:?}: {us:.1} us ({} CTAs, {} tiles)",
            pair.ctas(),
            pair.tiles()
        );
    }
    // The path-2 stage (B = 1024) and the skinny one (B = 1): the traced run checks one event
    // per tile.
    for batch in [TRACING_BATCH, SKINNY_TRACING_BATCH] {
        let mut stage = StreamStageTracing::at_batch(cx, batch).map_err(fail)?;
        for v in [
            TracingVariant::NoHooks,
            TracingVariant::TraceOff,
            TracingVariant::TraceOn,
        ] {
            let what = format!("stream stage B={batch} {} {v:?}", stage.kernel_name());
            let us = stage.time_us(v).map_err(|e| format!("{what}: {e}"))?;
            positive(&what, us)?;
            println!("    {what}: {us:.1} us ({} tiles)", stage.tiles());
        }
    }
    for cfg in plain_tracing_configs() {
        let mut plain = PlainGemmTracing::new(cx, cfg).map_err(fail)?;
        for traced in [false, true] {
            let what = format!("plain GeMM {}, traced {traced}", plain.label());
            let us = plain.time_us(traced).map_err(|e| format!("{what}: {e}"))?;
            positive(&what, us)?;
            println!("    {what}: {us:.1} us");
        }
    }
    Ok(())
}

/// The overhead benchmark's serialized MLP graphs (path 2 at B = 1024, the default stages at
/// B = 1: the 128 x 16 tile on the H100, the skinny kernels elsewhere; every policy it times)
/// compute what StreamSync computes, bit for bit, on poisoned outputs, and match the f64 CPU
/// reference on sampled rows; an interleaved pair runs, and traced pairs give positive
/// per-tile periods (GeMM2's at B = 1024 on both sides), one-tile spans at B = 1 that hold
/// their lead-ins, and a positive kernel boundary per launch on both sides.
fn serialized_pair(cx: &Context) -> Result<(), String> {
    for batch in [TRACING_BATCH, SKINNY_TRACING_BATCH] {
        let mut pair = StreamPairOverhead::at_batch(cx, batch).map_err(fail)?;
        for policy in PAIR_OVERHEAD_POLICIES {
            let what = format!("serialized MLP B={batch} {} {policy:?}", pair.kernel_name());
            let err = pair.verify(policy).map_err(|e| format!("{what}: {e}"))?;
            println!("    {what}: bitwise equal to StreamSync, {err:.2e} against the f64 reference");
            ensure(err < 1e-2, || format!("{what}: relative error {err:.3e}"))?;
            let (plain, hooked) = pair.time_pair_us(policy, true).map_err(|e| format!("{what}: {e}"))?;
            positive(&format!("{what} StreamSync"), plain)?;
            positive(&what, hooked)?;
            // Per-tile periods: every period positive; where a stage's CTAs run several tiles
            // (GeMM2 at B = 1024: 512 tiles on at most 132 CTAs), both sides have them.
            let launches = 2;
            let pair_periods = pair
                .tile_periods(policy, launches)
                .map_err(|e| format!("{what}: {e}"))?;
            println!("    {what}: per tile {}", pair_periods.describe());
            for p in &pair_periods.stages {
                ensure(p.plain.min_ns > 0 || p.plain.count == 0, || format!("{what}: {p:?}"))?;
                ensure(p.hooked.min_ns > 0 || p.hooked.count == 0, || format!("{what}: {p:?}"))?;
                // A one-tile span holds its lead-in (entry to main loop).
                for (span, lead_in) in [
                    (&p.plain_spans, &p.plain_lead_ins),
                    (&p.hooked_spans, &p.hooked_lead_ins),
                ] {
                    ensure(span.count == lead_in.count && lead_in.max_ns <= span.max_ns, || {
                        format!("{what}: lead-ins beyond the spans: {p:?}")
                    })?;
                }
            }
            // One boundary gap per traced launch on each side; in the serialized graph, as in
            // StreamSync, GeMM2's first block enters after GeMM1's last post.
            ensure(
                pair_periods
                    .boundary_ns
                    .iter()
                    .all(|g| g.len() == launches && g.iter().all(|&ns| ns > 0)),
                || format!("{what}: boundary gaps {:?}", pair_periods.boundary_ns),
            )?;
            let [gemm1, gemm2] = &pair_periods.stages;
            if batch == TRACING_BATCH {
                ensure(gemm2.overhead().is_finite() && !gemm2.by_spans(), || {
                    format!("{what}: GeMM2 has no periods: {gemm2:?}")
                })?;
            } else {
                // B = 1: both stages have a figure, from the one-tile spans where every CTA
                // ran one tile (the 128 x 16 stages), else from the periods.
                ensure([gemm1, gemm2].iter().all(|p| p.overhead().is_finite()), || {
                    format!("{what}: a stage without a per-tile figure at B = 1: {pair_periods:?}")
                })?;
            }
            // Every stage with a figure has one paired figure per launch pair.
            for p in [gemm1, gemm2].into_iter().filter(|p| p.overhead().is_finite()) {
                ensure(
                    p.paired.len() == launches && p.paired.iter().all(|r| r.is_finite() && *r > -0.5),
                    || format!("{what}: paired figures {:?} for {launches} launches", p.paired),
                )?;
            }
        }
    }
    Ok(())
}

/// `cusync bench`'s table with one sample: every group has its rows and every number parses.
fn table(cx: &Context) -> Result<(), String> {
    let text = protocol_table(cx, 1, |_| {}).map_err(fail)?;
    for needle in [
        "post->wait, one kernel",
        "tile() ticket, 132 blocks",
        "workqueue push, 132 producers",
        "workqueue pop, 132 consumers (after every push)",
        "workqueue pop, 132 consumers racing",
        "scoreboard post, 1:1 CSR",
        "scoreboard post, RowSync CSR",
        "protocol on, no real dependency",
        "no protocol code (protocol off)",
        "pipelined RowSync, trace on",
        "NoHooks kernel",
        "hooks, trace off",
        "hooks, trace on",
        "protocol overhead (no dependency / no protocol)",
        "plain GeMM1 B=1024",
        ": trace off",
        ": trace on",
        "tracing on / off",
        "serialized RowSync, every wait met",
        "serialized TileSync / StreamSync - 1",
        "serialized NoSync, no edge",
        "the protocol (RowSync, every wait met) / StreamSync",
        "the protocol (NoSync, no edge) / StreamSync",
        "per tile, median CTA period (or one-tile span), RowSync, every wait met",
    ] {
        ensure(text.contains(needle), || format!("no row `{needle}` in\n{text}"))?;
    }
    // Every per-tile line has a figure: periods where CTAs run several tiles (B = 1024), the
    // one-tile spans where each runs one (B = 1).
    let per_tile: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": per tile, median CTA period"))
        .collect();
    ensure(
        per_tile.len() >= 4 && per_tile.iter().all(|l| !l.contains("n/a")),
        || format!("per-tile lines without a figure: {per_tile:#?}"),
    )?;
    ensure(
        per_tile
            .iter()
            .any(|l| l.contains("MLP B=1 ") && l.contains("one tile per CTA")),
        || format!("no one-tile span figure at B = 1: {per_tile:#?}"),
    )?;
    // 16 rows of the launch and fence primitives, 12 workqueue, 4 scoreboard, 4 persistent
    // pair, 3 stream-stage tracing rows, 2 per plain GeMM kernel traced (one or two kernels).
    let rows = text
        .lines()
        .filter(|l| l.contains(" ns  ") || l.contains(" us  "))
        .count();
    ensure(rows >= 41, || format!("{rows} rows, expected at least 41, in\n{text}"))?;
    print!("{text}");
    Ok(())
}
