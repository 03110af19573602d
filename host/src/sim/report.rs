//! Plain-text rendering of wave tables: what `cusync` prints when no GPU is present.

use std::fmt::Write as _;

use super::presets::{h200_mlp, paper_v100_conv128, paper_v100_mlp};
use super::stacks::render_stacks;
use super::tables::{
    conv_table, mlp_table, ConvRow, MlpRow, PairPrediction, SimOptions, TileTimes, H200_WAIT_COST, V100_WAIT_COST,
};
use super::waves::KernelWaves;
use super::workload::{Gpu, Tiling, GPT3_HIDDEN, H200, V100};
use crate::shared::Grid;

/// A policy is recommended over StreamSync when the schedule predicts at least this gain.
pub const RECOMMEND_MARGIN: f64 = 0.01;

/// The default report: the paper's GPT-3 MLP and Conv2D wave tables reproduced for the V100,
/// the GPT-3 MLP predicted for the H200 with 128x128 and 128x256 tiles, the dynamic K-chunks
/// model, and issue 5's GeMM stacks in the persistent model.
pub fn default_report() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cusync wave model (no GPU needed): waves = thread blocks / (blocks per SM * SMs).\n\
         GPT-3 MLP, H = {GPT3_HIDDEN}, 8-way tensor parallel: X[B,{GPT3_HIDDEN}] x W1[{GPT3_HIDDEN},{w}] \
         -> GeLU -> x W2[{w},{GPT3_HIDDEN}].\n\
         StreamSync = sum of each GeMM's whole waves; CuSync = both GeMMs' blocks sharing waves \
         (fractional, and whole in brackets).\n\
         Best policy and speedup come from an event-driven schedule of both kernels \
         (block time proportional to its work, a wait costing {V100_WAIT_COST} (V100) / \
         {H200_WAIT_COST} (H200) of a producer block); \"StreamSync\" where no policy gains \
         {margin}% in that model (it ignores effects such as overlapping the consumer's \
         independent loads, which the paper measured at 1.04-1.07x for small batches).",
        margin = RECOMMEND_MARGIN * 100.0,
        w = GPT3_HIDDEN / 2
    );
    let v100 = SimOptions {
        tile_times: TileTimes::ByWork,
        wait_cost: V100_WAIT_COST,
    };
    let h200 = SimOptions {
        tile_times: TileTimes::ByWork,
        wait_cost: H200_WAIT_COST,
    };
    let sections: [(String, Gpu, Vec<_>, SimOptions); 3] = [
        (
            "Paper reproduction, Tesla V100 (80 SMs): Table waves:mlp (rows 256-1024 are Table 1)".into(),
            V100,
            paper_v100_mlp(),
            v100,
        ),
        (
            "PREDICTION, H200 (132 SMs): 128x128 tiles, 1 block per SM, no split-K".into(),
            H200,
            h200_mlp(128, 128),
            h200,
        ),
        (
            "PREDICTION, H200 (132 SMs): 128x256 tiles, 1 block per SM, no split-K".into(),
            H200,
            h200_mlp(128, 256),
            h200,
        ),
    ];
    for (title, gpu, cases, options) in sections {
        let _ = writeln!(out);
        match mlp_table(gpu, &cases, GPT3_HIDDEN, options) {
            Ok(rows) => out.push_str(&render_mlp_table(&title, &rows)),
            Err(e) => {
                let _ = writeln!(out, "{title}: simulation failed: {e}");
            }
        }
    }
    let _ = writeln!(out);
    out.push_str(&render_dynamic_k());
    let _ = writeln!(out);
    match conv_table(V100, &paper_v100_conv128(), 28, 128, v100) {
        Ok(rows) => out.push_str(&render_conv_table(
            "Paper reproduction, Tesla V100: Table waves:conv-128 (two 28x28x128 3x3 Conv2Ds, 64x64 tiles, 4 blocks per SM)",
            &rows,
        )),
        Err(e) => {
            let _ = writeln!(out, "conv table: simulation failed: {e}");
        }
    }
    let _ = writeln!(out);
    out.push_str(&render_stacks());
    out
}

/// The dynamic K-chunks model ([`super::dynamic_k`]) on the B = 64 GeMM2 as session 27 traced
/// it: the static launch, 8 to 48 chunks per tile with the claim ahead at each chunk's start
/// (the branch's kernels) and two K-steps before its end, and perfect balance.
pub fn render_dynamic_k() -> String {
    let mut out = String::from(
        "MODEL, H200: dynamic K-chunks on the GPT-3 MLP's B = 64 GeMM2 (96 tiles, one block each; 12 blocks \
         on SMs at 0.83x speed, as traced in session 27; assumed 2 us first fill, 0.5 us per steal, \
         1 us per partial, 0.5 us per slot read; no aggregate bandwidth cap)\n",
    );
    let _ = writeln!(
        out,
        "{:>8} {:>15} {:>12} {:>10} {:>11} {:>11}",
        "chunks", "claim ahead", "tiles end", "vs static", "split runs", "split tiles"
    );
    let static_case = super::dynamic_k::b64_gemm2_case(0, 0.83);
    let fixed = super::dynamic_k::simulate_dynamic_k(&static_case);
    // (chunks, claim lead): each chunk count with the claim at the chunk's start, then the
    // split counts with it two K-steps before the chunk's end.
    let rows = [0, 8, 16, 32, 48]
        .map(|c| (c, u32::MAX))
        .into_iter()
        .chain([16, 32, 48].map(|c| (c, 2)));
    for (chunks, lead) in rows {
        let mut case = super::dynamic_k::b64_gemm2_case(chunks, 0.83);
        case.claim_lead_steps = lead;
        let Some(o) = super::dynamic_k::simulate_dynamic_k(&case) else {
            continue;
        };
        let (label, when) = match (chunks, lead) {
            (0, _) => ("static".to_string(), "-".to_string()),
            (c, u32::MAX) => (c.to_string(), "at chunk start".to_string()),
            (c, l) => (c.to_string(), format!("{l} steps to end")),
        };
        let ratio = fixed.map_or(f64::NAN, |f| f.makespan_us / o.makespan_us);
        let _ = writeln!(
            out,
            "{label:>8} {when:>15} {:>9.1} us {ratio:>9.3}x {:>11} {:>11}",
            o.makespan_us, o.split_runs, o.split_tiles
        );
    }
    // Perfect balance: every SM busy to the end, no run costs beyond the first fill.
    let c = &static_case;
    let ideal = c.fill_us + c.tiles as f64 * c.tile_us / c.speeds.iter().sum::<f64>();
    let ratio = fixed.map_or(f64::NAN, |f| f.makespan_us / ideal);
    let _ = writeln!(out, "{:>8} {:>15} {ideal:>9.1} us {ratio:>9.3}x", "balanced", "-");
    out
}

/// Renders an MLP table with a title line.
pub fn render_mlp_table(title: &str, rows: &[MlpRow]) -> String {
    let header = [
        "Batch",
        "GeMM1 grid",
        "tile/split",
        "waves",
        "util",
        "GeMM2 grid",
        "tile/split",
        "waves",
        "util",
        "TB/SM",
        "StreamSync",
        "CuSync",
        "best",
        "speedup",
    ];
    let body = rows
        .iter()
        .map(|r| {
            let mut cells = vec![r.case.label()];
            cells.extend(kernel_cells(&r.waves.producer, r.case.gemm1));
            cells.extend(kernel_cells(&r.waves.consumer, r.case.gemm2));
            cells.push(r.case.occupancy.to_string());
            cells.extend(pair_cells(r.waves.stream_sync_waves(), &r.waves, &r.prediction));
            cells
        })
        .collect::<Vec<_>>();
    render(title, &header, &body)
}

/// Renders a Conv2D-pair table with a title line.
pub fn render_conv_table(title: &str, rows: &[ConvRow]) -> String {
    let header = [
        "Batch",
        "grid",
        "split",
        "Conv waves",
        "StreamSync",
        "CuSync",
        "best",
        "speedup",
    ];
    let body = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.case.batch.to_string(),
                grid(r.waves.producer.grid),
                r.case.tiling.split_k.to_string(),
                format!("{:.3}", r.waves.producer.waves()),
            ];
            cells.extend(pair_cells(r.waves.stream_sync_waves(), &r.waves, &r.prediction));
            cells
        })
        .collect::<Vec<_>>();
    render(title, &header, &body)
}

fn kernel_cells(w: &KernelWaves, tiling: Tiling) -> [String; 4] {
    [
        grid(w.grid),
        format!("{}x{}/{}", tiling.tile_m, tiling.tile_n, tiling.split_k),
        format!("{:.2}", w.waves()),
        format!("{:.0}%", 100.0 * w.utilization()),
    ]
}

fn pair_cells(stream_sync: u32, waves: &super::waves::PairWaves, p: &PairPrediction) -> [String; 4] {
    let (best, speedup) = match p.recommended(RECOMMEND_MARGIN) {
        Some(b) => (b.policy.name().to_string(), format!("{:.2}x", p.speedup())),
        None => ("StreamSync".into(), "1.00x".into()),
    };
    [
        stream_sync.to_string(),
        format!(
            "{:.2} ({})",
            waves.fine_grained_waves(),
            waves.fine_grained_whole_waves()
        ),
        best,
        speedup,
    ]
}

fn grid(g: Grid) -> String {
    format!("{}x{}x{}", g.x, g.y, g.z)
}

/// Lays out `header` and `rows` in right-aligned columns separated by two spaces.
fn render(title: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells.zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = format!("{title}\n");
    let head = line(&mut header.iter().copied());
    out.push_str(&head);
    out.push('\n');
    out.push_str(&"-".repeat(head.len()));
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
        out.push('\n');
    }
    out
}
