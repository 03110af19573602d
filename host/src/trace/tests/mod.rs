//! CPU tests of traces: formats, analysis on hand-computed traces, the SVG.

mod analysis;
mod formats;
mod svg;

use crate::shared::layout::TraceEvent;
use crate::shared::Grid;

use super::{StageMeta, Trace, TraceMeta};

/// An arbitrary `%globaltimer` origin: every hand-written time below is relative to it.
const BASE: u64 = 5_000_000_000;

/// `(stage, tile, sm, cta, [dispatch, ready, start, end] in us since BASE)`.
type Row = (u32, u32, u32, u32, [u64; 4]);

fn events(rows: &[Row]) -> Vec<TraceEvent> {
    rows.iter()
        .map(|&(stage, tile, sm, cta, [d, r, s, e])| TraceEvent {
            stage,
            tile,
            sm,
            cta,
            t_dispatch: BASE + d * 1000,
            t_ready: BASE + r * 1000,
            t_start: BASE + s * 1000,
            t_end: BASE + e * 1000,
        })
        .collect()
}

fn meta(label: &str, sms: Option<u32>, stages: &[(u32, &str, Option<u32>)]) -> TraceMeta {
    TraceMeta {
        label: label.into(),
        device: "hand-written GPU".into(),
        sm_count: sms,
        stages: stages
            .iter()
            .map(|&(id, name, blocks_per_sm)| StageMeta {
                id,
                name: name.into(),
                grid: Some(Grid::new(2, 3, 1)),
                blocks_per_sm,
            })
            .collect(),
    }
}

/// 4 SMs, one CTA each; 6 producer tiles (stage 0) then 6 consumer tiles (stage 1), in us:
///
/// ```text
/// SM0: p0 [d0 r0 s0 e10]  p4 [d10 r10 s10 e20]  c2 [d20 r22 s22 e30]
/// SM1: p1 [d0 r0 s0 e10]  p5 [d10 r10 s10 e21]  c3 [d21 r21 s21 e29]
/// SM2: p2 [d0 r0 s0 e10]  c0 [d10 r12 s12 e20]  c4 [d20 r22 s22 e31]
/// SM3: p3 [d0 r0 s1 e11]  c1 [d11 r11 s11 e19]  c5 [d19 r21 s22 e30]
/// ```
fn hand_pipelined() -> Trace {
    let rows: [Row; 12] = [
        (0, 0, 0, 0, [0, 0, 0, 10]),
        (0, 1, 1, 1, [0, 0, 0, 10]),
        (0, 2, 2, 2, [0, 0, 0, 10]),
        (0, 3, 3, 3, [0, 0, 1, 11]),
        (0, 4, 0, 4, [10, 10, 10, 20]),
        (0, 5, 1, 5, [10, 10, 10, 21]),
        (1, 0, 2, 0, [10, 12, 12, 20]),
        (1, 1, 3, 1, [11, 11, 11, 19]),
        (1, 2, 0, 2, [20, 22, 22, 30]),
        (1, 3, 1, 3, [21, 21, 21, 29]),
        (1, 4, 2, 4, [20, 22, 22, 31]),
        (1, 5, 3, 5, [19, 21, 22, 30]),
    ];
    Trace::new(
        meta(
            "hand pipelined",
            Some(4),
            &[(0, "producer", Some(1)), (1, "consumer", Some(1))],
        ),
        events(&rows),
    )
    .expect("valid")
}
