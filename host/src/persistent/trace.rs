//! Traces of persistent launches (issue 6): a [`PersistentRun`]'s per-tile events as a
//! [`Trace`] (stage names and grids from the plan, resident blocks per SM from the occupancy
//! API), and the traced GeMM-stack run behind `cusync run layers --trace DIR`.

use std::fmt::Write as _;
use std::path::Path;

use super::bench::GemmStack;
use super::graph::{PersistentGraph, PersistentRun};
use super::spec::PersistentOptions;
use super::work::WorkerKind;
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

/// `cusync run layers --trace DIR`: one traced, pipelined launch (after an untraced-timing
/// warm-up launch) of the persistent megakernel on the bf16 GeMM stack `m x widths`
/// (`pipelining`'s policy between layers and scheduler priority, every layer on worker `kind`: path 1 or a path-2 tile), written as Chrome
/// JSON, CSV and SVG into `dir`; returns the analysis and the paths written. The queues are in
/// `order` (`run layers --order`).
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
    let options = PersistentOptions {
        trace: true,
        priority: pipelining.priority,
        ..PersistentOptions::default()
    };
    let mut graph = PersistentGraph::new(
        cx,
        &stack.spec_ordered(pipelining.policy.edge_policy(), kind, order)?,
        options,
    )?;
    graph.run()?; // warm-up
    let run = graph.run()?;
    let shape: Vec<String> = widths.iter().map(usize::to_string).collect();
    let label = format!(
        "persistent megakernel `{}`, {} bf16 layers [{m},{}], {}, {} CTAs, {:.3} ms",
        graph.family().kernel(),
        widths.len() - 1,
        shape.join("]x["),
        pipelining.name(),
        run.ctas,
        run.elapsed_ms
    );
    let trace = persistent_trace(&graph, &run, label)?;
    let up = match pipelining.priority {
        super::SchedulePriority::DownstreamFirst => "",
        super::SchedulePriority::UpstreamFirst => "-up",
    };
    let files = trace.save_all(
        dir,
        &format!("layers-m{m}-{}{up}", pipelining.policy.name().to_lowercase()),
    )?;
    let mut out = trace.analyze()?.to_string();
    for f in files {
        let _ = writeln!(out, "wrote {}", f.display());
    }
    Ok(out)
}
