//! The multi-GPU comparison of the CTA-pipelining paper (section IV) on the GPUs present: an
//! N-layer `[M, W] x [W, W] x ...` bf16 chain (2 layers: the MLP-like case), layer `i` on
//! device `i`, run as
//!
//! * **CTA-pipelining, stream mode**: [`GemmChain`] + [`super::MultiStreamGraph`], verified
//!   bitwise against StreamSync (the same kernels without synchronization) and on sampled rows
//!   against an f64 reference; GeMM path 2 where every device runs it, else path 1, or the
//!   kernel [`CompareOptions::kernel`] forces (the report names it);
//! * **micro-batching** with cuBLAS, chunk size swept, best reported ([`Microbatch`]);
//! * **tensor parallelism** (2 layers), cuBLAS + NCCL all-reduce, over the distinct GPUs
//!   ([`TensorParallel`]).
//!
//! With fewer GPUs than layers the devices are virtual (every layer on one GPU): the code paths
//! are the multi-GPU ones (system-scope edges, per-device streams), the numbers are one GPU's,
//! and the report says so. Nothing here invents a multi-GPU number.

use super::chain::GemmChain;
use super::devices::DeviceSet;
use crate::baselines::microbatch::{default_chunks, Microbatch, MicrobatchOptions, MicrobatchResult};
use crate::baselines::nccl::nccl_version;
use crate::baselines::tensor_parallel::{TensorParallel, TpShape, TpTiming};
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

/// The closing line comparing with the paper's numbers; a virtual-device run is also told
/// that it is not comparable to them.
pub fn paper_line(virtual_devices: bool) -> String {
    let mut s = "paper (8x B200, CUTLASS, 2 GPUs, M = 16384): CTA-pipelining 31.8% below best micro-batching, \
                 29.0% below TP"
        .to_string();
    if virtual_devices {
        s.push_str("; not comparable to a virtual-device run");
    }
    s
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

    let tensor_parallel = if opts.layers != 2 {
        Err("tensor parallelism is measured for 2 layers (one all-reduce per layer pair)".to_string())
    } else {
        let contexts: Vec<&crate::Context> = devices.physical_contexts().iter().map(|c| c.as_ref()).collect();
        let shape = TpShape {
            m: opts.m,
            k: opts.width,
            f: opts.width,
            n: opts.width,
        };
        TensorParallel::new(&contexts, shape, 9)
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
    };

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

/// `cusync run multigpu`: opens one logical device per layer (`ordinals`, or GPUs
/// `0..layers` when that many are present, else virtual devices on GPU `fallback`), runs
/// [`compare`] and returns the report, headed by what ran where.
pub fn run_command(fallback: usize, ordinals: &[usize], opts: &CompareOptions) -> Result<String> {
    validate_compare(opts)?;
    if !ordinals.is_empty() && ordinals.len() != opts.layers {
        return Err(Error::InvalidArgument(format!(
            "--devices names {} GPU(s) for {} layer(s); give one per layer",
            ordinals.len(),
            opts.layers
        )));
    }
    let present = crate::Context::device_count()?;
    let devices = if ordinals.is_empty() {
        DeviceSet::present_or_virtual(opts.layers, fallback)?.0
    } else {
        DeviceSet::open(ordinals)?
    };
    let mut out = format!("{present} GPU(s) present.\n");
    if devices.is_virtual() {
        let _ = writeln!(
            out,
            "Multi-GPU numbers need {}+ GPUs (nvidia-h200-x{} or larger); running the virtual-device mode on GPU {}.",
            opts.layers,
            opts.layers.next_power_of_two().max(2),
            devices.ordinal(0).unwrap_or(fallback)
        );
    }
    let report = compare(&devices, opts)?;
    out.push_str(&report.to_string());
    Ok(out)
}

impl std::fmt::Display for CompareReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.options;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}-layer [{},{}] x [{},{}]... bf16 chain, layer i on device i, medians of {} runs (ms):",
            o.layers, o.m, o.width, o.width, o.width, o.iters
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
                    "  micro-batching, cuBLAS, best chunk {} rows          {:>9.3}   CTA-pipelining {:+.1}% vs it",
                    mb.best_chunk,
                    mb.best_ms,
                    -reduction(self.pipelined.median, mb.best_ms)
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
                    "  tensor parallelism, {} rank(s), cuBLAS + NCCL       {:>9.3}   (GeMMs {:.3}, all-reduce {:.3}); CTA-pipelining {:+.1}% vs it",
                    tp.ranks,
                    tp.total.median,
                    tp.compute.median,
                    tp.all_reduce.median,
                    -reduction(self.pipelined.median, tp.total.median)
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
        let _ = writeln!(s, "{}", paper_line(self.virtual_devices));
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
        let real = paper_line(false);
        let virt = paper_line(true);
        assert!(
            real.starts_with("paper (8x B200") && real.contains("29.0% below TP"),
            "{real}"
        );
        assert!(!real.contains("virtual"), "{real}");
        assert!(virt.ends_with("not comparable to a virtual-device run"), "{virt}");
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
