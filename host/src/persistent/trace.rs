//! Traces of persistent launches (issue 6): a [`PersistentRun`]'s per-tile events as a
//! [`Trace`] (stage names and grids from the plan, resident blocks per SM from the occupancy
//! API), and the traced GeMM-stack run behind `cusync run layers --trace DIR`.

use std::fmt::Write as _;
use std::path::Path;

use super::bench::GemmStack;
use super::blocks::BlockSummary;
use super::graph::{PersistentGraph, PersistentRun};
use super::spec::PersistentOptions;
use super::work::WorkerKind;
use crate::ops::gemm::Gemm;
use crate::trace::{StageMeta, Trace, TraceMeta};
use crate::{Context, Result};

/// Resident blocks of `graph`'s launch per SM: the kernel's occupancy, at most the launch's
/// blocks spread over the SMs.
pub fn resident_blocks_per_sm(graph: &PersistentGraph) -> Result<u32> {
    let cx = graph.context();
    let family = graph.family();
    let occupancy = cx.occupancy(family.kernel(), family.threads(), family.smem_bytes())?;
    Ok(occupancy.min(graph.ctas().div_ceil(cx.info().sm_count.max(1))).max(1))
}

/// The trace of `run` (a launch of `graph` with tracing on): every stage's events, named and
/// sized from the plan, with the device's SM count and [`resident_blocks_per_sm`]. Stage ids
/// are the graph's [`StageId`](crate::plan::StageId)s.
pub fn persistent_trace(graph: &PersistentGraph, run: &PersistentRun, label: impl Into<String>) -> Result<Trace> {
    let cx = graph.context();
    let blocks_per_sm = resident_blocks_per_sm(graph)?;
    let stages = graph
        .plan()
        .stages
        .iter()
        .enumerate()
        .map(|(i, s)| StageMeta {
            id: i as u32,
            name: s.name.clone(),
            grid: Some(s.grid),
            blocks_per_sm: Some(blocks_per_sm),
        })
        .collect();
    let meta = TraceMeta {
        label: label.into(),
        device: cx.info().name.clone(),
        sm_count: Some(cx.info().sm_count),
        stages,
    };
    Trace::new(meta, run.traces.iter().flatten().copied().collect())
}

/// `cusync run layers --trace DIR`: one traced, pipelined launch (after an untraced warm-up
/// launch) of the persistent megakernel on the bf16 GeMM stack `m x widths` (`pipelining`'s
/// policy between layers and scheduler priority, every layer on worker `kind`: path 1 or a
/// path-2 tile), then one traced launch of the same megakernel with every dependency met up
/// front, one of its no-protocol twin, then the single GeMMs (`singles_trace`); each written
/// as Chrome JSON, CSV and SVG into `dir`. Returns the analyses (each path-2 megakernel
/// launch's with its [`BlockSummary`]), the paths written and the per-layer periods of the
/// four (`layer_periods`). The queues are in `order` (`run layers --order`).
pub fn trace_layers(
    cx: &Context,
    m: usize,
    widths: &[usize],
    kind: WorkerKind,
    order: super::bench::StackOrder,
    pipelining: super::bench::Pipelining,
    dir: &Path,
) -> Result<String> {
    let stack = GemmStack::new(cx, m, widths, 0x5eed_0005)?;
    let spec = stack.spec_ordered(pipelining.policy.edge_policy(), kind, order)?;
    let shape: Vec<String> = widths.iter().map(usize::to_string).collect();
    let pipelined_options = PersistentOptions {
        trace: true,
        priority: pipelining.priority,
        ..PersistentOptions::default()
    };
    let pipelined = traced_launch(cx, &spec, pipelined_options.clone(), false, |kernel, run| {
        format!(
            "persistent megakernel `{kernel}`, {} bf16 layers [{m},{}], {}, {} CTAs, {:.3} ms",
            widths.len() - 1,
            shape.join("]x["),
            pipelining.name(),
            run.ctas,
            run.elapsed_ms
        )
    })?;
    // The same megakernel with every dependency met up front (every queue prefilled in the
    // stage's order, no scoreboard walk), on as many CTAs: a layer slower pipelined than here
    // loses its time to the pipelining (pushed queues, waits), not to the megakernel.
    let deps_met_options = PersistentOptions {
        no_dependencies: true,
        max_ctas: Some(pipelined.ctas),
        ..pipelined_options
    };
    let deps_met = traced_launch(cx, &spec, deps_met_options.clone(), false, |kernel, run| {
        format!(
            "persistent megakernel `{kernel}`, every dependency met up front, {} CTAs, {:.3} ms",
            run.ctas, run.elapsed_ms
        )
    })?;
    // The no-protocol twin (tiles from one counter, no queues, no posts): the protocol's
    // overhead is deps met's time over the twin's, per tile (periods) and per launch (blocks).
    let twin = traced_launch(cx, &spec, deps_met_options, true, |kernel, run| {
        format!(
            "persistent megakernel's no-protocol twin `{kernel}`, {} CTAs, {:.3} ms",
            run.ctas, run.elapsed_ms
        )
    })?;
    drop(spec);
    let up = match pipelining.priority {
        super::SchedulePriority::DownstreamFirst => "",
        super::SchedulePriority::UpstreamFirst => "-up",
    };
    let mut stack = stack;
    let singles = singles_trace(cx, &mut stack, kind)?;
    let mut out = String::new();
    for (t, blocks, stem) in [
        (
            &pipelined.trace,
            pipelined.blocks.as_str(),
            format!("layers-m{m}-{}{up}", pipelining.policy.name().to_lowercase()),
        ),
        (
            &deps_met.trace,
            deps_met.blocks.as_str(),
            format!("layers-m{m}-depsmet{up}"),
        ),
        (&twin.trace, twin.blocks.as_str(), format!("layers-m{m}-twin")),
        (&singles, "", format!("layers-m{m}-singles")),
    ] {
        let files = t.save_all(dir, &stem)?;
        out.push_str(&t.analyze()?.to_string());
        out.push_str(blocks);
        for f in files {
            let _ = writeln!(out, "wrote {}", f.display());
        }
    }
    out.push_str(&layer_periods(
        &pipelined.trace,
        &deps_met.trace,
        Some(&twin.trace),
        &singles,
    ));
    Ok(out)
}

/// A traced launch: its trace, the graph's block count, and its [`BlockSummary`] as text
/// (empty when no block recorded stamps).
struct TracedLaunch {
    trace: Trace,
    ctas: u32,
    blocks: String,
}

/// One traced launch of a graph of `spec` under `options` (tracing on), after an untraced
/// warm-up launch: the protocol megakernel, or its no-protocol twin when `twin`. Its trace is
/// labelled by `label(kernel, run)`.
fn traced_launch(
    cx: &Context,
    spec: &super::spec::PersistentSpec<'_>,
    options: PersistentOptions,
    twin: bool,
    label: impl FnOnce(&str, &PersistentRun) -> String,
) -> Result<TracedLaunch> {
    let mut graph = PersistentGraph::new(cx, spec, options)?;
    let (run, kernel) = if twin {
        graph.run_noprotocol()?; // warm-up
        (graph.run_noprotocol()?, graph.family().noprotocol_kernel())
    } else {
        graph.run()?;
        (graph.run()?, graph.family().kernel())
    };
    let trace = persistent_trace(&graph, &run, label(kernel, &run))?;
    let blocks =
        BlockSummary::of(&run.blocks, &trace.events, run.elapsed_ms as f64).map_or_else(String::new, |b| b.to_string());
    Ok(TracedLaunch {
        trace,
        ctas: graph.ctas(),
        blocks,
    })
}

/// One traced launch of each layer of `stack` as a plain GeMM of the megakernel's per-tile
/// configuration ([`GemmStack::config_for`]: bitwise the same tiles); layer `i`'s events are
/// stage `i`. The singles' timeline, to read beside the pipelined one tile by tile.
///
/// An untraced launch of every layer first (no cold code in the traced ones), then the traced
/// launches back to back on one stream, with no synchronization between them: each layer
/// starts under the power state the one before left, as the megakernel's layers do. (Traced one at a time after an idle host round trip, every
/// layer started boosted and settled under the power cap while it ran: on an H100, session 42,
/// the singles' periods crept from 86 to 95 µs within each layer.)
pub fn singles_trace(cx: &Context, stack: &mut GemmStack, kind: WorkerKind) -> Result<Trace> {
    let stream = cx.new_stream()?;
    let layers = stack.weights.len();
    let gemms = (0..layers)
        .map(|i| Gemm::new(cx, stack.config_for(i, kind)))
        .collect::<Result<Vec<_>>>()?;
    let mut buffers = Vec::with_capacity(layers);
    let mut params = Vec::with_capacity(layers);
    for (i, gemm) in gemms.iter().enumerate() {
        let (a, w, c) = stack.layer_operands_mut(i);
        let p = gemm.check(a, w, c, None)?;
        let mut buffer = crate::stream::trace_buffer(cx, gemm.trace_tiles(&p))?;
        buffer.fill(0xFF)?;
        buffers.push(buffer);
        params.push(p);
    }
    let (start, end) = (cx.new_event()?, cx.new_event()?);
    for traced in [false, true] {
        if traced {
            stream.record(&start)?;
        }
        for (i, gemm) in gemms.iter().enumerate() {
            let (a, w, c) = stack.layer_operands_mut(i);
            if traced {
                gemm.launch_traced(&stream, a, w, c, None, &mut buffers[i])?;
            } else {
                gemm.launch(&stream, a, w, c, None)?;
            }
        }
    }
    stream.record(&end)?;
    stream.synchronize()?;
    let total_ms = start.elapsed_ms(&end)? as f64;
    let mut events = Vec::new();
    let mut stages = Vec::new();
    for (i, gemm) in gemms.iter().enumerate() {
        events.extend(gemm.trace_events(&params[i], &buffers[i], i as u32)?);
        stages.push(StageMeta {
            id: i as u32,
            name: format!("layer{i}"),
            grid: Some(gemm.trace_grid(&params[i])),
            blocks_per_sm: None,
        });
    }
    let meta = TraceMeta {
        label: format!(
            "single GeMMs, one per layer, the megakernel's tiles ({kind:?}), traced back to back on one stream after an \
             untraced launch of every layer, {total_ms:.3} ms"
        ),
        device: cx.info().name.clone(),
        sm_count: Some(cx.info().sm_count),
        stages,
    };
    Trace::new(meta, events)
}

/// Per layer, the median steady-state CTA period ([`crate::trace::tile_periods`]) of the
/// pipelined megakernel, of the same megakernel with every dependency met, and of the single
/// GeMMs, with each megakernel's ratio to the singles: which layer's tiles run slower, and
/// whether the pipelining (pipelined slower than deps met), the megakernel (both slower than
/// the singles) or the layer's data and clocks (all three alike) is why.
pub fn layer_periods(pipelined: &Trace, deps_met: &Trace, twin: Option<&Trace>, singles: &Trace) -> String {
    let mut out = String::from(
        "per layer, median CTA period (a tile's end to its CTA's next tile's end): pipelined, deps met, single GeMMs:\n",
    );
    for id in pipelined.stage_ids() {
        let median = |t: &Trace| {
            let periods = crate::trace::tile_periods(&t.events, id);
            let count = periods.len();
            (crate::trace::Stats::of(periods).median_ns / 1e3, count)
        };
        let ((p, np), (d, nd), (s, ns)) = (median(pipelined), median(deps_met), median(singles));
        let ratio = |x: f64, n: usize| {
            if n > 0 && ns > 0 && s > 0.0 {
                format!("{:.3}x", x / s)
            } else {
                "n/a".to_string()
            }
        };
        let _ = writeln!(
            out,
            "  {:<10} pipelined {p:>8.2} us ({np} periods), deps met {d:>8.2} us ({nd}), singles {s:>8.2} us ({ns}): \
             deps met / singles {}, pipelined / singles {}",
            pipelined.stage_name(id),
            ratio(d, nd),
            ratio(p, np),
        );
        let halves = |t: &Trace| match crate::trace::period_halves(&t.events, id) {
            Some((first, second)) => format!("{:.2} / {:.2}", first / 1e3, second / 1e3),
            None => "n/a".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<10} first / second half of the layer, us: pipelined {}, deps met {}, singles {}",
            "",
            halves(pipelined),
            halves(deps_met),
            halves(singles)
        );
        if let Some(twin) = twin {
            let (w, nw) = median(twin);
            let over = if nw > 0 && w > 0.0 && nd > 0 {
                format!("{:+.2}%", 100.0 * (d / w - 1.0))
            } else {
                "n/a".to_string()
            };
            let _ = writeln!(
                out,
                "  {:<10} no-protocol twin {w:>8.2} us ({nw}): deps met / twin {over} (the protocol's cost per tile)",
                ""
            );
        }
    }
    out.push_str(
        "  (a layer whose halves differ drifted while it ran, as a power-capped clock settles; a step between \
         layers with steady halves is the layer's own; pipelined slower than deps met is the pipelining's)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;

    /// Two layers on two CTAs: every tile of layer `s` lasts `period[s]` ns, back to back.
    fn trace(periods: [u64; 2]) -> Trace {
        let mut events = Vec::new();
        for (stage, &p) in periods.iter().enumerate() {
            let base = stage as u64 * 10_000;
            for cta in 0..2u32 {
                for k in 0..3u64 {
                    let t_end = base + (k + 1) * p;
                    events.push(TraceEvent {
                        stage: stage as u32,
                        tile: cta * 3 + k as u32,
                        sm: cta,
                        cta,
                        t_dispatch: t_end - p,
                        t_ready: t_end - p,
                        t_start: t_end - p,
                        t_end,
                    });
                }
            }
        }
        let stages = (0..2)
            .map(|i| StageMeta {
                id: i,
                name: format!("layer{i}"),
                grid: Some(crate::shared::Grid::new(2, 3, 1)),
                blocks_per_sm: Some(1),
            })
            .collect();
        let meta = TraceMeta {
            label: "test".into(),
            device: "test".into(),
            sm_count: Some(2),
            stages,
        };
        Trace::new(meta, events).unwrap()
    }

    /// Layer 0 on two CTAs whose tiles take 1.0, 1.2, 1.4 µs back to back (a clock settling),
    /// layer 1 flat at 1.0 µs.
    fn drifting() -> Trace {
        let mut t = trace([1_000, 1_000]);
        for e in t.events.iter_mut().filter(|e| e.stage == 0) {
            let k = (e.tile % 3) as u64;
            e.t_end = [1_000, 2_200, 3_600][k as usize];
            e.t_start = e.t_end - [1_000, 1_200, 1_400][k as usize];
        }
        t
    }

    #[test]
    fn period_halves_tell_a_drift_from_a_flat_layer() {
        let t = drifting();
        // Layer 0's periods by end time: 1.2, 1.2 | 1.4, 1.4 (µs).
        assert_eq!(crate::trace::period_halves(&t.events, 0), Some((1_200.0, 1_400.0)));
        assert_eq!(crate::trace::period_halves(&t.events, 1), Some((1_000.0, 1_000.0)));
        let text = layer_periods(&trace([1_000, 1_000]), &trace([1_000, 1_000]), None, &t);
        assert!(
            text.contains(
                "first / second half of the layer, us: pipelined 1.00 / 1.00, deps met 1.00 / 1.00, singles 1.20 / 1.40"
            ),
            "{text}"
        );
        assert!(text.contains("drifted while it ran"), "{text}");
    }

    #[test]
    fn layer_periods_compare_each_layer_pipelined_and_deps_met_against_singles() {
        let text = layer_periods(
            &trace([1_000, 1_100]),
            &trace([1_000, 1_050]),
            Some(&trace([1_000, 1_000])),
            &trace([1_000, 1_000]),
        );
        assert!(
            text.contains(
                "layer0     pipelined     1.00 us (4 periods), deps met     1.00 us (4), singles     1.00 us (4): \
                 deps met / singles 1.000x, pipelined / singles 1.000x"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "layer1     pipelined     1.10 us (4 periods), deps met     1.05 us (4), singles     1.00 us (4): \
                 deps met / singles 1.050x, pipelined / singles 1.100x"
            ),
            "{text}"
        );
        assert!(
            text.contains("no-protocol twin     1.00 us (4): deps met / twin +5.00% (the protocol's cost per tile)"),
            "{text}"
        );
    }
}
