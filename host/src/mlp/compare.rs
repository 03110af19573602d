//! The paper's MLP table (Table "waves:mlp") measured on this GPU: per batch size, the grids
//! and waves of both GeMMs, StreamSync's and fine-grained total waves, the device time of
//! StreamSync, of each policy and of cuBLAS back to back (launched plainly, and captured once
//! as a CUDA graph and replayed, as PyTorch's baselines do), the best policy and the speedups.
//! cuBLAS runs the plain products (no GeLU: cuBLAS has no GeLU epilogue without cuBLASLt),
//! which favours it, as in `baselines/torch_baselines.py`.
//! Every row's times are medians of samples taken side by side in one run; every policy's
//! output is checked bitwise against StreamSync's (same kernels), and StreamSync's against an
//! f64 reference on sample rows.

use super::MlpKernel;
use super::{first_difference, Mlp, MlpOrder, MlpShape};
use crate::baselines::cublas::Cublas;
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::runtime::Context;
use crate::stream::WaitKernelPolicy;
use cusync_shared::policy::PolicyKind;
use std::fmt::Write;

/// One batch size's measurements.
#[derive(Clone, Debug)]
pub struct MlpRow {
    /// The MLP's sizes.
    pub shape: MlpShape,
    /// Tile configuration of both GeMMs.
    pub tile: MlpKernel,
    /// Grids `[x, y, z]` of the two GeMMs as launched (`z`: the stage's split-K factor).
    pub grids: [[u32; 3]; 2],
    /// Blocks per SM (occupancy API).
    pub blocks_per_sm: u32,
    /// Fractional waves of each GeMM.
    pub waves: [f64; 2],
    /// StreamSync's whole waves (sum of each GeMM's).
    pub stream_sync_waves: u32,
    /// Fine-grained whole waves (both grids sharing waves).
    pub fine_waves: u32,
    /// StreamSync median, µs.
    pub stream_sync_us: Stats,
    /// Every policy variant timed (policy, order and launch).
    pub policies: Vec<VariantTiming>,
    /// cuBLAS back to back, µs (None when cuBLAS is unavailable).
    pub cublas_us: Option<Stats>,
    /// cuBLAS back to back captured as one CUDA graph, per graph launch, µs (None when cuBLAS
    /// is unavailable).
    pub cublas_graph_us: Option<Stats>,
    /// Worst relative error of sampled rows against the f64 reference.
    pub reference_error: f64,
}

/// One policy variant a row timed: a policy, the tile order both stages walk, and how the
/// consumer was launched.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantTiming {
    /// The policy between the GeMMs.
    pub policy: PolicyKind,
    /// The tile order of both stages.
    pub order: MlpOrder,
    /// The launch asked for.
    pub launch: WaitKernelPolicy,
    /// [`variant_name`] of the three, set by [`VariantTiming::new`] (private, so it cannot
    /// disagree with them).
    name: String,
    /// Median, smallest and largest device time, µs.
    pub stats: Stats,
    /// Whether the launch put a wait kernel in front of the consumer.
    pub wait_kernel: bool,
}

impl VariantTiming {
    /// Its name, [`variant_name`] of its policy, order and launch.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variant `policy`/`order`/`launch` with its timings.
    pub fn new(policy: PolicyKind, order: MlpOrder, launch: WaitKernelPolicy, stats: Stats, wait_kernel: bool) -> Self {
        Self {
            policy,
            order,
            launch,
            name: variant_name(policy, order, launch),
            stats,
            wait_kernel,
        }
    }
}

/// The fastest of `variants` by median (the first listed on a tie).
fn fastest<'a>(variants: impl Iterator<Item = &'a VariantTiming>) -> Option<&'a VariantTiming> {
    variants.min_by(|a, b| a.stats.median.total_cmp(&b.stats.median))
}

impl MlpRow {
    /// The fastest policy variant by median.
    pub fn best(&self) -> Option<&VariantTiming> {
        fastest(self.policies.iter())
    }

    /// The fastest policy variant's name and median (µs), or StreamSync's where no policy was
    /// timed (`run mlp` under Policy::Auto's StreamSync plan).
    pub fn best_or_stream_sync(&self) -> (&str, f64) {
        self.best().map_or(("StreamSync", self.stream_sync_us.median), |b| {
            (b.name(), b.stats.median)
        })
    }

    /// The faster cuBLAS median (plain or graphed), µs; NaN without cuBLAS.
    pub fn cublas_best_us(&self) -> f64 {
        [self.cublas_us, self.cublas_graph_us]
            .iter()
            .flatten()
            .map(|s| s.median)
            .fold(f64::NAN, f64::min)
    }
}

/// The tile orders the sweep ([`CompareOptions`]'s default) and Policy::Auto's trial try with
/// each policy: row-major (rows complete first), column-major (the plain kernels' walk, weight
/// columns reused across rows), and bands of 2 and 4 row tiles (between the two).
pub const SEARCH_ORDERS: [MlpOrder; 4] = [
    MlpOrder::RowMajor,
    MlpOrder::ColumnMajor,
    MlpOrder::Banded(2),
    MlpOrder::Banded(4),
];

/// Options of [`measure`].
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Timed samples per variant (after one warm-up).
    pub samples: usize,
    /// Policies to try.
    pub policies: Vec<PolicyKind>,
    /// Tile orders to try with each policy (both stages use the same order).
    pub orders: Vec<MlpOrder>,
    /// Force a tile configuration (None: the heuristic's choice).
    pub tile: Option<MlpKernel>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Stages of the path-2 stages' ring in use (None: the whole ring, but the device's
    /// measured depth on the 128 x 16 tile; [`Mlp::with_pipeline_depth`]).
    pub pipeline_depth: Option<u32>,
    /// How each policy's consumer is launched, each a variant of its own: the wait kernel
    /// where optimization W asks for one ([`WaitKernelPolicy::Auto`], named
    /// `policy/order`), or programmatic dependent launch on one stream
    /// ([`WaitKernelPolicy::Programmatic`], named `policy/order/pdl`), and so on. Empty (the
    /// default): the device's [`WaitKernelPolicy::preferred`] launch alone.
    pub launches: Vec<WaitKernelPolicy>,
}

/// A policy variant's name: `policy/order`, and `/launch` for any launch but the default.
pub fn variant_name(policy: PolicyKind, order: MlpOrder, launch: WaitKernelPolicy) -> String {
    match launch {
        WaitKernelPolicy::Auto => format!("{}/{}", policy.name(), order_name(order)),
        other => format!("{}/{}/{}", policy.name(), order_name(order), other.name()),
    }
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            samples: 20,
            policies: vec![PolicyKind::TileSync, PolicyKind::RowSync],
            orders: SEARCH_ORDERS.to_vec(),
            tile: None,
            seed: 2026,
            pipeline_depth: None,
            launches: Vec::new(),
        }
    }
}

fn stats_us(ms: &mut [f64]) -> Stats {
    for v in ms.iter_mut() {
        *v *= 1e3;
    }
    Stats::of(ms)
}

/// Short name of an order for tables.
pub fn order_name(order: MlpOrder) -> String {
    match order {
        MlpOrder::RowMajor => "row".into(),
        MlpOrder::ColumnMajor => "col".into(),
        MlpOrder::Banded(r) => format!("band{r}"),
    }
}

/// The order [`order_name`] names: `row`, `col`, or `band<N>` (bands of N row tiles, column
/// by column).
pub fn parse_order(name: &str) -> Result<MlpOrder> {
    let n = name.trim().to_ascii_lowercase();
    match n.as_str() {
        "row" => Ok(MlpOrder::RowMajor),
        "col" => Ok(MlpOrder::ColumnMajor),
        _ => n
            .strip_prefix("band")
            .and_then(|r| r.parse::<u32>().ok())
            .filter(|&r| r > 0)
            .map(MlpOrder::Banded)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown tile order `{name}`: row, col, or band<N> with N >= 1 row tiles"
                ))
            }),
    }
}

/// The orders of `orders` that walk the tiles differently on a producer grid of `row_tiles`
/// row tiles, in their order: a band as tall as the grid (or of one row) is column-major and
/// is left out; over one row of tiles, or on skinny stages (whose blocks take ranges of the
/// weight, not tiles), every order is the one walk, kept once (row-major where listed).
pub fn distinct_orders(orders: &[MlpOrder], row_tiles: u32, skinny: bool) -> Vec<MlpOrder> {
    let one_walk = row_tiles == 1 || skinny;
    let mut out = Vec::new();
    for &order in orders {
        if let MlpOrder::Banded(rows) = order {
            if rows >= row_tiles || rows <= 1 {
                continue;
            }
        }
        if one_walk && order != MlpOrder::RowMajor && orders.contains(&MlpOrder::RowMajor) {
            continue;
        }
        if !out.contains(&order) {
            out.push(order);
        }
    }
    out
}

/// The fastest variant of `policy` (any order and launch).
fn best_of(row: &MlpRow, policy: PolicyKind) -> Option<&VariantTiming> {
    fastest(row.policies.iter().filter(|v| v.policy == policy))
}

/// Measures one batch size.
pub fn measure(cx: &Context, shape: MlpShape, opts: &CompareOptions) -> Result<MlpRow> {
    let mut mlp = Mlp::with_pipeline_depth(cx, shape, opts.tile, opts.seed, opts.pipeline_depth)?;
    let (g1, g2) = mlp.grids();
    let occ = mlp.blocks_per_sm()?.max(1);
    let per_wave = (occ * cx.info().sm_count) as f64;
    let (b1, b2) = mlp.work_blocks();
    let splits = mlp.split_ks();
    let waves = [b1 as f64 / per_wave, b2 as f64 / per_wave];
    // StreamSync: reference output, then timing.
    mlp.poison()?;
    mlp.run_stream_sync()?;
    let (h_ref, y_ref) = mlp.outputs()?;
    let rows = [0, shape.batch / 2, shape.batch - 1];
    let reference_error = mlp.check_rows(&rows)?;
    if reference_error > 2e-2 {
        return Err(Error::Verification(format!(
            "batch {}: StreamSync output differs from the f64 reference by {reference_error:.3e}",
            shape.batch
        )));
    }
    // Every variant's graph, its output checked bitwise against StreamSync's once.
    let mut graphs = Vec::new();
    let orders = distinct_orders(&opts.orders, g1.x, mlp.tile().is_skinny());
    let launches = WaitKernelPolicy::listed_or_preferred(cx, &opts.launches);
    for &policy in &opts.policies {
        for &order in &orders {
            for &launch in &launches {
                let mut graph = mlp.graph_ordered(policy, launch, order)?;
                mlp.poison()?;
                let run = mlp.run_graph(&mut graph)?;
                let (h, y) = mlp.outputs()?;
                let name = variant_name(policy, order, launch);
                if let Some(i) =
                    first_difference(&h, &h_ref).or_else(|| first_difference(&y, &y_ref).map(|i| i + h.len()))
                {
                    return Err(Error::Verification(format!(
                        "batch {}: {name} output differs from StreamSync at element {i}",
                        shape.batch
                    )));
                }
                let variant = (policy, order, launch, run.wait_kernels[1]);
                graphs.push((variant, graph, Vec::with_capacity(opts.samples)));
            }
        }
    }
    let blas = Cublas::new(mlp.stream()).ok();
    if let Some(blas) = &blas {
        mlp.run_cublas(blas)?;
        mlp.run_cublas_graph(blas)?; // capture and a warm-up launch
    }
    // Side by side: each round times every variant once, so all of them see the same clocks
    // (and a drift between rounds spreads over all of them, not onto one). Each timed run
    // follows an untimed run of the same variant: its kernels' code and its own operands are
    // as warm as in back-to-back use, whichever variant ran before (a plain kernel after a
    // stream-mode one started with cold instruction caches, a bias of several µs).
    let mut ss = Vec::with_capacity(opts.samples);
    let (mut plain, mut graphed) = (Vec::with_capacity(opts.samples), Vec::with_capacity(opts.samples));
    for _ in 0..opts.samples {
        mlp.run_stream_sync()?;
        ss.push(mlp.run_stream_sync()? as f64);
        for (_, graph, t) in graphs.iter_mut() {
            mlp.run_graph(graph)?;
            t.push(mlp.run_graph(graph)?.elapsed_ms as f64);
        }
        if let Some(blas) = &blas {
            mlp.run_cublas(blas)?;
            plain.push(mlp.run_cublas(blas)? as f64);
            mlp.run_cublas_graph(blas)?;
            graphed.push(mlp.run_cublas_graph(blas)? as f64);
        }
    }
    let policies = graphs
        .into_iter()
        .map(|((policy, order, launch, wait), _, mut t)| {
            VariantTiming::new(policy, order, launch, stats_us(&mut t), wait)
        })
        .collect();
    let (cublas_us, cublas_graph_us) = if blas.is_some() {
        (Some(stats_us(&mut plain)), Some(stats_us(&mut graphed)))
    } else {
        (None, None)
    };
    Ok(MlpRow {
        shape,
        tile: mlp.tile(),
        // The grids as launched: a split stage's units along z.
        grids: [[g1.x, g1.y, g1.z * splits[0]], [g2.x, g2.y, g2.z * splits[1]]],
        blocks_per_sm: occ,
        waves,
        stream_sync_waves: (waves[0].ceil() + waves[1].ceil()) as u32,
        fine_waves: (waves[0] + waves[1]).ceil() as u32,
        stream_sync_us: stats_us(&mut ss),
        policies,
        cublas_us,
        cublas_graph_us,
        reference_error,
    })
}

/// Renders rows as the paper's table plus speedups.
pub fn render(rows: &[MlpRow], device: &str) -> String {
    let mut o = String::new();
    let title = rows.first().map_or("MLP".to_string(), |r| r.shape.label());
    let _ = writeln!(o, "{title} on {device}: medians of device time (µs); speedups are StreamSync / best and cuBLAS / best (cuBLAS: the faster of plain launches and one CUDA graph; plain GeMMs, no GeLU)");
    let _ = writeln!(
        o,
        "{:>6} {:>9} {:>11} {:>6} {:>11} {:>6} {:>4} {:>5} {:>4} {:>10} {:>10} {:>10} {:>14} {:>10} {:>10} {:>8} {:>8}",
        "batch",
        "tile",
        "grid1",
        "waves",
        "grid2",
        "waves",
        "occ",
        "SS_w",
        "CS_w",
        "StreamSync",
        "TileSync",
        "RowSync",
        "best",
        "cuBLAS",
        "cuBLAS+grf",
        "vs SS",
        "vs cuBLAS"
    );
    for r in rows {
        let pol = |policy| best_of(r, policy).map_or("-".to_string(), |v| format!("{:.1}", v.stats.median));
        let (best_name, best_us) = r.best_or_stream_sync();
        let cublas = r.cublas_us.map_or(f64::NAN, |s| s.median);
        let graphed = r.cublas_graph_us.map_or(f64::NAN, |s| s.median);
        let _ = writeln!(
            o,
            "{:>6} {:>9} {:>11} {:>6.2} {:>11} {:>6.2} {:>4} {:>5} {:>4} {:>10.1} {:>10} {:>10} {:>14} {:>10.1} {:>10.1} {:>7.3}x {:>7.3}x",
            r.shape.batch,
            r.tile.name(),
            format!("{}x{}x{}", r.grids[0][0], r.grids[0][1], r.grids[0][2]),
            r.waves[0],
            format!("{}x{}x{}", r.grids[1][0], r.grids[1][1], r.grids[1][2]),
            r.waves[1],
            r.blocks_per_sm,
            r.stream_sync_waves,
            r.fine_waves,
            r.stream_sync_us.median,
            pol(PolicyKind::TileSync),
            pol(PolicyKind::RowSync),
            best_name,
            cublas,
            graphed,
            r.stream_sync_us.median / best_us,
            r.cublas_best_us() / best_us
        );
    }
    o.push_str(&render_launch_pairs(rows));
    o
}

/// Where a row timed a policy and order with more than one launch: each pair of the wait-kernel
/// launch ([`WaitKernelPolicy::Auto`], `policy/order`) and another (`policy/order/<launch>`,
/// [`variant_name`]) with their medians and ratio, and the best variant of the wait-kernel
/// launch against the best of all. Empty when no row has a pair.
pub fn render_launch_pairs(rows: &[MlpRow]) -> String {
    let mut o = String::new();
    for r in rows {
        let is_base = |v: &VariantTiming| v.launch == WaitKernelPolicy::Auto;
        let pairs: Vec<(&VariantTiming, &VariantTiming)> = r
            .policies
            .iter()
            .filter(|v| !is_base(v))
            .filter_map(|other| {
                let base = r
                    .policies
                    .iter()
                    .find(|b| is_base(b) && b.policy == other.policy && b.order == other.order)?;
                Some((base, other))
            })
            .collect();
        if pairs.is_empty() {
            continue;
        }
        if o.is_empty() {
            let _ = writeln!(
                o,
                "\nlaunches side by side (medians, µs; `auto`: behind the wait kernel where optimization W asks for one, on the consumer's own stream):"
            );
        }
        for (base, other) in &pairs {
            let (base_us, other_us, launch) = (base.stats.median, other.stats.median, other.launch.name());
            let _ = writeln!(
                o,
                "{:>6} {:<14} auto {:>9.1}  {launch} {:>9.1}  {launch}/auto {:>6.3}",
                r.shape.batch,
                base.name(),
                base_us,
                other_us,
                other_us / base_us
            );
        }
        let default_best = fastest(r.policies.iter().filter(|v| is_base(v)));
        if let (Some(d), (best_name, best_us)) = (default_best, r.best_or_stream_sync()) {
            let _ = writeln!(
                o,
                "{:>6} best of auto {} {:.1}; best of all {best_name} {best_us:.1} ({:.3}x); StreamSync {:.1}",
                r.shape.batch,
                d.name(),
                d.stats.median,
                d.stats.median / best_us,
                r.stream_sync_us.median
            );
        }
    }
    o
}

/// CSV of the rows (one line per batch, every measured median).
pub fn to_csv(rows: &[MlpRow]) -> String {
    let mut o = String::from(
        "model,batch,hidden,ffn,tile,grid1,grid2,blocks_per_sm,waves1,waves2,streamsync_waves,fine_waves,streamsync_us,tilesync_us,rowsync_us,best,best_us,cublas_us,cublas_graph_us,reference_error\n",
    );
    for r in rows {
        let pol = |policy| best_of(r, policy).map_or(String::new(), |v| format!("{:.3}", v.stats.median));
        let best = r.best();
        let _ = writeln!(
            o,
            "{},{},{},{},{},{}x{}x{},{}x{}x{},{},{:.4},{:.4},{},{},{:.3},{},{},{},{},{},{},{:.3e}",
            super::MlpModel::of_shape(r.shape).map_or("custom", |m| m.name()),
            r.shape.batch,
            r.shape.hidden,
            r.shape.ffn,
            r.tile.name(),
            r.grids[0][0],
            r.grids[0][1],
            r.grids[0][2],
            r.grids[1][0],
            r.grids[1][1],
            r.grids[1][2],
            r.blocks_per_sm,
            r.waves[0],
            r.waves[1],
            r.stream_sync_waves,
            r.fine_waves,
            r.stream_sync_us.median,
            pol(PolicyKind::TileSync),
            pol(PolicyKind::RowSync),
            best.map_or("", |b| b.name()),
            best.map_or(String::new(), |b| format!("{:.3}", b.stats.median)),
            r.cublas_us.map_or(String::new(), |s| format!("{:.3}", s.median)),
            r.cublas_graph_us.map_or(String::new(), |s| format!("{:.3}", s.median)),
            r.reference_error
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample's statistics: every figure `v`.
    fn stats(v: f64) -> Stats {
        Stats {
            median: v,
            min: v,
            max: v,
            samples: 1,
        }
    }

    #[test]
    fn a_row_without_policies_names_stream_sync_its_best() {
        let mut row = MlpRow {
            shape: MlpShape::gpt3(256),
            tile: crate::ops::gemm::TileConfig::T128x128.into(),
            grids: [[2, 48, 1], [2, 96, 1]],
            blocks_per_sm: 1,
            waves: [0.73, 1.45],
            stream_sync_waves: 3,
            fine_waves: 3,
            stream_sync_us: stats(140.0),
            policies: Vec::new(),
            cublas_us: Some(stats(126.0)),
            cublas_graph_us: Some(stats(130.0)),
            reference_error: 1e-3,
        };
        assert_eq!(row.best_or_stream_sync(), ("StreamSync", 140.0));
        let table = render(std::slice::from_ref(&row), "test GPU");
        let line = table.lines().last().unwrap();
        assert!(
            line.contains("StreamSync") && line.contains("1.000x") && line.contains("0.900x"),
            "{line}"
        );
        let row_col =
            |launch, us| VariantTiming::new(PolicyKind::RowSync, MlpOrder::ColumnMajor, launch, stats(us), true);
        row.policies.push(row_col(WaitKernelPolicy::Auto, 150.0));
        assert_eq!(row.best_or_stream_sync(), ("RowSync/col", 150.0));
    }

    #[test]
    fn launch_pairs_are_rendered_side_by_side_with_the_best_of_each() {
        let (row_col, pdl) = (MlpOrder::ColumnMajor, WaitKernelPolicy::Programmatic);
        assert_eq!(
            variant_name(PolicyKind::RowSync, row_col, WaitKernelPolicy::Auto),
            "RowSync/col"
        );
        assert_eq!(variant_name(PolicyKind::RowSync, row_col, pdl), "RowSync/col/pdl");
        let mut row = MlpRow {
            shape: MlpShape::gpt3(1024),
            tile: crate::ops::gemm::TileConfig::T128x128.into(),
            grids: [[8, 48, 1], [8, 96, 1]],
            blocks_per_sm: 1,
            waves: [2.9, 5.8],
            stream_sync_waves: 9,
            fine_waves: 9,
            stream_sync_us: stats(400.0),
            policies: vec![
                VariantTiming::new(PolicyKind::RowSync, row_col, WaitKernelPolicy::Auto, stats(390.0), true),
                VariantTiming::new(PolicyKind::RowSync, row_col, pdl, stats(380.0), false),
                VariantTiming::new(
                    PolicyKind::TileSync,
                    row_col,
                    WaitKernelPolicy::Auto,
                    stats(395.0),
                    true,
                ),
                // Another order's programmatic variant: no wait-kernel twin, so no pair.
                VariantTiming::new(PolicyKind::RowSync, MlpOrder::RowMajor, pdl, stats(385.0), false),
            ],
            cublas_us: None,
            cublas_graph_us: None,
            reference_error: 1e-3,
        };
        let text = render_launch_pairs(std::slice::from_ref(&row));
        let pair = text.lines().find(|l| l.contains("RowSync/col ")).expect(&text);
        assert!(
            pair.contains("390.0") && pair.contains("380.0") && pair.contains("0.974"),
            "{pair}"
        );
        assert!(
            !text.contains("TileSync/col "),
            "a variant without a pair is not listed: {text}"
        );
        let best = text.lines().last().unwrap();
        assert!(
            best.contains("best of auto RowSync/col 390.0") && best.contains("RowSync/col/pdl 380.0"),
            "{best}"
        );
        // Columns take the best of a policy over both launches.
        assert!(render(std::slice::from_ref(&row), "test GPU").contains("RowSync/col/pdl"));
        row.policies.retain(|v| v.launch != pdl);
        assert!(render_launch_pairs(std::slice::from_ref(&row)).is_empty());
    }

    #[test]
    fn order_names_parse_back() {
        for o in [
            MlpOrder::RowMajor,
            MlpOrder::ColumnMajor,
            MlpOrder::Banded(2),
            MlpOrder::Banded(8),
        ] {
            assert_eq!(parse_order(&order_name(o)).unwrap(), o);
        }
        assert_eq!(parse_order(" COL ").unwrap(), MlpOrder::ColumnMajor);
        // The sweep's and the trial's orders: bands of one row or of the whole grid walk as
        // another order does, and one row of tiles (or skinny stages) has one walk.
        let all = CompareOptions::default().orders;
        let (row, col, band2, band4) = (
            MlpOrder::RowMajor,
            MlpOrder::ColumnMajor,
            MlpOrder::Banded(2),
            MlpOrder::Banded(4),
        );
        assert_eq!(distinct_orders(&all, 8, false), vec![row, col, band2, band4]);
        assert_eq!(distinct_orders(&all, 4, false), vec![row, col, band2]);
        assert_eq!(distinct_orders(&all, 2, false), vec![row, col]);
        assert_eq!(distinct_orders(&all, 1, false), vec![row]);
        assert_eq!(distinct_orders(&all, 8, true), vec![row]);
        assert_eq!(distinct_orders(&[col, MlpOrder::Banded(1)], 1, false), vec![col]);
        for bad in ["band0", "band", "diagonal", ""] {
            let e = parse_order(bad).unwrap_err().to_string();
            assert!(e.contains("unknown tile order") && e.contains("band<N>"), "{bad}: {e}");
        }
    }
}
