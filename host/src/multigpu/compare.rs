//! The multi-GPU comparison of the CTA-pipelining paper (section IV) on the GPUs present: an
//! N-layer `[M, W] x [W, W] x ...` bf16 chain (2 layers: the MLP-like case), layer `i` on
//! device `i`, run as
//!
//! * **CTA-pipelining, stream mode**: [`GemmChain`] + [`super::MultiStreamGraph`], verified
//!   bitwise against StreamSync (the same kernels without synchronization) and on sampled rows
//!   against an f64 reference; GeMM path 2 where every device runs it, else path 1, or the
//!   kernel [`CompareOptions::kernel`] forces (the report names it);
//! * **micro-batching** with cuBLAS, chunk size swept, best reported ([`Microbatch`]);
//! * **tensor parallelism**, Megatron style, cuBLAS + NCCL, over all the distinct GPUs
//!   ([`TensorParallel`]): layers in pairs (column- then row-parallel), an all-reduce every
//!   two layers (the paper's Table I); an odd layer count is reported as not run.
//!
//! [`sweep`] runs the comparison per M (the paper's Fig. 5 on 2 GPUs) and [`render_sweep`] /
//! [`sweep_csv`] tabulate it beside the paper's numbers ([`paper_numbers`]).
//!
//! With fewer GPUs than layers the devices are virtual (every layer on one GPU): the code paths
//! are the multi-GPU ones (system-scope edges, per-device streams), the numbers are one GPU's,
//! and the report says so. Nothing here invents a multi-GPU number.

use super::chain::GemmChain;
use super::devices::DeviceSet;
use crate::baselines::microbatch::{default_chunks, Microbatch, MicrobatchOptions, MicrobatchResult};
use crate::baselines::nccl::nccl_version;
use crate::baselines::tensor_parallel::{tp_pairs, TensorParallel, TpShape, TpTiming};
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::mlp::MlpKernel;
use crate::stream::WaitKernelPolicy;
use crate::verify::first_difference;
use cusync_shared::policy::PolicyKind;
use std::fmt::Write as _;

/// What [`compare`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareOptions {
    /// Rows of the input.
    pub m: usize,
    /// Width of every weight (`W x W`).
    pub width: usize,
    /// Layers (one per device).
    pub layers: usize,
    /// Timed runs per variant (medians reported).
    pub iters: usize,
    /// Micro-batching chunk sizes (rows); empty: [`default_chunks`].
    pub chunks: Vec<usize>,
    /// Micro-batching streams per GPU.
    pub streams: usize,
    /// The CTA-pipelining policy between layers.
    pub policy: PolicyKind,
    /// Our GeMM kernel for every layer (StreamSync and CTA-pipelining alike); `None`: path 2
    /// where every device runs it, else path 1 ([`super::chain::default_kernel`]).
    pub kernel: Option<MlpKernel>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            m: 16384,
            width: 8192,
            layers: 2,
            iters: 5,
            chunks: Vec::new(),
            streams: 4,
            policy: PolicyKind::RowSync,
            kernel: None,
        }
    }
}

/// Checks the options before any GPU work.
pub fn validate_compare(opts: &CompareOptions) -> Result<()> {
    if opts.layers == 0 || opts.m == 0 || opts.width == 0 || opts.iters == 0 {
        return Err(Error::InvalidArgument(format!(
            "multi-GPU comparison: M = {}, width = {}, layers = {}, iters = {} must all be at least 1",
            opts.m, opts.width, opts.layers, opts.iters
        )));
    }
    if let Some(&c) = opts.chunks.iter().find(|&&c| c == 0 || c > opts.m) {
        return Err(Error::InvalidArgument(format!(
            "chunk size {c} out of range: a chunk has 1..={} rows",
            opts.m
        )));
    }
    if opts.streams == 0 {
        return Err(Error::InvalidArgument(
            "micro-batching needs at least one stream".into(),
        ));
    }
    Ok(())
}

/// The outcome of [`compare`].
#[derive(Clone, Debug)]
pub struct CompareReport {
    /// The options it ran with.
    pub options: CompareOptions,
    /// Logical devices (one per layer), their GPUs and links.
    pub devices: String,
    /// Whether the devices were virtual (fewer GPUs than layers).
    pub virtual_devices: bool,
    /// GPUs used.
    pub gpus: usize,
    /// Kernel family and tile of our GeMM kernels (every layer, both variants).
    pub kernel: MlpKernel,
    /// StreamSync (our kernels, layer after layer), ms.
    pub stream_sync: Stats,
    /// CTA-pipelining in stream mode, ms.
    pub pipelined: Stats,
    /// Whether each edge's posts ran at system scope.
    pub sys_scope_edges: usize,
    /// Worst relative error of the sampled rows against the f64 reference.
    pub reference_error: f64,
    /// Micro-batching sweep, or why it did not run.
    pub microbatch: std::result::Result<MicrobatchResult, String>,
    /// Tensor parallelism, or why it did not run.
    pub tensor_parallel: std::result::Result<TpTiming, String>,
}

/// What the report says about our kernel: "wg128x256 (GeMM path 2: TMA + wgmma, persistent
/// blocks)" or "128x128 (GeMM path 1: cp.async + mma.sync, one block per tile)".
pub fn kernel_description(kernel: MlpKernel) -> String {
    let family = if kernel.is_path2() {
        "GeMM path 2: TMA + wgmma, persistent blocks"
    } else {
        "GeMM path 1: cp.async + mma.sync, one block per tile"
    };
    format!("{} ({family})", kernel.name())
}

/// The paper's numbers for one configuration (8x B200, CUTLASS SM100 kernels, NVLink 5;
/// `W = 8192`): reductions of CTA-pipelining's latency in percent, and Table I's latencies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperRow {
    /// Where the numbers are from ("Fig. 5", "Table I, Fig. 4", ...).
    pub source: &'static str,
    /// Latency reduction against best-chunk micro-batching, percent.
    pub vs_microbatch: Option<f64>,
    /// Latency reduction against tensor parallelism, percent.
    pub vs_tp: Option<f64>,
    /// Table I: tensor parallelism's latency, µs.
    pub tp_us: Option<f64>,
    /// Table I: CTA-pipelining's latency, µs.
    pub cta_us: Option<f64>,
}

/// Fig. 5: 2-layer GeMM on 2 GPUs, `(M, vs micro-batching %, vs TP %)`.
pub const PAPER_FIG5: [(usize, f64, f64); 6] = [
    (1024, 1.3, 1.9),
    (2048, 9.1, 6.3),
    (4096, 18.3, 23.9),
    (8192, 26.3, 25.1),
    (16384, 31.8, 29.0),
    (32768, 22.7, 29.6),
];

/// One row of Table I and Fig. 4 (M = 16384, one layer per GPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Table1Row {
    /// GPUs (= layers).
    pub gpus: usize,
    /// Tensor parallelism, µs.
    pub tp_us: f64,
    /// CTA-pipelining, µs.
    pub cta_us: f64,
    /// Reduction against TP, percent (none on one GPU).
    pub vs_tp: Option<f64>,
    /// Fig. 4: reduction against best-chunk micro-batching, percent (none on one GPU).
    pub vs_microbatch: Option<f64>,
}

const fn t1(gpus: usize, tp_us: f64, cta_us: f64, vs_tp: Option<f64>, vs_microbatch: Option<f64>) -> Table1Row {
    Table1Row {
        gpus,
        tp_us,
        cta_us,
        vs_tp,
        vs_microbatch,
    }
}

/// Table I and Fig. 4.
pub const PAPER_TABLE1: [Table1Row; 4] = [
    t1(1, 1080.0, 1080.0, None, None),
    t1(2, 1640.0, 1165.0, Some(29.0), Some(31.8)),
    t1(4, 2636.0, 1418.0, Some(46.2), Some(30.0)),
    t1(8, 4493.0, 1844.0, Some(59.0), Some(23.4)),
];

/// The paper's numbers for `layers` layers of width `width` (one per GPU) on `m` rows, where
/// it has them: Fig. 5 for 2 layers at its six M; Table I and Fig. 4 for 1, 2, 4, 8 layers at
/// M = 16384. `None` elsewhere (including any width other than 8192).
pub fn paper_numbers(layers: usize, m: usize, width: usize) -> Option<PaperRow> {
    if width != 8192 {
        return None;
    }
    let table1 = PAPER_TABLE1.iter().find(|r| r.gpus == layers && m == 16384);
    let fig5 = PAPER_FIG5.iter().find(|r| r.0 == m && layers == 2);
    match (fig5, table1) {
        (None, None) => None,
        (fig5, table1) => Some(PaperRow {
            source: match (fig5.is_some(), table1.is_some()) {
                (true, true) => "Fig. 5, Table I",
                (true, false) => "Fig. 5",
                _ => "Table I, Fig. 4",
            },
            vs_microbatch: fig5.map(|r| r.1).or(table1.and_then(|r| r.vs_microbatch)),
            vs_tp: fig5.map(|r| r.2).or(table1.and_then(|r| r.vs_tp)),
            tp_us: table1.map(|r| r.tp_us),
            cta_us: table1.map(|r| r.cta_us),
        }),
    }
}

/// The closing line comparing with the paper's numbers for this configuration (or saying that
/// the paper has none for it); a virtual-device run is also told that it is not comparable.
pub fn paper_line(layers: usize, m: usize, width: usize, virtual_devices: bool) -> String {
    let mut s = match paper_numbers(layers, m, width) {
        Some(p) => {
            let mut s = format!(
                "paper ({}; 8x B200, CUTLASS, {layers} GPU(s), {layers} layer(s), M = {m}):",
                p.source
            );
            if let (Some(tp), Some(cta)) = (p.tp_us, p.cta_us) {
                s.push_str(&format!(" TP {tp:.0} us, CTA-pipelining {cta:.0} us;"));
            }
            match (p.vs_microbatch, p.vs_tp) {
                (Some(mb), Some(tp)) => s.push_str(&format!(
                    " CTA-pipelining {mb:.1}% below best micro-batching, {tp:.1}% below TP"
                )),
                _ => s.push_str(" one GPU: no pipelining, no reduction"),
            }
            s
        }
        None => format!(
            "paper: no number for {layers} layer(s) of width {width} at M = {m} (Fig. 5: 2 layers, M = 1024..32768; \
             Table I / Fig. 4: 1, 2, 4, 8 layers at M = 16384; W = 8192)"
        ),
    };
    if virtual_devices {
        s.push_str("; not comparable to a virtual-device run");
    }
    s
}

/// A reduction ([`reduction`]) in words: "25.0% faster" or "20.0% slower".
pub fn faster_or_slower(reduction: f64) -> String {
    if reduction >= 0.0 {
        format!("{reduction:.1}% faster")
    } else {
        format!("{:.1}% slower", -reduction)
    }
}

/// `(1 - ours / theirs)` in percent.
pub fn reduction(ours: f64, theirs: f64) -> f64 {
    (1.0 - ours / theirs) * 100.0
}

/// Runs the comparison on `devices` (see the module docs).
pub fn compare(devices: &DeviceSet, opts: &CompareOptions) -> Result<CompareReport> {
    validate_compare(opts)?;
    let layer_devices: Vec<usize> = (0..opts.layers).map(|i| i % devices.len()).collect();
    let dims = vec![opts.width; opts.layers + 1];
    let gpus = devices.topology().physical().len();
    let virtual_devices = devices.is_virtual();

    let mut chain = GemmChain::new(devices, opts.m, &dims, &layer_devices, opts.kernel, 17)?;
    chain.poison()?;
    chain.run_stream_sync()?;
    let reference = chain.outputs()?;
    let mut samples = Vec::new();
    for _ in 0..opts.iters {
        samples.push(chain.run_stream_sync()? as f64);
    }
    let stream_sync = Stats::of(&mut samples);
    let rows = [0, opts.m / 2, opts.m - 1];
    let reference_error = chain.check_rows(&rows)?;
    if reference_error > 1e-2 {
        return Err(Error::Verification(format!(
            "StreamSync vs the f64 reference: relative error {reference_error:.3e} on rows {rows:?}"
        )));
    }
    let mut graph = chain.graph(opts.policy, WaitKernelPolicy::Auto)?;
    chain.poison()?;
    let run = chain.run_graph(&mut graph)?;
    for (layer, (got, want)) in chain.outputs()?.iter().zip(&reference).enumerate() {
        if let Some(i) = first_difference(got, want) {
            return Err(Error::Verification(format!(
                "CTA-pipelining layer {layer}: element {i} differs from StreamSync ({} vs {})",
                got.get(i).map_or(f32::NAN, |v| v.to_f32()),
                want.get(i).map_or(f32::NAN, |v| v.to_f32())
            )));
        }
    }
    let sys_scope_edges = run.scopes.iter().filter(|s| s.is_sys()).count();
    let mut samples = Vec::new();
    for _ in 0..opts.iters {
        samples.push(chain.run_graph(&mut graph)?.elapsed_ms as f64);
    }
    let pipelined = Stats::of(&mut samples);
    let kernel = chain.kernel();
    drop(graph);
    drop(chain);

    let chunks = if opts.chunks.is_empty() {
        default_chunks(opts.m)
    } else {
        opts.chunks.clone()
    };
    let mb_opts = MicrobatchOptions {
        streams: opts.streams,
        iters: opts.iters,
        ..Default::default()
    };
    let microbatch = if virtual_devices {
        Microbatch::new(devices.context(0)?, opts.m, &dims, opts.streams, 5)
    } else {
        Microbatch::on_devices(devices, &layer_devices, opts.m, &dims, opts.streams, 5)
    }
    .and_then(|mut mb| mb.sweep(&chunks, &mb_opts))
    .map_err(|e| e.to_string());

    let tensor_parallel = tp_pairs(opts.layers).map_err(|e| e.to_string()).and_then(|pairs| {
        let contexts: Vec<&crate::Context> = devices.physical_contexts().iter().map(|c| c.as_ref()).collect();
        let shape = TpShape {
            m: opts.m,
            k: opts.width,
            f: opts.width,
            n: opts.width,
        };
        TensorParallel::stack(&contexts, shape, pairs, 9)
            .and_then(|mut tp| {
                let t = tp.time(2, opts.iters)?;
                let err = tp.check_rows(&rows)?;
                if err > 2e-2 {
                    return Err(Error::Verification(format!(
                        "tensor parallelism vs the f64 reference: relative error {err:.3e}"
                    )));
                }
                Ok(t)
            })
            .map_err(|e| e.to_string())
    });

    Ok(CompareReport {
        options: opts.clone(),
        devices: devices.describe(),
        virtual_devices,
        gpus,
        kernel,
        stream_sync,
        pipelined,
        sys_scope_edges,
        reference_error,
        microbatch,
        tensor_parallel,
    })
}

/// Opens the logical devices of `cusync run multigpu` (one per layer): `ordinals` when given
/// (one per layer), else GPUs `0..layers` when that many are present, else virtual devices on
/// GPU `fallback`. Returns them with a heading that says what runs where.
pub fn open_devices(fallback: usize, ordinals: &[usize], layers: usize) -> Result<(DeviceSet, String)> {
    if layers == 0 {
        return Err(Error::InvalidArgument(
            "the multi-GPU comparison needs at least one layer".into(),
        ));
    }
    if !ordinals.is_empty() && ordinals.len() != layers {
        return Err(Error::InvalidArgument(format!(
            "--devices names {} GPU(s) for {} layer(s); give one per layer",
            ordinals.len(),
            layers
        )));
    }
    let present = crate::Context::device_count()?;
    let devices = if ordinals.is_empty() {
        DeviceSet::present_or_virtual(layers, fallback)?.0
    } else {
        DeviceSet::open(ordinals)?
    };
    let mut out = format!("{present} GPU(s) present.\n");
    if devices.is_virtual() {
        let _ = writeln!(
            out,
            "Multi-GPU numbers need {}+ GPUs (nvidia-h200-x{} or larger); running the virtual-device mode on GPU {}.",
            layers,
            layers.next_power_of_two().max(2),
            devices.ordinal(0).unwrap_or(fallback)
        );
    }
    Ok((devices, out))
}

/// `cusync run multigpu` at one M: [`open_devices`], [`compare`], the report headed by what ran
/// where.
pub fn run_command(fallback: usize, ordinals: &[usize], opts: &CompareOptions) -> Result<String> {
    validate_compare(opts)?;
    let (devices, mut out) = open_devices(fallback, ordinals, opts.layers)?;
    let report = compare(&devices, opts)?;
    out.push_str(&report.to_string());
    Ok(out)
}

/// The options of one M of a sweep: `opts` at `m`, its chunk sizes those of `opts.chunks` that
/// fit in `m` rows (all of them larger: `[m]`; none given: [`default_chunks`] at run time).
pub fn options_at(opts: &CompareOptions, m: usize) -> CompareOptions {
    let mut o = opts.clone();
    o.m = m;
    if !opts.chunks.is_empty() {
        o.chunks = opts.chunks.iter().copied().filter(|&c| c <= m).collect();
        if o.chunks.is_empty() {
            o.chunks = vec![m];
        }
    }
    o
}

/// Checks a sweep before any GPU work: at least one M, and every M's options
/// ([`validate_compare`] on [`options_at`]).
pub fn validate_sweep(opts: &CompareOptions, ms: &[usize]) -> Result<()> {
    if ms.is_empty() {
        return Err(Error::InvalidArgument("the M sweep needs at least one M".into()));
    }
    if opts.chunks.contains(&0) {
        return Err(Error::InvalidArgument(
            "chunk size 0 out of range: a chunk has at least one row".into(),
        ));
    }
    ms.iter().try_for_each(|&m| validate_compare(&options_at(opts, m)))
}

/// One M of a sweep: the report, or why that M failed.
#[derive(Clone, Debug)]
pub struct SweepRow {
    /// Rows of the input.
    pub m: usize,
    /// The comparison at this M.
    pub report: std::result::Result<CompareReport, String>,
}

/// Runs [`compare`] at every M of `ms` (options from [`options_at`]) on `devices`; `each` sees
/// every row as it finishes (progress, printing). An M that fails is kept as its error and the
/// sweep goes on.
pub fn sweep(
    devices: &DeviceSet,
    opts: &CompareOptions,
    ms: &[usize],
    mut each: impl FnMut(&SweepRow),
) -> Result<Vec<SweepRow>> {
    validate_sweep(opts, ms)?;
    let mut rows = Vec::with_capacity(ms.len());
    for &m in ms {
        let row = SweepRow {
            m,
            report: compare(devices, &options_at(opts, m)).map_err(|e| e.to_string()),
        };
        each(&row);
        rows.push(row);
    }
    Ok(rows)
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

fn signed(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:+.1}%"))
}

impl CompareReport {
    /// Best-chunk micro-batching's median and chunk, when it ran.
    pub fn best_microbatch(&self) -> Option<(f64, usize)> {
        self.microbatch.as_ref().ok().map(|mb| (mb.best_ms, mb.best_chunk))
    }

    /// Tensor parallelism's median total, when it ran.
    pub fn tp_ms(&self) -> Option<f64> {
        self.tensor_parallel.as_ref().ok().map(|t| t.total.median)
    }

    /// CTA-pipelining's latency reduction against best-chunk micro-batching, percent.
    pub fn vs_microbatch(&self) -> Option<f64> {
        self.best_microbatch()
            .map(|(ms, _)| reduction(self.pipelined.median, ms))
    }

    /// CTA-pipelining's latency reduction against tensor parallelism, percent.
    pub fn vs_tp(&self) -> Option<f64> {
        self.tp_ms().map(|ms| reduction(self.pipelined.median, ms))
    }
}

/// The summary table of a sweep (last in `cusync run multigpu`'s output): per M, StreamSync,
/// CTA-pipelining, best micro-batching (chunk), TP (ms), CTA-pipelining's reductions against
/// them and the paper's (reduction = 1 - ours / theirs: positive means CTA-pipelining is faster).
pub fn render_sweep(rows: &[SweepRow], opts: &CompareOptions) -> String {
    let mut s = String::new();
    let first = rows.iter().find_map(|r| r.report.as_ref().ok());
    let (gpus, virt) = first.map_or((0, false), |r| (r.gpus, r.virtual_devices));
    let _ = writeln!(
        s,
        "== M sweep: {}-layer [M,{w}]x[{w},{w}]... bf16, {} GPU(s){}, layer i on device i, medians of {} (ms); \
         reduction = 1 - CTA-pipelining / baseline (positive: CTA-pipelining faster)",
        opts.layers,
        gpus,
        if virt {
            " (VIRTUAL devices: one GPU's numbers)"
        } else {
            ""
        },
        opts.iters,
        w = opts.width
    );
    if let Some(r) = first {
        let _ = writeln!(s, "   our kernel {}", kernel_description(r.kernel));
    }
    let _ = writeln!(
        s,
        "{:>6} {:>11} {:>11} {:>17} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "M", "StreamSync", "CTA-pipe", "best MB (chunk)", "TP", "vs MB", "vs TP", "paper vs MB", "paper vs TP"
    );
    for row in rows {
        let paper = paper_numbers(opts.layers, row.m, opts.width);
        let (pmb, ptp) = (
            paper
                .and_then(|p| p.vs_microbatch)
                .map_or("-".into(), |v| format!("{v:.1}%")),
            paper.and_then(|p| p.vs_tp).map_or("-".into(), |v| format!("{v:.1}%")),
        );
        match &row.report {
            Ok(r) => {
                let mb = r
                    .best_microbatch()
                    .map_or("-".to_string(), |(ms, c)| format!("{ms:.3} ({c})"));
                let _ = writeln!(
                    s,
                    "{:>6} {:>11.3} {:>11.3} {:>17} {:>9} {:>9} {:>9} {:>12} {:>12}",
                    row.m,
                    r.stream_sync.median,
                    r.pipelined.median,
                    mb,
                    cell(r.tp_ms(), 3),
                    signed(r.vs_microbatch()),
                    signed(r.vs_tp()),
                    pmb,
                    ptp
                );
            }
            Err(e) => {
                let _ = writeln!(s, "{:>6} FAILED: {e}", row.m);
            }
        }
    }
    for row in rows {
        if let Ok(r) = &row.report {
            if let Err(e) = &r.microbatch {
                let _ = writeln!(s, "  M = {}: micro-batching not run: {e}", row.m);
            }
            if let Err(e) = &r.tensor_parallel {
                let _ = writeln!(s, "  M = {}: tensor parallelism not run: {e}", row.m);
            }
        }
    }
    let _ = writeln!(
        s,
        "paper: 8x B200, CUTLASS SM100 kernels, NVLink 5 (Fig. 5: 2 GPUs; Table I / Fig. 4: M = 16384){}",
        if virt {
            "; not comparable to a virtual-device run"
        } else {
            ""
        }
    );
    s
}

/// The sweep as CSV (one line per M; empty cells where a variant did not run; failed Ms with
/// their error).
pub fn sweep_csv(rows: &[SweepRow], opts: &CompareOptions) -> String {
    let mut s = String::from(
        "m,width,layers,gpus,virtual,kernel,policy,iters,streamsync_ms,cta_ms,mb_best_ms,mb_best_chunk,tp_ms,\
         tp_compute_ms,tp_allreduce_ms,tp_ranks,vs_mb_pct,vs_tp_pct,paper_vs_mb_pct,paper_vs_tp_pct,error\n",
    );
    for row in rows {
        let paper = paper_numbers(opts.layers, row.m, opts.width);
        let p = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.1}"));
        let (pmb, ptp) = (p(paper.and_then(|p| p.vs_microbatch)), p(paper.and_then(|p| p.vs_tp)));
        match &row.report {
            Ok(r) => {
                let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
                let tp = r.tensor_parallel.as_ref().ok();
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{:.4},{:.4},{},{},{},{},{},{},{},{},{pmb},{ptp},",
                    row.m,
                    opts.width,
                    opts.layers,
                    r.gpus,
                    r.virtual_devices,
                    r.kernel.name(),
                    opts.policy.name(),
                    opts.iters,
                    r.stream_sync.median,
                    r.pipelined.median,
                    f(r.best_microbatch().map(|b| b.0)),
                    r.best_microbatch().map_or(String::new(), |b| b.1.to_string()),
                    f(tp.map(|t| t.total.median)),
                    f(tp.map(|t| t.compute.median)),
                    f(tp.map(|t| t.all_reduce.median)),
                    tp.map_or(String::new(), |t| t.ranks.to_string()),
                    p(r.vs_microbatch()),
                    p(r.vs_tp()),
                );
            }
            Err(e) => {
                let e = e.replace([',', '\n'], ";");
                let _ = writeln!(
                    s,
                    "{},{},{},,,,{},{},,,,,,,,,,,{pmb},{ptp},{e}",
                    row.m,
                    opts.width,
                    opts.layers,
                    opts.policy.name(),
                    opts.iters
                );
            }
        }
    }
    s
}

impl std::fmt::Display for CompareReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.options;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}-layer [{},{}] x [{},{}]... bf16 chain on {} GPU(s), {} layer(s), layer i on device i, medians of {} runs (ms):",
            o.layers, o.m, o.width, o.width, o.width, self.gpus, o.layers, o.iters
        );
        s.push_str(&self.devices);
        if self.virtual_devices {
            let _ = writeln!(
                s,
                "*** {} GPU(s) for {} layers: VIRTUAL devices (several logical devices on one GPU). These are \
                 single-GPU numbers of the multi-GPU code paths (system-scope edges, per-device streams); \
                 the multi-GPU numbers need {}+ GPUs (nvidia-h200-x2 or larger), not run here. ***",
                self.gpus, o.layers, o.layers
            );
        }
        let _ = writeln!(s, "  our GeMM kernel: {}", kernel_description(self.kernel));
        let _ = writeln!(
            s,
            "  StreamSync (our {} kernels, layer after layer)     {:>9.3}",
            self.kernel.name(),
            self.stream_sync.median
        );
        let _ = writeln!(
            s,
            "  CTA-pipelining, stream mode ({}, {} sys-scope edge(s)) {:>9.3}   bitwise equal to StreamSync; sampled rows within {:.1e} of f64",
            o.policy.name(),
            self.sys_scope_edges,
            self.pipelined.median,
            self.reference_error
        );
        match &self.microbatch {
            Ok(mb) => {
                let _ = writeln!(
                    s,
                    "  micro-batching, cuBLAS, best chunk {} rows          {:>9.3}   CTA-pipelining {}",
                    mb.best_chunk,
                    mb.best_ms,
                    faster_or_slower(reduction(self.pipelined.median, mb.best_ms))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "  micro-batching: not run: {e}");
            }
        }
        match &self.tensor_parallel {
            Ok(tp) => {
                let _ = writeln!(
                    s,
                    "  tensor parallelism, {} rank(s), {} all-reduce(s), cuBLAS + NCCL {:>9.3}   (GeMMs {:.3}, all-reduce {:.3}); CTA-pipelining {}",
                    tp.ranks,
                    tp.pairs,
                    tp.total.median,
                    tp.compute.median,
                    tp.all_reduce.median,
                    faster_or_slower(reduction(self.pipelined.median, tp.total.median))
                );
                if let Ok((a, b, c)) = nccl_version() {
                    let _ = writeln!(s, "    (NCCL {a}.{b}.{c})");
                }
            }
            Err(e) => {
                let _ = writeln!(s, "  tensor parallelism: not run: {e}");
            }
        }
        if let Ok(mb) = &self.microbatch {
            s.push_str(&mb.to_string());
        }
        let ours_tp = self.tp_ms().map_or(String::new(), |tp| {
            format!(
                " TP {:.0} us, CTA-pipelining {:.0} us;",
                tp * 1e3,
                self.pipelined.median * 1e3
            )
        });
        let _ = writeln!(
            s,
            "ours ({} GPU(s), {} layer(s), M = {}):{ours_tp} CTA-pipelining {} vs best micro-batching, {} vs TP (reduction; positive = faster)",
            self.gpus,
            o.layers,
            o.m,
            signed(self.vs_microbatch()),
            signed(self.vs_tp())
        );
        let _ = writeln!(s, "{}", paper_line(o.layers, o.m, o.width, self.virtual_devices));
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_before_any_gpu_work() {
        assert!(validate_compare(&CompareOptions::default()).is_ok());
        let bad = CompareOptions {
            chunks: vec![0],
            ..Default::default()
        };
        assert!(validate_compare(&bad).unwrap_err().to_string().contains("chunk size 0"));
        let bad = CompareOptions {
            layers: 0,
            ..Default::default()
        };
        assert!(validate_compare(&bad).is_err());
        assert!((reduction(68.2, 100.0) - 31.8).abs() < 1e-9);
    }

    #[test]
    fn only_virtual_runs_are_told_they_are_not_comparable_to_the_paper() {
        let real = paper_line(2, 16384, 8192, false);
        let virt = paper_line(2, 16384, 8192, true);
        assert!(
            real.starts_with("paper (Fig. 5, Table I; 8x B200") && real.contains("29.0% below TP"),
            "{real}"
        );
        assert!(real.contains("31.8% below best micro-batching"), "{real}");
        assert!(!real.contains("virtual"), "{real}");
        assert!(virt.ends_with("not comparable to a virtual-device run"), "{virt}");
    }

    #[test]
    fn the_paper_has_fig5_per_m_on_two_gpus_and_table1_per_gpu_count_at_16384() {
        let p = paper_numbers(2, 4096, 8192).unwrap();
        assert_eq!((p.source, p.vs_microbatch, p.vs_tp), ("Fig. 5", Some(18.3), Some(23.9)));
        assert_eq!((p.tp_us, p.cta_us), (None, None));
        let p = paper_numbers(4, 16384, 8192).unwrap();
        assert_eq!(p.source, "Table I, Fig. 4");
        assert_eq!((p.tp_us, p.cta_us), (Some(2636.0), Some(1418.0)));
        assert_eq!((p.vs_tp, p.vs_microbatch), (Some(46.2), Some(30.0)));
        let p = paper_numbers(8, 16384, 8192).unwrap();
        assert_eq!(
            (p.tp_us, p.vs_tp, p.vs_microbatch),
            (Some(4493.0), Some(59.0), Some(23.4))
        );
        let p = paper_numbers(2, 16384, 8192).unwrap();
        assert_eq!((p.tp_us, p.vs_tp), (Some(1640.0), Some(29.0)));
        assert!(paper_numbers(4, 8192, 8192).is_none(), "Table I is at M = 16384 only");
        assert!(
            paper_numbers(2, 16384, 4096).is_none(),
            "the paper's weights are 8192 x 8192"
        );
        assert!(paper_numbers(3, 16384, 8192).is_none());
        let line = paper_line(4, 16384, 8192, false);
        assert!(
            line.contains("4 GPU(s), 4 layer(s)") && line.contains("TP 2636 us, CTA-pipelining 1418 us"),
            "{line}"
        );
        assert!(
            line.contains("46.2% below TP") && line.contains("30.0% below best"),
            "{line}"
        );
        let one = paper_line(1, 16384, 8192, false);
        assert!(one.contains("no reduction"), "{one}");
        let none = paper_line(4, 1024, 8192, false);
        assert!(none.starts_with("paper: no number"), "{none}");
    }

    #[test]
    fn sweep_options_keep_the_chunks_that_fit_each_m() {
        let opts = CompareOptions {
            chunks: vec![256, 1024, 4096],
            ..Default::default()
        };
        assert_eq!(options_at(&opts, 2048).chunks, vec![256, 1024]);
        assert_eq!(options_at(&opts, 2048).m, 2048);
        assert_eq!(
            options_at(&opts, 128).chunks,
            vec![128],
            "no chunk fits: one chunk of M rows"
        );
        assert!(
            options_at(&CompareOptions::default(), 1024).chunks.is_empty(),
            "default sweep at run time"
        );
        assert!(validate_sweep(&opts, &[1024, 2048]).is_ok());
        let e = validate_sweep(&opts, &[]).unwrap_err().to_string();
        assert!(e.contains("at least one M"), "{e}");
        let e = validate_sweep(&opts, &[1024, 0]).unwrap_err().to_string();
        assert!(e.contains("M = 0"), "{e}");
        let zero = CompareOptions {
            chunks: vec![0, 256],
            ..Default::default()
        };
        assert!(validate_sweep(&zero, &[1024])
            .unwrap_err()
            .to_string()
            .contains("chunk size 0"));
    }

    /// A report with made-up times (no GPU): StreamSync 10, CTA-pipelining 6, best
    /// micro-batching 8 (chunk 1024), TP 5 ms.
    fn synthetic_report(m: usize, virtual_devices: bool) -> CompareReport {
        use crate::ops::gemm_sm90::WgTile;
        let stats = |v: f64| Stats::of(&mut [v]);
        CompareReport {
            options: CompareOptions {
                m,
                ..Default::default()
            },
            devices: "  device 0: ...\n".into(),
            virtual_devices,
            gpus: 2,
            kernel: MlpKernel::Path2(WgTile::T128x256),
            stream_sync: stats(10.0),
            pipelined: stats(6.0),
            sys_scope_edges: 1,
            reference_error: 1e-3,
            microbatch: Ok(MicrobatchResult {
                m,
                dims: vec![8192; 3],
                streams: 4,
                per_chunk: Vec::new(),
                best_chunk: 1024,
                best_ms: 8.0,
                notes: Vec::new(),
            }),
            tensor_parallel: Ok(TpTiming {
                ranks: 2,
                pairs: 1,
                phased: false,
                total: stats(5.0),
                compute: stats(4.0),
                all_reduce: stats(1.0),
            }),
        }
    }

    #[test]
    fn the_sweep_table_has_our_reductions_beside_the_papers() {
        let opts = CompareOptions::default();
        let r = synthetic_report(4096, false);
        assert_eq!(r.vs_microbatch(), Some(25.0));
        assert_eq!(r.vs_tp(), Some(-19.999999999999996));
        let rows = vec![
            SweepRow { m: 4096, report: Ok(r) },
            SweepRow {
                m: 8192,
                report: Ok(synthetic_report(8192, false)),
            },
        ];
        let table = render_sweep(&rows, &opts);
        println!("{table}");
        let line = table.lines().find(|l| l.trim_start().starts_with("4096")).unwrap();
        for cell in [
            "10.000",
            "6.000",
            "8.000 (1024)",
            "5.000",
            "+25.0%",
            "-20.0%",
            "18.3%",
            "23.9%",
        ] {
            assert!(line.contains(cell), "{cell} missing in {line}");
        }
        assert!(!table.contains("VIRTUAL"), "{table}");
        let csv = sweep_csv(&rows, &opts);
        println!("{csv}");
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count(), "{csv}");
        assert!(
            lines[1].contains(",10.0000,6.0000,8.0000,1024,5.0000,4.0000,1.0000,2,25.0,-20.0,18.3,23.9,"),
            "{csv}"
        );
        let text = synthetic_report(16384, true).to_string();
        println!("{text}");
        assert!(
            text.contains("on 2 GPU(s), 2 layer(s)") && text.contains("VIRTUAL"),
            "{text}"
        );
        assert!(text.contains("1 all-reduce(s)") && text.contains("Table I"), "{text}");
        assert!(
            text.contains("CTA-pipelining 25.0% faster") && text.contains("CTA-pipelining 20.0% slower"),
            "{text}"
        );
    }

    #[test]
    fn the_sweep_table_and_csv_show_failed_ms_and_the_papers_numbers() {
        let opts = CompareOptions::default();
        let rows = vec![
            SweepRow {
                m: 4096,
                report: Err("out of memory, really".into()),
            },
            SweepRow {
                m: 1000,
                report: Err("x".into()),
            },
        ];
        let table = render_sweep(&rows, &opts);
        assert!(table.contains("  4096 FAILED: out of memory, really"), "{table}");
        assert!(table.contains("2-layer [M,8192]"), "{table}");
        let csv = sweep_csv(&rows, &opts);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "{csv}");
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols), "{csv}");
        assert!(
            lines[1].starts_with("4096,8192,2,") && lines[1].contains(",18.3,23.9,out of memory; really"),
            "{csv}"
        );
        assert!(lines[2].contains(",,,x"), "{csv}");
    }

    #[test]
    fn the_report_names_the_kernel_family() {
        use crate::ops::gemm::TileConfig;
        use crate::ops::gemm_sm90::WgTile;
        let p2 = kernel_description(MlpKernel::Path2(WgTile::T128x256));
        assert!(p2.starts_with("wg128x256 (GeMM path 2"), "{p2}");
        let p1 = kernel_description(MlpKernel::Path1(TileConfig::T128x128));
        assert!(p1.starts_with("128x128 (GeMM path 1"), "{p1}");
    }
}
