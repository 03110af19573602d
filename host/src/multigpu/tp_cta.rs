//! Tensor parallelism combined with CTA-pipelining (the CTA-pipelining paper, section IV-B.2,
//! Fig. 6 and 7): the 2-layer GeMM `Y = X A B` (`A`, `B`: `W x W`) on `G` groups of two GPUs.
//!
//! * **TP + CTA-pipelining** ([`TpCta`]): `A` is column-sharded and `B` row-sharded over the
//!   `G` groups (Megatron's sharding, with groups in place of ranks). In group `g`, logical
//!   device `2g` computes `H_g = X A_g` (`[M, W/G]`) and device `2g + 1` computes
//!   `Y_g = H_g B_g` (`[M, W]`), pipelined tile by tile in stream mode: a [`GemmChain`] with
//!   dims `[W, W/G, W]`, `H_g` placed on the consumer's GPU, one system-scope edge. All groups
//!   launch together as one [`ChainGraph`]. Then an NCCL all-reduce over the `G` consumer
//!   GPUs (world size `G`) sums the `Y_g` into `Y`.
//! * **pure TP** over all `2G` GPUs ([`TensorParallel`], cuBLAS + NCCL, world size `2G`).
//!
//! Both are timed in two phases with CUDA events: *compute* until every GPU's GeMMs are done
//! (TP + CTA: the graph's launch to its last stage's end; TP: barriers, see
//! [`TensorParallel::time_phased`]) and *communication*, the all-reduce with every rank ready.
//! TP's total is one event span; TP + CTA-pipelining's total is the sum of its two phases
//! (the graph synchronizes the host before the all-reduce is queued, and that host gap is not
//! counted).
//!
//! With fewer GPUs than `2G`, the logical devices are virtual (all on one GPU): the groups'
//! pipelined chains run and are verified, but NCCL needs one GPU per rank, so an all-reduce
//! over `G > 1` groups and pure TP over `2G` ranks are reported as not run, with the reason,
//! and the groups' partial results are summed on the host and checked instead.

use super::chain::{ChainGraph, GemmChain};
use super::devices::DeviceSet;
use crate::baselines::nccl::{nccl_present, nccl_unavailable_reason, validate_ranks, NcclGroup};
use crate::baselines::tensor_parallel::{
    barrier, column_block, random_operands, reference_row, row_block, shard, TensorParallel, TpShape, TpTiming,
};
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::mlp::MlpKernel;
use crate::runtime::{Context, DeviceBuffer, Stream};
use crate::stream::WaitKernelPolicy;
use crate::verify::{first_difference, relative_error};
use cusync_shared::policy::PolicyKind;
use half::bf16;
use std::fmt::Write as _;

/// What `cusync run multigpu-tp` runs at each M.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpCtaOptions {
    /// `W`: `A` and `B` are `W x W`, `X` is `[M, W]`.
    pub width: usize,
    /// `G`: groups of two GPUs (`2G` GPUs in all).
    pub groups: usize,
    /// Timed runs per variant (medians reported).
    pub iters: usize,
    /// The CTA-pipelining policy inside each group.
    pub policy: PolicyKind,
    /// Our GeMM kernel for both layers of every group; `None`: path 2 where every device runs
    /// it and TMA loads the operands, else path 1 ([`super::chain::default_kernel`]).
    pub kernel: Option<MlpKernel>,
}

impl Default for TpCtaOptions {
    fn default() -> Self {
        Self {
            width: 8192,
            groups: 2,
            iters: 5,
            policy: PolicyKind::RowSync,
            kernel: None,
        }
    }
}

/// Where group `group` runs and which shard it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    /// The group (`0..G`).
    pub group: usize,
    /// Logical device of its first GeMM (`H_g = X A_g`): `2g`.
    pub producer: usize,
    /// Logical device of its second GeMM (`Y_g = H_g B_g`), where `H_g` and `Y_g` live and
    /// its all-reduce rank runs: `2g + 1`.
    pub consumer: usize,
    /// First column of `A` (and row of `B`) in its shard.
    pub first: usize,
    /// Columns of `A` (rows of `B`) in its shard: `W / G`.
    pub len: usize,
}

impl GroupPlan {
    /// The group's chain dims: `[W, W/G, W]`.
    pub fn dims(&self, width: usize) -> [usize; 3] {
        [width, self.len, width]
    }
}

/// The groups of TP + CTA-pipelining on `2G` logical devices: group `g` on devices `2g` and
/// `2g + 1`, holding columns `g W/G .. (g+1) W/G` of `A` (rows of `B`). Refuses `G = 0`, `W = 0`
/// and a `W` that `G` does not divide.
pub fn plan_groups(width: usize, groups: usize) -> Result<Vec<GroupPlan>> {
    if groups == 0 {
        return Err(Error::InvalidArgument(
            "TP + CTA-pipelining needs at least one group of two GPUs (--groups >= 1)".into(),
        ));
    }
    if width == 0 {
        return Err(Error::InvalidArgument("the width W must be at least 1".into()));
    }
    (0..groups)
        .map(|g| {
            let (first, len) = shard(width, groups, g).map_err(|_| {
                Error::InvalidArgument(format!(
                    "TP + CTA-pipelining shards A's columns and B's rows over the {groups} groups: W = {width} must \
                     be a multiple of G = {groups}"
                ))
            })?;
            Ok(GroupPlan {
                group: g,
                producer: 2 * g,
                consumer: 2 * g + 1,
                first,
                len,
            })
        })
        .collect()
}

/// Checks one M's run before any GPU work: the groups ([`plan_groups`]), `M` and `iters` at
/// least 1.
pub fn validate_tp_cta(m: usize, opts: &TpCtaOptions) -> Result<()> {
    if m == 0 || opts.iters == 0 {
        return Err(Error::InvalidArgument(format!(
            "TP + CTA-pipelining: M = {m} and iters = {} must be at least 1",
            opts.iters
        )));
    }
    plan_groups(opts.width, opts.groups).map(|_| ())
}

/// Checks a `--devices` list: `2G` entries (a producer and a consumer per group).
pub fn check_device_count(ordinals: &[usize], groups: usize) -> Result<()> {
    if ordinals.len() != 2 * groups {
        return Err(Error::InvalidArgument(format!(
            "--devices names {} GPU(s); TP + CTA-pipelining with G = {groups} group(s) needs 2G = {} (group g: \
             GPU 2g computes X A_g, GPU 2g+1 computes H_g B_g)",
            ordinals.len(),
            2 * groups
        )));
    }
    Ok(())
}

/// The GPU ordinals of the all-reduce's ranks: each group's consumer's.
pub fn all_reduce_ordinals(ordinals: &[usize], plans: &[GroupPlan]) -> Vec<usize> {
    plans.iter().filter_map(|p| ordinals.get(p.consumer).copied()).collect()
}

/// Why an NCCL communicator over GPUs `ordinals` cannot be made here (ranks sharing a GPU, or
/// no NCCL), or `None` when it can.
pub fn nccl_blocker(ordinals: &[usize]) -> Option<String> {
    if let Err(e) = validate_ranks(ordinals) {
        return Some(e.to_string());
    }
    if !nccl_present() {
        return Some(nccl_unavailable_reason());
    }
    None
}

/// Element-wise f64 sum of the groups' partial results (the host-side all-reduce).
pub fn host_sum(partials: &[Vec<bf16>]) -> Vec<f64> {
    let len = partials.first().map_or(0, Vec::len);
    let mut sum = vec![0f64; len];
    for p in partials {
        for (s, v) in sum.iter_mut().zip(p) {
            *s += v.to_f64();
        }
    }
    sum
}

/// Opens the `2G` logical devices: `ordinals` when given (`2G` of them), else GPUs `0..2G` when
/// that many are present, else virtual devices on GPU `fallback`. Returns them with a heading
/// that says what runs where.
pub fn open_devices(fallback: usize, ordinals: &[usize], groups: usize) -> Result<(DeviceSet, String)> {
    if groups == 0 {
        return Err(Error::InvalidArgument(
            "TP + CTA-pipelining needs at least one group of two GPUs (--groups >= 1)".into(),
        ));
    }
    if !ordinals.is_empty() {
        check_device_count(ordinals, groups)?;
    }
    let present = Context::device_count()?;
    let devices = if ordinals.is_empty() {
        DeviceSet::present_or_virtual(2 * groups, fallback)?.0
    } else {
        DeviceSet::open(ordinals)?
    };
    let mut out = format!("{present} GPU(s) present.\n");
    if devices.is_virtual() {
        let _ = writeln!(
            out,
            "*** TP + CTA-pipelining with G = {groups} group(s) needs {} GPUs (nvidia-h200-x{} or larger); {} distinct \
             GPU(s) in the set: running on VIRTUAL devices. Single-GPU numbers of the multi-GPU code paths; NCCL needs \
             one GPU per rank, so all-reduces over ranks that share a GPU are not run (the partial results are summed \
             on the host and checked instead). ***",
            2 * groups,
            (2 * groups).next_power_of_two(),
            devices.physical_contexts().len()
        );
    }
    Ok((devices, out))
}

/// The NCCL side of [`TpCta`]: the communicator over the consumers' GPUs, its streams and the
/// all-reduced outputs.
struct Reduce {
    group: NcclGroup,
    streams: Vec<Stream>,
    y: Vec<DeviceBuffer<bf16>>,
}

/// TP + CTA-pipelining on `2G` logical devices (see the module docs).
pub struct TpCta<'d> {
    devices: &'d DeviceSet,
    plans: Vec<GroupPlan>,
    chains: Vec<GemmChain<'d>>,
    graph: ChainGraph<'d>,
    reduce: std::result::Result<Reduce, String>,
    m: usize,
    width: usize,
}

impl<'d> TpCta<'d> {
    /// Shards `a` (`[W, W]`, columns) and `b` (`[W, W]`, rows) over the groups, uploads `x`
    /// (`[M, W]`) to every producer GPU and the shards to their GPUs (a [`GemmChain`] per group,
    /// dims `[W, W/G, W]`, outputs NaN-poisoned), builds the one graph of all groups and, where
    /// NCCL can run (one consumer per GPU, libnccl present), the all-reduce over the consumers.
    pub fn new(
        devices: &'d DeviceSet,
        m: usize,
        opts: &TpCtaOptions,
        x: &[bf16],
        a: &[bf16],
        b: &[bf16],
    ) -> Result<Self> {
        validate_tp_cta(m, opts)?;
        let w = opts.width;
        let plans = plan_groups(w, opts.groups)?;
        let ordinals: Vec<usize> = (0..devices.len()).filter_map(|d| devices.ordinal(d)).collect();
        check_device_count(&ordinals, opts.groups)?;
        if a.len() != w * w || b.len() != w * w {
            return Err(Error::InvalidArgument(format!(
                "TP + CTA-pipelining: A has {} and B {} elements, not W x W = {w} x {w}",
                a.len(),
                b.len()
            )));
        }
        let mut chains = Vec::with_capacity(plans.len());
        for p in &plans {
            let weights = vec![
                column_block(a, w, w, p.first, p.len)?,
                row_block(b, w, p.first, p.len)?.to_vec(),
            ];
            chains.push(GemmChain::from_host(
                devices,
                m,
                &p.dims(w),
                &[p.producer, p.consumer],
                opts.kernel,
                x,
                &weights,
            )?);
        }
        if let Some(c) = chains.iter().find(|c| c.kernel() != chains[0].kernel()) {
            return Err(Error::InvalidArgument(format!(
                "the groups picked different kernels ({} and {}); force one with --kernel",
                chains[0].kernel().name(),
                c.kernel().name()
            )));
        }
        let refs: Vec<&GemmChain<'d>> = chains.iter().collect();
        let graph = ChainGraph::new(&refs, opts.policy, WaitKernelPolicy::Auto)?;
        let reduce = match nccl_blocker(&all_reduce_ordinals(&ordinals, &plans)) {
            Some(why) => Err(why),
            None => {
                let mut streams = Vec::with_capacity(plans.len());
                let mut y = Vec::with_capacity(plans.len());
                for p in &plans {
                    let cx = devices.context(p.consumer)?;
                    streams.push(cx.new_stream()?);
                    y.push(cx.upload(&vec![bf16::from_f32(f32::NAN); m * w])?);
                }
                Ok(Reduce {
                    group: NcclGroup::new(&streams)?,
                    streams,
                    y,
                })
            }
        };
        Ok(Self {
            devices,
            plans,
            chains,
            graph,
            reduce,
            m,
            width: w,
        })
    }

    /// The groups.
    pub fn plans(&self) -> &[GroupPlan] {
        &self.plans
    }

    /// Group `g`'s chain.
    pub fn chain(&self, g: usize) -> Option<&GemmChain<'d>> {
        self.chains.get(g)
    }

    /// The kernel of every GeMM.
    pub fn kernel(&self) -> MlpKernel {
        self.chains[0].kernel()
    }

    /// The all-reduce's world size, or why it cannot run here.
    pub fn all_reduce_ranks(&self) -> std::result::Result<usize, &str> {
        self.reduce
            .as_ref()
            .map(|r| r.group.world_size())
            .map_err(|e| e.as_str())
    }

    /// NaN-poisons every group's `H_g` and `Y_g` and the all-reduced outputs.
    pub fn poison(&mut self) -> Result<()> {
        self.chains.iter_mut().try_for_each(|c| c.poison())?;
        if let Ok(r) = &mut self.reduce {
            let nan = bf16::from_f32(f32::NAN);
            r.y.iter_mut().try_for_each(|y| y.fill(nan))?;
        }
        Ok(())
    }

    /// Every group's chain run as StreamSync (its two GeMMs one after the other), group after
    /// group; returns each group's outputs `[H_g, Y_g]` (the bitwise reference).
    pub fn stream_sync_outputs(&mut self) -> Result<Vec<Vec<Vec<bf16>>>> {
        let mut out = Vec::with_capacity(self.chains.len());
        for c in &mut self.chains {
            c.run_stream_sync()?;
            out.push(c.outputs()?);
        }
        Ok(out)
    }

    /// The compute phase: every group's pipelined chain, all launched together; returns the
    /// graph's milliseconds (first launch to the last stage's end on any device).
    pub fn run_compute(&mut self) -> Result<f64> {
        let refs: Vec<&GemmChain<'d>> = self.chains.iter().collect();
        Ok(self.graph.run(&refs)?.elapsed_ms as f64)
    }

    /// The communication phase: the all-reduce of the groups' `Y_g` over the consumers' GPUs,
    /// between two barriers; returns its milliseconds. An error when it cannot run here.
    pub fn run_all_reduce(&mut self) -> Result<f64> {
        let r = self.reduce.as_mut().map_err(|why| {
            Error::InvalidArgument(format!(
                "the all-reduce over {} group(s) cannot run: {why}",
                self.plans.len()
            ))
        })?;
        let contexts = self
            .plans
            .iter()
            .map(|p| self.devices.context(p.consumer))
            .collect::<Result<Vec<_>>>()?;
        let ranks: Vec<(&Context, &Stream)> = contexts.iter().copied().zip(&r.streams).collect();
        let (start, end) = (contexts[0].new_event()?, contexts[0].new_event()?);
        barrier(&ranks, &start)?;
        let send = self
            .chains
            .iter()
            .map(|c| c.output(c.layers() - 1))
            .collect::<Result<Vec<_>>>()?;
        let mut recv: Vec<&mut DeviceBuffer<bf16>> = r.y.iter_mut().collect();
        r.group.all_reduce_sum_bf16(&send, &mut recv)?;
        barrier(&ranks, &end)?;
        r.streams.iter().try_for_each(|s| s.synchronize())?;
        Ok(start.elapsed_ms(&end)? as f64)
    }

    /// Every group's partial result `Y_g`, downloaded.
    pub fn partials(&self) -> Result<Vec<Vec<bf16>>> {
        self.chains
            .iter()
            .map(|c| c.output(c.layers() - 1)?.download())
            .collect()
    }

    /// Every rank's all-reduced `Y` (an error when the all-reduce cannot run here).
    pub fn reduced(&self) -> Result<Vec<Vec<bf16>>> {
        let r = self
            .reduce
            .as_ref()
            .map_err(|why| Error::InvalidArgument(format!("no all-reduce: {why}")))?;
        r.y.iter().map(|y| y.download()).collect()
    }

    /// Worst relative error of rows `rows` of every group's `H_g` and `Y_g` against f64
    /// references computed from the device's input to each GeMM ([`GemmChain::check_rows`]).
    pub fn check_groups(&self, rows: &[usize]) -> Result<f64> {
        self.chains
            .iter()
            .try_fold(0.0f64, |worst, c| Ok(worst.max(c.check_rows(rows)?)))
    }

    /// Rows of the input.
    pub fn m(&self) -> usize {
        self.m
    }

    /// `W`.
    pub fn width(&self) -> usize {
        self.width
    }
}

/// How the summed `Y` of TP + CTA-pipelining was checked.
#[derive(Clone, Debug, PartialEq)]
pub struct SumCheck {
    /// Worst relative error of sampled rows of the summed `Y` against the f64 reference
    /// `X A B` of the unsharded weights.
    pub reference_error: f64,
    /// `Some(e)`: the NCCL all-reduce ran, and its output (every rank's) is within `e` of the
    /// host-side sum of the groups' partials; `None`: it could not run, and the host-side sum
    /// was checked against the reference instead.
    pub all_reduce_vs_host_sum: Option<f64>,
}

/// One M of `cusync run multigpu-tp`.
#[derive(Clone, Debug)]
pub struct TpCtaRow {
    /// Rows of `X`.
    pub m: usize,
    /// The kernel of every GeMM of TP + CTA-pipelining.
    pub kernel: MlpKernel,
    /// Groups (`G`).
    pub groups: usize,
    /// Worst relative error of the groups' `H_g`, `Y_g` (sampled rows) against f64.
    pub group_error: f64,
    /// How the summed result was checked.
    pub sum: SumCheck,
    /// TP + CTA-pipelining, compute phase (ms).
    pub compute: Stats,
    /// TP + CTA-pipelining, all-reduce over `G` ranks (ms), or why it did not run.
    pub all_reduce: std::result::Result<Stats, String>,
    /// TP + CTA-pipelining, compute + all-reduce per run (ms), when the all-reduce ran.
    pub total: Option<Stats>,
    /// Pure TP over `2G` ranks (phased timing), or why it did not run.
    pub tp: std::result::Result<TpTiming, String>,
}

impl TpCtaRow {
    /// TP + CTA-pipelining's latency reduction against pure TP, percent (both totals known).
    pub fn reduction(&self) -> Option<f64> {
        let tp = self.tp.as_ref().ok()?.total.median;
        Some((1.0 - self.total.as_ref()?.median / tp) * 100.0)
    }
}

/// Measures one M on `devices` (`2G` logical devices): TP + CTA-pipelining verified (the
/// pipelined groups bitwise equal to StreamSync, `H_g` and `Y_g` against f64, the summed `Y`
/// against f64 and, with NCCL, the all-reduce against the host-side sum), then timed; then
/// pure TP over the `2G` GPUs on the same operands when they are `2G` distinct GPUs.
pub fn measure(devices: &DeviceSet, m: usize, opts: &TpCtaOptions, seed: u64) -> Result<TpCtaRow> {
    validate_tp_cta(m, opts)?;
    let w = opts.width;
    let shape = TpShape { m, k: w, f: w, n: w };
    let (x, a, b) = random_operands(shape, seed);
    let rows = [0, m / 2, m - 1];
    let mut hybrid = TpCta::new(devices, m, opts, &x, &a, &b)?;

    hybrid.poison()?;
    let want = hybrid.stream_sync_outputs()?;
    hybrid.poison()?;
    hybrid.run_compute()?;
    for (g, (c, want)) in hybrid.chains.iter().zip(&want).enumerate() {
        for (layer, (got, want)) in c.outputs()?.iter().zip(want).enumerate() {
            if let Some(i) = first_difference(got, want) {
                return Err(Error::Verification(format!(
                    "TP + CTA-pipelining group {g}, GeMM {layer}: element {i} differs from StreamSync"
                )));
            }
        }
    }
    let group_error = hybrid.check_groups(&rows)?;
    if group_error > 1e-2 {
        return Err(Error::Verification(format!(
            "TP + CTA-pipelining: a group's H_g or Y_g is {group_error:.3e} from the f64 reference on rows {rows:?}"
        )));
    }
    let sum_of = host_sum(&hybrid.partials()?);
    let all_reduce_vs_host_sum = if hybrid.reduce.is_ok() {
        hybrid.run_all_reduce()?;
        let mut worst = 0.0f64;
        for y in hybrid.reduced()? {
            let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
            worst = worst.max(relative_error(&got, &sum_of));
        }
        if worst > 1e-2 {
            return Err(Error::Verification(format!(
                "TP + CTA-pipelining: the NCCL all-reduce is {worst:.3e} from the host-side sum of the partials"
            )));
        }
        Some(worst)
    } else {
        None
    };
    let mut reference_error = 0.0f64;
    for &r in &rows {
        let want = reference_row(shape, &x, &a, &b, r);
        reference_error = reference_error.max(relative_error(&sum_of[r * w..(r + 1) * w], &want));
    }
    if reference_error > 2e-2 {
        return Err(Error::Verification(format!(
            "TP + CTA-pipelining: the summed Y is {reference_error:.3e} from the f64 reference X A B on rows {rows:?}"
        )));
    }

    let reduces = hybrid.reduce.is_ok();
    let (mut compute, mut comm, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..1 + opts.iters {
        let c = hybrid.run_compute()?;
        let a = if reduces { Some(hybrid.run_all_reduce()?) } else { None };
        if i > 0 {
            compute.push(c);
            if let Some(a) = a {
                comm.push(a);
                total.push(c + a);
            }
        }
    }
    let kernel = hybrid.kernel();
    let all_reduce = match &hybrid.reduce {
        Ok(_) => Ok(Stats::of(&mut comm)),
        Err(why) => Err(why.clone()),
    };
    drop(hybrid);

    let contexts: Vec<&Context> = devices.physical_contexts().iter().map(|c| c.as_ref()).collect();
    let tp = if contexts.len() != 2 * opts.groups {
        Err(format!(
            "pure TP over 2G = {} ranks needs {} distinct GPUs (NCCL puts one rank per GPU); the device set has {}",
            2 * opts.groups,
            2 * opts.groups,
            contexts.len()
        ))
    } else {
        TensorParallel::from_host(&contexts, shape, x, vec![a], vec![b])
            .and_then(|mut tp| {
                let t = tp.time_phased(2, opts.iters)?;
                let err = tp.check_rows(&rows)?;
                if err > 2e-2 {
                    return Err(Error::Verification(format!(
                        "pure TP vs the f64 reference: relative error {err:.3e}"
                    )));
                }
                Ok(t)
            })
            .map_err(|e| e.to_string())
    };
    Ok(TpCtaRow {
        m,
        kernel,
        groups: opts.groups,
        group_error,
        sum: SumCheck {
            reference_error,
            all_reduce_vs_host_sum,
        },
        compute: Stats::of(&mut compute),
        all_reduce,
        total: (!total.is_empty()).then(|| Stats::of(&mut total)),
        tp,
    })
}

/// One M's result, or why it failed.
#[derive(Clone, Debug)]
pub struct TpCtaSweepRow {
    /// Rows of `X`.
    pub m: usize,
    /// The measurement.
    pub row: std::result::Result<TpCtaRow, String>,
}

/// The report of a `cusync run multigpu-tp` sweep: per M the verification, then one table of
/// compute, communication and total for pure TP and TP + CTA-pipelining (the paper's Fig. 7).
pub fn render(rows: &[TpCtaSweepRow], opts: &TpCtaOptions, devices: &str, virtual_devices: bool) -> String {
    let g = opts.groups;
    let w = opts.width;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "== TP vs TP + CTA-pipelining (paper Fig. 6-7): Y = X A B, A and B {w} x {w} bf16, {} GPUs; medians of {} (ms)",
        2 * g,
        opts.iters
    );
    let _ = writeln!(
        s,
        "   pure TP: A column- and B row-sharded over {} ranks (cuBLAS), NCCL all-reduce over {} ranks",
        2 * g,
        2 * g
    );
    let _ = writeln!(
        s,
        "   TP + CTA: {g} group(s) of 2 GPUs; group g: GPU 2g computes H_g = X A_g [M, {}], GPU 2g+1 Y_g = H_g B_g \
         [M, {w}], CTA-pipelined ({}, one system-scope edge); NCCL all-reduce over the {g} consumer GPUs",
        w / g.max(1),
        opts.policy.name()
    );
    s.push_str(devices);
    if virtual_devices {
        let _ = writeln!(
            s,
            "*** VIRTUAL devices: single-GPU numbers, not comparable to the paper's; rows needing NCCL across GPUs are \
             marked not run ***"
        );
    }
    for r in rows {
        match &r.row {
            Ok(row) => {
                let sum = match row.sum.all_reduce_vs_host_sum {
                    Some(e) => format!(
                        "NCCL all-reduce within {e:.1e} of the host-side sum, summed Y within {:.1e} of f64 X A B",
                        row.sum.reference_error
                    ),
                    None => format!(
                        "all-reduce not run; host-side sum of the partials within {:.1e} of f64 X A B",
                        row.sum.reference_error
                    ),
                };
                let _ = writeln!(
                    s,
                    "  M = {}: TP + CTA ({}): groups bitwise equal to StreamSync, H_g and Y_g within {:.1e} of f64; {sum}",
                    r.m,
                    row.kernel.name(),
                    row.group_error
                );
                if let Err(e) = &row.all_reduce {
                    let _ = writeln!(s, "    TP + CTA all-reduce over {g} rank(s) not run: {e}");
                }
                if let Err(e) = &row.tp {
                    let _ = writeln!(s, "    pure TP over {} ranks not run: {e}", 2 * g);
                }
            }
            Err(e) => {
                let _ = writeln!(s, "  M = {}: FAILED: {e}", r.m);
            }
        }
    }
    let _ = writeln!(
        s,
        "{:>6} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>10}",
        "M", "TP comp", "TP comm", "TP total", "TPC comp", "TPC comm", "TPC total", "reduction"
    );
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for r in rows {
        let Ok(row) = &r.row else {
            let _ = writeln!(s, "{:>6} | FAILED", r.m);
            continue;
        };
        let tp = row.tp.as_ref().ok();
        let _ = writeln!(
            s,
            "{:>6} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>10}",
            r.m,
            ms(tp.map(|t| t.compute.median)),
            ms(tp.map(|t| t.all_reduce.median)),
            ms(tp.map(|t| t.total.median)),
            ms(Some(row.compute.median)),
            ms(row.all_reduce.as_ref().ok().map(|a| a.median)),
            ms(row.total.as_ref().map(|t| t.median)),
            row.reduction().map_or("-".to_string(), |v| format!("{v:+.1}%"))
        );
    }
    let _ = writeln!(
        s,
        "   TP = pure TP over {} GPUs, TPC = TP + CTA-pipelining ({g} x 2 GPUs); comp = until every GPU's GeMMs are done, \
         comm = the all-reduce with every rank ready; reduction = 1 - TPC total / TP total (positive: TPC faster)",
        2 * g
    );
    let _ =
        writeln!(
        s,
        "paper (Fig. 7; B200s, M = 4096, 8192, 16384): TP + CTA-pipelining lowers the latency against pure TP, mainly \
         by halving the all-reduce's world size; its compute gain varies with M (the text gives no numbers){}",
        if virtual_devices { "; not comparable to a virtual-device run" } else { "" }
    );
    s
}

/// The sweep as CSV (one line per M; empty cells where a variant did not run).
pub fn to_csv(rows: &[TpCtaSweepRow], opts: &TpCtaOptions, virtual_devices: bool) -> String {
    let mut s = String::from(
        "m,width,groups,gpus,virtual,kernel,policy,iters,tp_compute_ms,tp_allreduce_ms,tp_total_ms,tpc_compute_ms,\
         tpc_allreduce_ms,tpc_total_ms,reduction_pct,error\n",
    );
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for r in rows {
        let head = format!(
            "{},{},{},{},{},",
            r.m,
            opts.width,
            opts.groups,
            2 * opts.groups,
            virtual_devices
        );
        match &r.row {
            Ok(row) => {
                let tp = row.tp.as_ref().ok();
                let _ = writeln!(
                    s,
                    "{head}{},{},{},{},{},{},{},{},{},{},",
                    row.kernel.name(),
                    opts.policy.name(),
                    opts.iters,
                    f(tp.map(|t| t.compute.median)),
                    f(tp.map(|t| t.all_reduce.median)),
                    f(tp.map(|t| t.total.median)),
                    f(Some(row.compute.median)),
                    f(row.all_reduce.as_ref().ok().map(|a| a.median)),
                    f(row.total.as_ref().map(|t| t.median)),
                    row.reduction().map_or(String::new(), |v| format!("{v:.1}"))
                );
            }
            Err(e) => {
                let e = e.replace([',', '\n'], ";");
                let _ = writeln!(s, "{head},{},{},,,,,,,,{e}", opts.policy.name(), opts.iters);
            }
        }
    }
    s
}

/// Runs [`measure`] at every M of `ms` (seeded per M), keeping an M's failure as its row;
/// `each` sees every row as it finishes.
pub fn sweep(
    devices: &DeviceSet,
    ms: &[usize],
    opts: &TpCtaOptions,
    mut each: impl FnMut(&TpCtaSweepRow),
) -> Result<Vec<TpCtaSweepRow>> {
    if ms.is_empty() {
        return Err(Error::InvalidArgument("the M sweep needs at least one M".into()));
    }
    ms.iter().try_for_each(|&m| validate_tp_cta(m, opts))?;
    let mut rows = Vec::with_capacity(ms.len());
    for (i, &m) in ms.iter().enumerate() {
        let row = TpCtaSweepRow {
            m,
            row: measure(devices, m, opts, 31 + i as u64).map_err(|e| e.to_string()),
        };
        each(&row);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_pair_devices_and_shard_the_width() {
        let plans = plan_groups(8192, 2).unwrap();
        assert_eq!(
            plans,
            vec![
                GroupPlan {
                    group: 0,
                    producer: 0,
                    consumer: 1,
                    first: 0,
                    len: 4096
                },
                GroupPlan {
                    group: 1,
                    producer: 2,
                    consumer: 3,
                    first: 4096,
                    len: 4096
                },
            ]
        );
        assert_eq!(plans[1].dims(8192), [8192, 4096, 8192]);
        let four = plan_groups(8192, 4).unwrap();
        assert_eq!(
            four.iter().map(|p| (p.producer, p.consumer)).collect::<Vec<_>>(),
            [(0, 1), (2, 3), (4, 5), (6, 7)]
        );
        assert_eq!(four.iter().map(|p| p.len).sum::<usize>(), 8192);
        assert!(four.windows(2).all(|w| w[0].first + w[0].len == w[1].first));
        assert_eq!(plan_groups(512, 1).unwrap()[0].dims(512), [512, 512, 512]);
    }

    #[test]
    fn bad_groups_shapes_and_device_lists_are_refused_with_the_reason() {
        let e = plan_groups(8192, 0).unwrap_err().to_string();
        assert!(e.contains("at least one group"), "{e}");
        let e = plan_groups(1000, 3).unwrap_err().to_string();
        assert!(e.contains("W = 1000 must be a multiple of G = 3"), "{e}");
        assert!(plan_groups(0, 1).is_err());
        let opts = TpCtaOptions::default();
        assert!(validate_tp_cta(4096, &opts).is_ok());
        assert!(validate_tp_cta(0, &opts).unwrap_err().to_string().contains("M = 0"));
        let e = validate_tp_cta(
            64,
            &TpCtaOptions {
                iters: 0,
                ..opts.clone()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("iters = 0"), "{e}");
        assert!(check_device_count(&[0, 1, 2, 3], 2).is_ok());
        let e = check_device_count(&[0, 1, 2], 2).unwrap_err().to_string();
        assert!(e.contains("names 3 GPU(s)") && e.contains("needs 2G = 4"), "{e}");
    }

    #[test]
    fn the_all_reduce_runs_on_the_consumers_and_needs_one_gpu_each() {
        let plans = plan_groups(8192, 2).unwrap();
        assert_eq!(all_reduce_ordinals(&[0, 1, 2, 3], &plans), vec![1, 3]);
        assert_eq!(all_reduce_ordinals(&[4, 5, 6, 7], &plans), vec![5, 7]);
        // Virtual devices: both consumers on GPU 0.
        let virt = all_reduce_ordinals(&[0, 0, 0, 0], &plans);
        assert_eq!(virt, vec![0, 0]);
        let why = nccl_blocker(&virt).expect("two ranks on one GPU");
        assert!(why.contains("one rank per GPU"), "{why}");
        // Distinct GPUs: blocked only by a missing libnccl, with the fix.
        if let Some(why) = nccl_blocker(&[1, 3]) {
            assert!(why.contains("libnccl.so"), "{why}");
        }
    }

    #[test]
    fn the_host_sum_adds_the_partials() {
        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        assert_eq!(
            host_sum(&[bf(&[1.0, 2.5, -1.0]), bf(&[0.5, 0.5, 1.0])]),
            vec![1.5, 3.0, 0.0]
        );
        assert!(host_sum(&[]).is_empty());
    }

    #[test]
    fn the_table_splits_compute_and_communication() {
        use crate::ops::gemm_sm90::WgTile;
        let stats = |v: f64| Stats::of(&mut [v]);
        // Made-up times (no GPU): TP 3 + 1 = 4 ms, TP + CTA 2.5 + 0.5 = 3 ms.
        let row = TpCtaRow {
            m: 8192,
            kernel: MlpKernel::Path2(WgTile::T128x256),
            groups: 2,
            group_error: 2e-3,
            sum: SumCheck {
                reference_error: 4e-3,
                all_reduce_vs_host_sum: Some(1e-3),
            },
            compute: stats(2.5),
            all_reduce: Ok(stats(0.5)),
            total: Some(stats(3.0)),
            tp: Ok(TpTiming {
                ranks: 4,
                pairs: 1,
                phased: true,
                total: stats(4.0),
                compute: stats(3.0),
                all_reduce: stats(1.0),
            }),
        };
        assert_eq!(row.reduction(), Some(25.0));
        let opts = TpCtaOptions::default();
        let rows = vec![TpCtaSweepRow { m: 8192, row: Ok(row) }];
        let text = render(&rows, &opts, "", false);
        println!("{text}");
        let line = text.lines().find(|l| l.trim_start().starts_with("8192 |")).unwrap();
        for cell in ["3.000", "1.000", "4.000", "2.500", "0.500", "+25.0%"] {
            assert!(line.contains(cell), "{cell} missing in {line}");
        }
        assert!(
            text.contains("NCCL all-reduce within 1.0e-3 of the host-side sum"),
            "{text}"
        );
        let csv = to_csv(&rows, &opts, false);
        println!("{csv}");
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count(), "{csv}");
        assert!(
            lines[1]
                .starts_with("8192,8192,2,4,false,wg128x256,RowSync,5,3.0000,1.0000,4.0000,2.5000,0.5000,3.0000,25.0,"),
            "{csv}"
        );
    }

    #[test]
    fn the_report_marks_rows_that_did_not_run() {
        let opts = TpCtaOptions::default();
        let rows = vec![TpCtaSweepRow {
            m: 4096,
            row: Err("boom, twice".into()),
        }];
        let text = render(&rows, &opts, "  device 0: ...\n", true);
        assert!(text.contains("M = 4096: FAILED: boom, twice"), "{text}");
        assert!(text.contains("VIRTUAL devices"), "{text}");
        assert!(text.contains("4 GPUs"), "{text}");
        let csv = to_csv(&rows, &opts, true);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count(), "{csv}");
        assert!(lines[1].ends_with("boom; twice"), "{csv}");
    }
}
