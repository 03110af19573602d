//! The TMA streaming probe (`cusync run tma-probe`) on the GPU: every cut of the weight the
//! probe offers loads exactly its bytes (each block's checksum against the CPU's over fresh
//! random bits, every block overwriting a poisoned result, the planned number of stages, no
//! wait timing out). Nothing here asserts a speed.

use cusync::ops::gemm_sm90::L2Promotion;
use cusync::ops::tma_probe::{run_tma_probe, ProbeDivision, ProbeOperands, TmaProbeConfig};
use cusync::Context;
use cusync_tests::{ensure, fail, GpuTest};

pub const TESTS: &[GpuTest] = &[
    GpuTest {
        name: "probe::tma_stream_loads_exactly_every_cut",
        run: every_cut,
    },
    GpuTest {
        name: "probe::tma_stream_refuses_operands_of_another_shape",
        run: refuses_other_shape,
    },
];

/// Strip widths and box splits (2 x 64, 3 x 32, 64 + 32, 32 + 16, 16), batch boxes of 64 and
/// 128 rows over batches that fill them or not, every L2 promotion, 2 to 11 stages, and every
/// division (whole strips, strips dealt round-robin over fewer blocks, split, stream-K ranges
/// that cross strip edges), on a K that leaves the last stage's rows out of bounds.
fn every_cut(cx: &Context) -> Result<(), String> {
    if !crate::gemm::path2_here(cx) {
        return Err(cusync_tests::skip("no TMA on this device or build"));
    }
    let sms = cx.info().sm_count;
    let k = 1000; // 16 K-steps, the last one 40 rows past K
                  // The B = 64 GeMM2 cut (128-column strips, a 64-row batch box, 9 stages) on a small weight.
    let base = TmaProbeConfig {
        k,
        n: 3072,
        ..TmaProbeConfig::gemm2_b64()
    };
    let mut cases = vec![
        base,
        TmaProbeConfig {
            strip_cols: 96,
            box_cols: 32,
            batch_box_rows: 128,
            stages: 8,
            promotion: L2Promotion::None,
            ..base
        },
        TmaProbeConfig {
            strip_cols: 96,
            box_cols: 64,
            stages: 11,
            promotion: L2Promotion::B128,
            ..base
        },
        TmaProbeConfig {
            strip_cols: 48,
            box_cols: 32,
            batch_box_rows: 0,
            stages: 2,
            promotion: L2Promotion::B64,
            ..base
        },
        TmaProbeConfig {
            strip_cols: 16,
            box_cols: 16,
            stages: 4,
            ..base
        },
        TmaProbeConfig {
            division: ProbeDivision::Split(3),
            ..base
        },
        TmaProbeConfig {
            division: ProbeDivision::Ranges(sms.min(40)),
            ..base
        },
        TmaProbeConfig {
            division: ProbeDivision::Ranges(sms),
            strip_cols: 96,
            box_cols: 32,
            ..base
        },
    ];
    // A batch of 50 rows: the 64- and 128-row boxes both read zeros past it.
    let short: Vec<TmaProbeConfig> = cases
        .iter()
        .filter(|c| c.batch_box_rows != 0)
        .take(2)
        .map(|c| TmaProbeConfig { batch: 50, ..*c })
        .collect();
    cases.extend(short);
    let mut shapes: Vec<(usize, usize, usize)> = cases.iter().map(|c| (c.k, c.n, c.batch)).collect();
    shapes.dedup();
    for (k, n, batch) in shapes {
        let ops = ProbeOperands::new(cx, k, n, batch).map_err(fail)?;
        for cfg in cases.iter().filter(|c| (c.k, c.n, c.batch) == (k, n, batch)) {
            let r = run_tma_probe(cx, &ops, cfg, 1, 3).map_err(|e| format!("{}: {e}", cfg.label()))?;
            ensure(r.ms > 0.0 && r.span_us > 0.0 && r.block_median_us > 0.0, || {
                format!("{}: times not positive: {r:?}", cfg.label())
            })?;
            let plan = cfg.plan(sms).map_err(fail)?;
            ensure(r.blocks == plan.blocks, || {
                format!("{}: {} blocks, planned {}", cfg.label(), r.blocks, plan.blocks)
            })?;
            println!("    {}", r.row());
        }
    }
    Ok(())
}

/// Operands of one shape with a configuration of another: refused before any launch.
fn refuses_other_shape(cx: &Context) -> Result<(), String> {
    if !crate::gemm::path2_here(cx) {
        return Err(cusync_tests::skip("no TMA on this device or build"));
    }
    let ops = ProbeOperands::new(cx, 512, 1024, 64).map_err(fail)?;
    let cfg = TmaProbeConfig {
        k: 1024,
        n: 1024,
        ..TmaProbeConfig::gemm2_b64()
    };
    match run_tma_probe(cx, &ops, &cfg, 1, 1) {
        Ok(_) => Err("operands of [512, 1024] ran a [1024, 1024] configuration".into()),
        Err(e) => ensure(e.to_string().contains("operands of [512, 1024]"), || {
            format!("unexpected error: {e}")
        }),
    }
}
