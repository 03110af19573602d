//! `run layers`' results as CSV and as a bar chart: per stack (M, layers), every variant's
//! speedup over our single GeMMs (the same per-tile kernel launched once per layer).

use std::fmt::Write;

use super::bench::{LayerTimes, Pipelining};
use crate::plot::{BarChart, Group, Series};

/// One `run layers` report: the stack and its side-by-side medians.
#[derive(Clone, Debug, PartialEq)]
pub struct LayersReport {
    /// Rows of the input.
    pub m: usize,
    /// Layers of the stack.
    pub layers: usize,
    /// The medians.
    pub times: LayerTimes,
}

impl LayersReport {
    /// `(variant, ms)` of every variant measured, pipelined ones first.
    pub fn variants(&self) -> Vec<(String, f64)> {
        let t = &self.times;
        let mut v: Vec<(String, f64)> = t
            .pipelined_by_policy
            .iter()
            .map(|(p, ms)| (pipelined_name(*p), *ms))
            .collect();
        v.push(("every dependency met".into(), t.persistent.no_dependencies_ms));
        v.push(("no protocol code (twin)".into(), t.persistent.no_protocol_ms));
        v.push(("our single GeMMs".into(), t.singles_ms));
        if let Some(d) = t.default_singles_ms {
            v.push(("our single GeMMs, default config".into(), d));
        }
        if let Some(c) = t.cublas_ms {
            v.push(("cuBLAS back to back".into(), c));
        }
        if let Some(mb) = &t.microbatch {
            v.push((
                format!("cuBLAS micro-batching (best chunk {})", mb.sweep.best_chunk),
                mb.best_ms,
            ));
        }
        v
    }
}

/// A pipelined variant's name in the CSV and in tooltips.
fn pipelined_name(p: Pipelining) -> String {
    format!("pipelined ({})", p.name())
}

/// `m,layers,variant,ms,speedup_over_singles`, one line per report and variant.
pub fn layers_csv(reports: &[LayersReport]) -> String {
    let mut o = String::from("m,layers,variant,ms,speedup_over_singles\n");
    for r in reports {
        for (name, ms) in r.variants() {
            let _ = writeln!(
                o,
                "{},{},\"{}\",{:.4},{:.4}",
                r.m,
                r.layers,
                name,
                ms,
                r.times.singles_ms / ms
            );
        }
    }
    o
}

/// The chart: per report, the speedup over our single GeMMs of each pipelined variant, of
/// cuBLAS back to back and of best-chunk micro-batching (above 1.0x: faster than our singles).
pub fn layers_svg(reports: &[LayersReport], device: &str) -> String {
    const COLORS: [&str; 8] = [
        "#4e79a7", "#a0cbe8", "#59a14f", "#8cd17d", "#f28e2b", "#e15759", "#b07aa1", "#edc948",
    ];
    // Series: the first report's pipelined variants, then cuBLAS and micro-batching.
    let pipelined: Vec<Pipelining> = reports.first().map_or(Vec::new(), |r| {
        r.times.pipelined_by_policy.iter().map(|(p, _)| *p).collect()
    });
    let mut series: Vec<(String, String)> = pipelined
        .iter()
        .map(|p| (pipelined_name(*p), format!("megakernel, {}", p.name())))
        .collect();
    for n in ["cuBLAS back to back", "cuBLAS micro-batching"] {
        series.push((n.into(), n.into()));
    }
    let series = series
        .into_iter()
        .enumerate()
        .map(|(i, (name, legend))| Series {
            name,
            legend,
            color: COLORS[i % COLORS.len()].into(),
        })
        .collect();
    let groups = reports
        .iter()
        .map(|r| {
            let t = &r.times;
            let over = |ms: f64| t.singles_ms / ms;
            let mut values: Vec<f64> = pipelined
                .iter()
                .map(|want| {
                    t.pipelined_by_policy
                        .iter()
                        .find(|(p, _)| p == want)
                        .map_or(f64::NAN, |(_, ms)| over(*ms))
                })
                .collect();
            values.push(t.cublas_ms.map_or(f64::NAN, over));
            values.push(t.microbatch.as_ref().map_or(f64::NAN, |mb| over(mb.best_ms)));
            Group {
                label: format!("M={} x{}", r.m, r.layers),
                tip: format!("M = {}, {} layers", r.m, r.layers),
                values,
            }
        })
        .collect();
    BarChart {
        title: format!("GeMM stacks [M,W]x[W,W]...: speedup over our single GeMMs ({device})"),
        subtitle: "our single GeMMs' time / the variant's (medians, side by side); above 1.0x faster than our singles"
            .into(),
        x_label: "stack (rows M, layers)".into(),
        series,
        groups,
        reference: 1.0,
    }
    .to_svg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persistent::bench::{Pipelining, StackPolicy};
    use crate::persistent::{PersistentTimes, SchedulePriority};

    fn report(m: usize, pipelined: f64) -> LayersReport {
        let band = StackPolicy::Band { rows: 8 };
        LayersReport {
            m,
            layers: 2,
            times: LayerTimes {
                persistent: PersistentTimes {
                    pipelined_ms: pipelined,
                    no_dependencies_ms: 1.9,
                    no_protocol_ms: 1.8,
                    ctas: 132,
                    tiles: 100,
                    kernel: "k",
                },
                pipelined_by_policy: vec![
                    (
                        Pipelining {
                            policy: band,
                            priority: SchedulePriority::UpstreamFirst,
                        },
                        pipelined,
                    ),
                    (
                        Pipelining {
                            policy: band,
                            priority: SchedulePriority::DownstreamFirst,
                        },
                        2.5,
                    ),
                ],
                singles_ms: 2.0,
                default_singles_ms: None,
                cublas_ms: Some(1.6),
                microbatch: None,
                clocks: Err("no NVML in a unit test".into()),
                rounds: Vec::new(),
            },
        }
    }

    #[test]
    fn csv_has_a_line_per_variant_with_its_speedup_over_the_singles() {
        let csv = layers_csv(&[report(1024, 4.0)]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "m,layers,variant,ms,speedup_over_singles");
        assert_eq!(lines.len(), 1 + 6);
        assert_eq!(
            lines[1],
            "1024,2,\"pipelined (RowBandSync8, upstream first)\",4.0000,0.5000"
        );
        assert!(lines.contains(&"1024,2,\"cuBLAS back to back\",1.6000,1.2500"));
    }

    #[test]
    fn the_chart_has_a_bar_per_measured_variant_and_none_for_what_did_not_run() {
        let svg = layers_svg(&[report(1024, 4.0), report(4096, 1.0)], "GPU");
        // Per report: 2 pipelined, cuBLAS; micro-batching did not run.
        assert_eq!(svg.matches(r#"class="bar""#).count(), 6);
        assert!(
            svg.contains("M = 4096, 2 layers: 2.000x pipelined (RowBandSync8, upstream first)"),
            "{svg}"
        );
        assert!(svg.contains("M = 1024, 2 layers: 1.250x cuBLAS back to back"));
        assert!(layers_svg(&[], "GPU").contains("no rows"));
    }
}
