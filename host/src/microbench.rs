//! Microbenchmarks of the protocol's primitives on the GPU (issue 7), shared by the criterion
//! benches (benches/protocol.rs, through `iter_custom`) and `cusync bench` (a one-shot table).
//!
//! Each function runs the primitive `iters` times in one launch and returns the time of *one*
//! operation, measured inside the kernel with `%globaltimer` (so launch overhead stays out)
//! unless the operation *is* a launch (the wait kernel, an empty kernel), which is timed with
//! CUDA events around it.
//!
//! The persistent-mode protocol under contention (workqueue push and pop, scoreboard posts
//! through a dependency array) is in [`queue_bench`] and [`scoreboard_bench`]; whole stages
//! (a persistent pair with the protocol on and off, the cost of tracing) in
//! [`PersistentPair`], [`StreamStageTracing`] and [`PlainGemmTracing`] (StreamSync's plain
//! GeMMs, trace off and on). [`protocol_table`] runs all of them.

use crate::cudarc::driver::{LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::runtime::{Context, ErrorSlotBuffer};
use std::time::Duration;

mod queue;
mod stages;

pub use queue::{queue_bench, scoreboard_bench, Fan, QueueBench, QueueMode, ScoreboardBench, QUEUE_ITEMS_PER_PRODUCER};
pub use stages::{
    launch_ratio, pair_stack, pair_variant_label, plain_tracing_configs, PairVariant, PersistentPair, PlainGemmTracing,
    StagePeriods, StreamPairOverhead, StreamStageTracing, TracingVariant, PAIR_M, PAIR_OVERHEAD_POLICIES, PAIR_WIDTH,
    SKINNY_TRACING_BATCH, TRACING_BATCH,
};

/// Traced launches of each side whose tile periods [`protocol_table`] compares per tile
/// ([`StreamPairOverhead::tile_periods`]). Twenty-one, in alternating order, each after an
/// untimed launch of its own side: on a card that runs under its power cap, three launches
/// (session 39, an H100) left a 5% difference between the sides that the paired whole launches
/// did not show; without the untimed launch the side that more often followed the other one
/// paid a cold first tile more often; and at B = 1 (one tile per CTA) a launch's spans move
/// together by 2-4% from launch to launch, so eleven left the policies' figures 3% apart
/// (session 40).
pub const PERIOD_LAUNCHES: usize = 21;

/// Which fence [`fence_ns`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceKind {
    /// `fence.acq_rel.gpu` (every post).
    AcqRelGpu,
    /// `fence.sc.sys` (multi-GPU posts).
    ScSys,
    /// `fence.proxy.async.global` (before TMA reads of posted data; sm_90a).
    ProxyAsync,
    /// No fence: the loop's own cost, to subtract.
    None,
}

impl FenceKind {
    fn code(self) -> u32 {
        match self {
            FenceKind::AcqRelGpu => 0,
            FenceKind::ScSys => 1,
            FenceKind::ProxyAsync => 2,
            FenceKind::None => 3,
        }
    }
}

/// `blocks` blocks of one warp each (the per-block microbenchmarks).
fn warp_blocks(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The median block's time per operation, from per-block totals of `iters` operations.
fn median_per_op(per_block: &[u64], iters: u32) -> f64 {
    let mut v: Vec<f64> = per_block.iter().map(|&ns| ns as f64).collect();
    Stats::of(&mut v).median / iters.max(1) as f64
}

fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn launch_err(what: &'static str) -> impl FnOnce(crate::cudarc::driver::DriverError) -> Error {
    Error::driver(what)
}

/// One-way post-to-wait latency between two blocks of one kernel (a persistent kernel's
/// producer and consumer CTAs): `iters` ping-pong rounds, round trip / 2.
pub fn post_to_wait_in_kernel(cx: &Context, iters: u32) -> Result<Duration> {
    let mut flags = cx.alloc_zeros::<u32>(64)?;
    let mut out = cx.alloc_zeros::<u64>(1)?;
    let err = ErrorSlotBuffer::new(cx)?;
    let f = cx.function("bench_pingpong_in_kernel")?;
    let s = cx.new_stream()?;
    let e = err.addr();
    let mut b = s.raw().launch_builder(&f);
    b.arg(flags.slice_mut()).arg(&iters).arg(out.slice_mut()).arg(&e);
    let cfg = LaunchConfig {
        grid_dim: (2, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: argument types and order match `bench_pingpong_in_kernel`; 2 blocks fit on any GPU.
    unsafe { b.launch(cfg) }.map_err(launch_err("launching bench_pingpong_in_kernel"))?;
    s.synchronize()?;
    err.check()?;
    let ns = out.download()?[0];
    Ok(Duration::from_nanos(ns / (2 * iters.max(1) as u64)))
}

/// One-way post-to-wait latency between two kernels on two streams (stream mode's producer
/// and consumer), `iters` ping-pong rounds, round trip / 2.
pub fn post_to_wait_across_kernels(cx: &Context, iters: u32) -> Result<Duration> {
    let mut flags = cx.alloc_zeros::<u32>(64)?;
    let mut out = cx.alloc_zeros::<u64>(1)?;
    let err = ErrorSlotBuffer::new(cx)?;
    let f = cx.function("bench_pingpong_kernel")?;
    let streams = [cx.new_stream()?, cx.new_stream()?];
    let e = err.addr();
    // Side 1 first: it waits, so side 0 (launched second, on another stream) must run beside it.
    for side in [1u32, 0u32] {
        let mut b = streams[side as usize].raw().launch_builder(&f);
        b.arg(&side)
            .arg(flags.slice_mut())
            .arg(&iters)
            .arg(out.slice_mut())
            .arg(&e);
        // SAFETY: argument types and order match `bench_pingpong_kernel`.
        unsafe { b.launch(one_block(128)) }.map_err(launch_err("launching bench_pingpong_kernel"))?;
    }
    for s in &streams {
        s.synchronize()?;
    }
    err.check()?;
    let ns = out.download()?[0];
    Ok(Duration::from_nanos(ns / (2 * iters.max(1) as u64)))
}

/// Time of one fence of `kind` after a store, issued by `blocks` blocks at once (the median
/// block), over `iters` store+fence pairs, minus nothing (see [`FenceKind::None`] for the
/// loop's own cost).
pub fn fence_ns(cx: &Context, kind: FenceKind, blocks: u32, iters: u32) -> Result<f64> {
    let mut words = cx.alloc_zeros::<u32>(blocks as usize * 32)?;
    let mut out = cx.alloc_zeros::<u64>(blocks as usize)?;
    let f = cx.function("bench_fence")?;
    let s = cx.new_stream()?;
    let code = kind.code();
    let mut b = s.raw().launch_builder(&f);
    b.arg(words.slice_mut()).arg(&iters).arg(&code).arg(out.slice_mut());
    // SAFETY: argument types and order match `bench_fence`; buffers hold `blocks` entries.
    unsafe { b.launch(warp_blocks(blocks)) }.map_err(launch_err("launching bench_fence"))?;
    s.synchronize()?;
    Ok(median_per_op(&out.download()?, iters))
}

/// Time of one `tile()` ticket (relaxed `atom.add` on the stage counter) when `blocks` blocks
/// take tickets at once (the median block's average over `iters` tickets).
pub fn tile_counter_ns(cx: &Context, blocks: u32, iters: u32) -> Result<f64> {
    let mut counter = cx.alloc_zeros::<u32>(32)?;
    let mut out = cx.alloc_zeros::<u64>(blocks as usize)?;
    let f = cx.function("bench_tile_counter")?;
    let s = cx.new_stream()?;
    let mut b = s.raw().launch_builder(&f);
    b.arg(counter.slice_mut()).arg(&iters).arg(out.slice_mut());
    // SAFETY: argument types and order match `bench_tile_counter`.
    unsafe { b.launch(warp_blocks(blocks)) }.map_err(launch_err("launching bench_tile_counter"))?;
    s.synchronize()?;
    let taken = counter.download()?[0];
    if taken != blocks.wrapping_mul(iters) {
        return Err(Error::Verification(format!(
            "tile counter reached {taken}, expected {}",
            blocks * iters
        )));
    }
    Ok(median_per_op(&out.download()?, iters))
}

/// Device time of `launches` back-to-back launches on one stream, each an empty kernel
/// preceded (when `with_wait_kernel`) by a wait kernel whose flag is already set: the cost the
/// wait kernel adds to a stage is the difference of the two.
pub fn launches_us(cx: &Context, launches: u32, with_wait_kernel: bool) -> Result<f64> {
    let mut flag = cx.alloc_zeros::<u32>(1)?;
    flag.fill(u32::MAX / 2)?; // every launch's target is already reached
    let err = ErrorSlotBuffer::new(cx)?;
    let (wait, empty) = (cx.function("stream_wait_kernel")?, cx.function("bench_empty")?);
    let s = cx.new_stream()?;
    let (start, end) = (cx.new_event()?, cx.new_event()?);
    let (flag_addr, err_addr, timeout) = (flag.addr(), err.addr(), 2_000_000_000u64);
    s.record(&start)?;
    for i in 0..launches {
        if with_wait_kernel {
            let (target, stage) = (i + 1, 0u32);
            let mut b = s.raw().launch_builder(&wait);
            b.arg(&flag_addr).arg(&target).arg(&stage).arg(&err_addr).arg(&timeout);
            // SAFETY: argument types and order match `stream_wait_kernel`.
            unsafe { b.launch(one_block(32)) }.map_err(launch_err("launching stream_wait_kernel"))?;
        }
        let mut b = s.raw().launch_builder(&empty);
        // SAFETY: `bench_empty` takes no arguments.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (132, 1, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map_err(launch_err("launching bench_empty"))?;
    }
    s.record(&end)?;
    s.synchronize()?;
    err.check()?;
    Ok(start.elapsed_ms(&end)? as f64 * 1e3 / launches.max(1) as f64)
}

/// Median and spread of repeated measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Median.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
}

impl Stats {
    /// Statistics of `values` (at least one).
    pub fn of(values: &mut [f64]) -> Stats {
        assert!(!values.is_empty(), "statistics of no samples");
        values.sort_by(|a, b| a.total_cmp(b));
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Stats {
            median,
            min: values[0],
            max: values[n - 1],
            samples: n,
        }
    }
}

/// `P(X >= k)` for `X ~ Binomial(n, 1/2)`: how likely one side of `n` paired rounds wins at
/// least `k` of them if neither side is faster (the sign test's tail). 1 for `k = 0`, 0 past
/// `n`. Summed in log space, so any `n` is exact to f64 rounding.
pub fn sign_tail_at_least(k: usize, n: usize) -> f64 {
    if k == 0 {
        return 1.0;
    }
    // ln C(n, j) - n ln 2, from j = n down (C(n, n) = 1): C(n, j - 1) = C(n, j) j / (n - j + 1).
    let mut ln_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for j in (k..=n).rev() {
        tail += ln_pmf.exp();
        ln_pmf += (j as f64).ln() - ((n - j + 1) as f64).ln();
    }
    tail.min(1.0)
}

/// Two-sided exact sign test over `n` paired rounds of which `below` went one way (ties left
/// out beforehand): how likely a split at least this uneven is if neither side is faster.
pub fn sign_test_two_sided(below: usize, n: usize) -> f64 {
    let below = below.min(n);
    (2.0 * sign_tail_at_least(below.max(n - below), n)).min(1.0)
}

/// Runs `f` `samples` times (after one warm-up) and summarizes.
pub fn repeat(samples: usize, mut f: impl FnMut() -> Result<f64>) -> Result<Stats> {
    f()?;
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        v.push(f()?);
    }
    Ok(Stats::of(&mut v))
}

/// Runs `f`, which measures `outputs` quantities at once, `samples` times (after one warm-up)
/// and summarizes each quantity.
pub fn repeat_many(samples: usize, outputs: usize, mut f: impl FnMut() -> Result<Vec<f64>>) -> Result<Vec<Stats>> {
    f()?;
    let mut v = vec![Vec::with_capacity(samples); outputs];
    for _ in 0..samples.max(1) {
        let got = f()?;
        if got.len() != outputs {
            return Err(Error::InvalidArgument(format!(
                "a measurement returned {} values, {outputs} expected",
                got.len()
            )));
        }
        for (column, x) in v.iter_mut().zip(got) {
            column.push(x);
        }
    }
    Ok(v.iter_mut().map(|column| Stats::of(column)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_test_matches_the_binomial_by_hand() {
        // n = 5: P(X >= 5) = 1/32, P(X >= 4) = 6/32, P(X >= 0) = 1, nothing past n.
        assert!((sign_tail_at_least(5, 5) - 1.0 / 32.0).abs() < 1e-15);
        assert!((sign_tail_at_least(4, 5) - 6.0 / 32.0).abs() < 1e-15);
        assert_eq!(sign_tail_at_least(0, 5), 1.0);
        assert_eq!(sign_tail_at_least(6, 5), 0.0);
        // n = 11: P(X >= 9) = (1 + 11 + 55) / 2048.
        assert!((sign_tail_at_least(9, 11) - 67.0 / 2048.0).abs() < 1e-15);
        // Two-sided: 2 of 11 below is as uneven as 9 of 11; an even split is no evidence.
        assert!((sign_test_two_sided(2, 11) - 134.0 / 2048.0).abs() < 1e-15);
        assert_eq!(sign_test_two_sided(9, 11), sign_test_two_sided(2, 11));
        assert!((sign_test_two_sided(10, 21) - 1.0).abs() < 1e-12);
        assert_eq!(sign_test_two_sided(0, 0), 1.0);
        // Large n stays finite and symmetric (no underflow of 2^-n).
        let p = sign_test_two_sided(600, 1000);
        assert!(p > 0.0 && p < 1e-9, "{p}");
        assert!((sign_tail_at_least(500, 1000) + sign_tail_at_least(501, 1000) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn stats_take_the_median_and_the_range() {
        let s = Stats::of(&mut [5.0, 1.0, 3.0]);
        assert_eq!((s.median, s.min, s.max, s.samples), (3.0, 1.0, 5.0, 3));
        assert_eq!(Stats::of(&mut [4.0, 1.0, 2.0, 3.0]).median, 2.5);
    }
}

/// The paper figures each primitive is compared with, in microseconds.
pub mod paper {
    /// CTA-pipelining: epilogue with fence, per CTA (classical and warp-specialized kernels).
    pub const EPILOGUE_WITH_FENCE_US: f64 = 6.0;
    /// CTA-pipelining: prologue workqueue fetch.
    pub const PROLOGUE_FETCH_US: f64 = 1.5;
    /// CTA-pipelining: broadcast of the fetched tile across the CTA group.
    pub const BROADCAST_US: f64 = 0.5;
    /// CuSync: a kernel launch.
    pub const KERNEL_LAUNCH_US: f64 = 6.0;
}

/// Runs every GPU microbenchmark `samples` times and renders a plain-text table of medians and
/// spreads (`cusync bench`). `progress` is called with each row's name before it runs.
pub fn protocol_table(cx: &Context, samples: usize, mut progress: impl FnMut(&str)) -> Result<String> {
    use std::fmt::Write;
    let mut rows: Vec<Row> = Vec::new();
    let mut row = |name: &str, unit: &'static str, paper: String, f: &mut dyn FnMut() -> Result<f64>| -> Result<()> {
        progress(name);
        rows.push((name.to_string(), repeat(samples, f)?, unit, paper));
        Ok(())
    };
    let iters = 2000;
    row("post->wait, one kernel (one-way)", "us", "-".into(), &mut || {
        Ok(post_to_wait_in_kernel(cx, iters)?.as_secs_f64() * 1e6)
    })?;
    row(
        "post->wait, two kernels/streams (one-way)",
        "us",
        "-".into(),
        &mut || Ok(post_to_wait_across_kernels(cx, iters)?.as_secs_f64() * 1e6),
    )?;
    for (kind, name) in [
        (FenceKind::None, "store loop, no fence"),
        (FenceKind::AcqRelGpu, "store + fence.acq_rel.gpu"),
        (FenceKind::ScSys, "store + fence.sc.sys"),
        (FenceKind::ProxyAsync, "store + fence.proxy.async.global"),
    ] {
        for blocks in [1u32, 132] {
            row(&format!("{name} ({blocks} blocks)"), "ns", "-".into(), &mut || {
                fence_ns(cx, kind, blocks, 10_000)
            })?;
        }
    }
    for blocks in [1u32, 8, 32, 132] {
        row(
            &format!("tile() ticket, {blocks} blocks contending"),
            "ns",
            "-".into(),
            &mut || tile_counter_ns(cx, blocks, 2000),
        )?;
    }
    let launch_paper = format!("{:.1} (launch)", paper::KERNEL_LAUNCH_US);
    row("empty kernel, back to back", "us", launch_paper.clone(), &mut || {
        launches_us(cx, 200, false)
    })?;
    row("wait kernel + empty kernel", "us", launch_paper, &mut || {
        launches_us(cx, 200, true)
    })?;
    let mut derived = Vec::new();
    protocol_rows(cx, samples, &mut progress, &mut rows, &mut derived)?;
    let mut out = String::new();
    let d = cx.info();
    let _ = writeln!(
        out,
        "cusync protocol microbenchmarks on {} ({} SMs), {samples} samples each",
        d.name, d.sm_count
    );
    let _ = writeln!(
        out,
        "{:<60} {:>10} {:>10} {:>10}  {:>5}  paper",
        "primitive", "median", "min", "max", "unit"
    );
    for (name, s, unit, paper) in &rows {
        let _ = writeln!(
            out,
            "{name:<60} {:>10.3} {:>10.3} {:>10.3}  {unit:>5}  {paper}",
            s.median, s.min, s.max
        );
    }
    for line in derived {
        let _ = writeln!(out, "{line}");
    }
    Ok(out)
}

/// One table row: name, statistics, unit, the paper's figure.
type Row = (String, Stats, &'static str, String);

/// The persistent-mode protocol rows (workqueue, scoreboard), the persistent stage pair with
/// the protocol on and off, and the cost of tracing; `derived` gets ratios computed from the
/// medians. Every correctness fact a measurement carries is checked (an error stops the table).
fn protocol_rows(
    cx: &Context,
    samples: usize,
    progress: &mut dyn FnMut(&str),
    rows: &mut Vec<Row>,
    derived: &mut Vec<String>,
) -> Result<()> {
    let mut measure =
        |names: &[(String, &'static str, String)], f: &mut dyn FnMut() -> Result<Vec<f64>>| -> Result<Vec<f64>> {
            progress(&names[0].0);
            let stats = repeat_many(samples, names.len(), f)?;
            let medians = stats.iter().map(|s| s.median).collect();
            for ((name, unit, paper), s) in names.iter().zip(stats) {
                rows.push((name.clone(), s, unit, paper.clone()));
            }
            Ok(medians)
        };
    let fetch = format!("{:.1} (prologue fetch)", paper::PROLOGUE_FETCH_US);
    for (n, mode) in [
        (1u32, QueueMode::Phased),
        (8, QueueMode::Phased),
        (32, QueueMode::Phased),
        (132, QueueMode::Phased),
        (1, QueueMode::Racing),
        (132, QueueMode::Racing),
    ] {
        let names = match mode {
            QueueMode::Phased => [
                (format!("workqueue push, {n} producers"), "ns", "-".to_string()),
                (
                    format!("workqueue pop, {n} consumers (after every push)"),
                    "ns",
                    fetch.clone(),
                ),
            ],
            QueueMode::Racing => [
                (
                    format!("workqueue push, {n} producers racing {n} consumers"),
                    "ns",
                    "-".to_string(),
                ),
                (
                    format!("workqueue pop, {n} consumers racing (incl. wait)"),
                    "ns",
                    fetch.clone(),
                ),
            ],
        };
        measure(&names, &mut || {
            let q = queue_bench(cx, n, n, mode)?;
            q.verify()?;
            Ok(vec![q.push_ns, q.pop_ns])
        })?;
    }
    let epilogue = format!("{:.1} (epilogue w/ fence)", paper::EPILOGUE_WITH_FENCE_US);
    for fan in [Fan::OneToOne, Fan::Row] {
        for blocks in [1u32, 132] {
            let name = format!("scoreboard post, {}, {blocks} blocks", fan.name());
            measure(&[(name, "ns", epilogue.clone())], &mut || {
                let b = scoreboard_bench(cx, fan, blocks)?;
                b.verify()?;
                Ok(vec![b.post_ns])
            })?;
        }
    }

    let stack = pair_stack(cx)?;
    let mut pair = PersistentPair::new(cx, &stack)?;
    let label = format!("persistent pair [{PAIR_M},{PAIR_WIDTH}]x[{PAIR_WIDTH},{PAIR_WIDTH}]x2 bf16");
    let variants = [
        (PairVariant::NoProtocol, "no protocol code (protocol off)"),
        (PairVariant::NoDependencies, "protocol on, no real dependency"),
        (PairVariant::Pipelined, "pipelined RowSync, trace off"),
        (PairVariant::PipelinedTraced, "pipelined RowSync, trace on"),
    ];
    let names: Vec<_> = variants
        .iter()
        .map(|(_, what)| (format!("{label}: {what}"), "us", "-".to_string()))
        .collect();
    let p = measure(&names, &mut || variants.iter().map(|&(v, _)| pair.time_us(v)).collect())?;
    derived.push(format!(
        "persistent pair ({} CTAs, {} tiles): protocol overhead (no dependency / no protocol) {:+.2}%, \
         pipelined / no protocol {:+.2}%, tracing on / off {:+.2}%",
        pair.ctas(),
        pair.tiles(),
        (p[1] / p[0] - 1.0) * 100.0,
        (p[2] / p[0] - 1.0) * 100.0,
        (p[3] / p[2] - 1.0) * 100.0
    ));
    drop(pair);
    drop(stack);

    // The path-2 stage (B = 1024) and the skinny stage (B = 1).
    for batch in [TRACING_BATCH, SKINNY_TRACING_BATCH] {
        let mut tracing = StreamStageTracing::at_batch(cx, batch)?;
        let label = format!(
            "stream stage GeMM1 B={batch} {} ({} tiles)",
            tracing.kernel_name(),
            tracing.tiles()
        );
        let variants = [
            (TracingVariant::NoHooks, "NoHooks kernel"),
            (TracingVariant::TraceOff, "hooks, trace off"),
            (TracingVariant::TraceOn, "hooks, trace on"),
        ];
        let names: Vec<_> = variants
            .iter()
            .map(|(_, what)| (format!("{label}: {what}"), "us", "-".to_string()))
            .collect();
        let t = measure(&names, &mut || {
            variants.iter().map(|&(v, _)| tracing.time_us(v)).collect()
        })?;
        derived.push(format!(
            "stream stage B={batch} {}: hooks with tracing off / NoHooks {:+.2}%, tracing on / off {:+.2}%",
            tracing.kernel_name(),
            (t[1] / t[0] - 1.0) * 100.0,
            (t[2] / t[1] - 1.0) * 100.0
        ));
    }

    // The MLP's two GeMMs with the whole protocol and nothing to wait for (the serialized
    // graph) against StreamSync, as interleaved pairs: each sample's own ratio, its order
    // alternating, so drift between samples cancels.
    for batch in [TRACING_BATCH, SKINNY_TRACING_BATCH] {
        let mut pair = StreamPairOverhead::at_batch(cx, batch)?;
        let label = format!("MLP B={batch} {} ({} tiles)", pair.kernel_name(), pair.tiles());
        for policy in PAIR_OVERHEAD_POLICIES {
            pair.verify(policy)?;
            let names = [
                (format!("{label}: StreamSync"), "us", "-".to_string()),
                (
                    format!("{label}: serialized {}", pair_variant_label(policy)),
                    "us",
                    "-".to_string(),
                ),
                (
                    format!("{label}: serialized {} / StreamSync - 1", policy.name()),
                    "%",
                    "-".to_string(),
                ),
            ];
            let mut calls = 0usize;
            let t = measure(&names, &mut || {
                calls += 1;
                let (plain, hooked) = pair.time_pair_us(policy, calls.is_multiple_of(2))?;
                Ok(vec![plain, hooked, (hooked / plain - 1.0) * 100.0])
            })?;
            derived.push(format!(
                "MLP B={batch} {}: the protocol ({}) / StreamSync {:+.2}% (paired median)",
                pair.kernel_name(),
                pair_variant_label(policy),
                t[2]
            ));
            // Per tile: the steady-state periods of traced launches (issue 7's "overhead per
            // tile as a fraction of the tile time", without the launch and the tail); where
            // every CTA runs one tile (B = 1), the tiles' spans from the CTA's entry.
            let periods = pair.tile_periods(policy, PERIOD_LAUNCHES)?;
            derived.push(format!(
                "MLP B={batch} {}: per tile, median CTA period (or one-tile span), {} / \
                 StreamSync, {PERIOD_LAUNCHES} traced launches each: {}",
                pair.kernel_name(),
                pair_variant_label(policy),
                periods.describe()
            ));
        }
    }

    // StreamSync's plain kernels, trace off and on side by side (each sample times both).
    let mut kernels = Vec::new();
    for cfg in plain_tracing_configs() {
        let mut plain = PlainGemmTracing::new(cx, cfg)?;
        if kernels.contains(&plain.kernel_name()) {
            continue; // no path 2 here: both configurations run path 1's kernel
        }
        kernels.push(plain.kernel_name());
        let label = format!("plain GeMM1 B={TRACING_BATCH} {}", plain.label());
        let names: Vec<_> = ["trace off", "trace on"]
            .iter()
            .map(|what| (format!("{label}: {what}"), "us", "-".to_string()))
            .collect();
        let t = measure(&names, &mut || Ok(vec![plain.time_us(false)?, plain.time_us(true)?]))?;
        derived.push(format!(
            "plain GeMM `{}` ({} tiles): tracing on / off {:.4}x ({:+.2}%)",
            plain.kernel_name(),
            plain.tiles(),
            t[1] / t[0],
            (t[1] / t[0] - 1.0) * 100.0
        ));
    }
    Ok(())
}
