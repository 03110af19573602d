//! Grouped bar charts as standalone SVG documents (no plotting dependency): one group of bars
//! per x position, one bar per series, a dashed reference line, values on the bars and in each
//! bar's tooltip. The MLP sweep's speedup chart and `run layers`' chart are drawn with it.

use std::fmt::Write;

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const BOTTOM: f64 = 70.0;

/// One series: a bar in every group.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its name in bar tooltips ("vs cuBLAS").
    pub name: String,
    /// Its legend text.
    pub legend: String,
    /// Fill colour (CSS).
    pub color: String,
}

/// One x position: a label under the axis, a tooltip prefix, one value per series (NaN: no
/// bar).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Text under the group.
    pub label: String,
    /// Tooltip prefix ("batch 64").
    pub tip: String,
    /// One value per series.
    pub values: Vec<f64>,
}

/// A grouped bar chart of ratios.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// Bold first line.
    pub title: String,
    /// Second line (how to read it).
    pub subtitle: String,
    /// Under the x axis.
    pub x_label: String,
    /// The series, in bar order.
    pub series: Vec<Series>,
    /// The groups, left to right.
    pub groups: Vec<Group>,
    /// Where the dashed line goes (1.0: parity).
    pub reference: f64,
}

impl BarChart {
    /// The chart as an SVG document (no groups: an empty chart that says so).
    pub fn to_svg(&self) -> String {
        let max = self
            .groups
            .iter()
            .flat_map(|g| g.values.iter().copied())
            .filter(|v| v.is_finite())
            .fold(self.reference * 1.2, f64::max);
        let y_max = (max * 1.1 * 4.0).ceil() / 4.0;
        // The legend: rows under the subtitle, above the plot, wrapped at the chart's width.
        let mut legend = Vec::with_capacity(self.series.len());
        let (mut lx, mut ly) = (LEFT, 52.0);
        for s in &self.series {
            let width = 16.0 + 6.5 * s.legend.chars().count() as f64 + 18.0;
            if lx > LEFT && lx + width > W - RIGHT {
                (lx, ly) = (LEFT, ly + 16.0);
            }
            legend.push((lx, ly));
            lx += width;
        }
        let top = ly + 24.0;
        let plot_w = W - LEFT - RIGHT;
        let plot_h = H - top - BOTTOM;
        let y = |v: f64| top + plot_h * (1.0 - v / y_max);
        let mut o = String::new();
        let _ = writeln!(
            o,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"##
        );
        let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
        let _ = writeln!(
            o,
            r##"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{}</text>"##,
            escape(&self.title)
        );
        let _ = writeln!(
            o,
            r##"<text x="{LEFT}" y="42" fill="#555">{}</text>"##,
            escape(&self.subtitle)
        );
        let mut tick = 0.0;
        while tick <= y_max + 1e-9 {
            let ty = y(tick);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#e5e5e5"/>"##,
                W - RIGHT
            );
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{tick:.2}x</text>"##,
                LEFT - 6.0,
                ty + 4.0
            );
            tick += 0.25;
        }
        let reference = y(self.reference);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{reference:.1}" x2="{:.1}" y2="{reference:.1}" stroke="#000" stroke-dasharray="6 4"/>"##,
            W - RIGHT
        );
        if self.groups.is_empty() {
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">no rows</text>"##,
                LEFT + plot_w / 2.0,
                top + plot_h / 2.0
            );
        }
        let n = self.series.len().max(1) as f64;
        let group_w = plot_w / self.groups.len().max(1) as f64;
        let bar = (group_w * 0.64 / n).min(40.0);
        for (i, g) in self.groups.iter().enumerate() {
            let cx = LEFT + group_w * (i as f64 + 0.5);
            for (k, (s, &v)) in self.series.iter().zip(&g.values).enumerate() {
                if !v.is_finite() {
                    continue;
                }
                let x = cx - bar * n / 2.0 + k as f64 * bar;
                let top = y(v.min(y_max));
                let _ = writeln!(
                    o,
                    r##"<rect class="bar" x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {v:.3}x {}</title></rect>"##,
                    bar - 2.0,
                    (y(0.0) - top).max(0.0),
                    s.color,
                    escape(&g.tip),
                    escape(&s.name)
                );
                let _ = writeln!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{v:.2}</text>"##,
                    x + bar / 2.0 - 1.0,
                    top - 3.0
                );
            }
            let _ = writeln!(
                o,
                r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                y(0.0) + 16.0,
                escape(&g.label)
            );
        }
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            LEFT + plot_w / 2.0,
            H - 28.0,
            escape(&self.x_label)
        );
        for (s, (lx, ly)) in self.series.iter().zip(legend) {
            let _ = writeln!(
                o,
                r##"<rect x="{lx:.1}" y="{ly:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"##,
                s.color,
                lx + 16.0,
                ly + 10.0,
                escape(&s.legend)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

/// `s` with the characters XML gives meaning to replaced by entities.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(groups: Vec<Group>) -> BarChart {
        BarChart {
            title: "t <x>".into(),
            subtitle: "s".into(),
            x_label: "x".into(),
            series: vec![
                Series {
                    name: "a".into(),
                    legend: "series a".into(),
                    color: "#111".into(),
                },
                Series {
                    name: "b".into(),
                    legend: "series b".into(),
                    color: "#222".into(),
                },
            ],
            groups,
            reference: 1.0,
        }
    }

    #[test]
    fn a_bar_per_finite_value_with_its_value_in_the_tooltip() {
        let svg = chart(vec![
            Group {
                label: "1".into(),
                tip: "g 1".into(),
                values: vec![1.5, f64::NAN],
            },
            Group {
                label: "2".into(),
                tip: "g 2".into(),
                values: vec![0.5, 2.0],
            },
        ])
        .to_svg();
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        assert!(svg.contains("g 1: 1.500x a"), "{svg}");
        assert!(svg.contains("g 2: 2.000x b"));
        assert!(svg.contains("t &lt;x&gt;"), "the title is escaped");
        // Background, 3 bars, 2 legend swatches.
        assert_eq!(svg.matches("<rect").count(), 6);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn no_groups_say_so() {
        assert!(chart(Vec::new()).to_svg().contains("no rows"));
    }
}
