//! Tensor parallelism, Megatron-LM style (the CTA-pipelining paper's TP baseline, section
//! IV-B): for `Y = (X A) B` with `A [K, F]` and `B [F, N]`, rank `r` of `T` holds the column
//! block `A[:, r F/T .. (r+1) F/T]` (column-parallel GeMM 1) and the row block
//! `B[r F/T .. (r+1) F/T, :]` (row-parallel GeMM 2), computes its partial `Y_r = (X A_r) B_r`
//! with cuBLAS, and an NCCL all-reduce sums the partials into every rank's `Y`. `X` is
//! replicated. The time is split into computation (the GeMMs) and communication (the
//! all-reduces).
//!
//! A *stack* of `P` such pairs (`2P` layers, the paper's Table I: "an All-Reduce every two
//! layers") feeds each pair's all-reduced `Y` into the next pair as its `X` (so `N = K`).
//!
//! Two ways to time a run ([`TensorParallel::time`], [`TensorParallel::time_phased`]):
//!
//! * *natural*: every rank runs as soon as it can; the computation is rank 0's GeMMs and the
//!   communication what follows on rank 0 until the all-reduce ends everywhere (so it includes
//!   waiting for slower ranks);
//! * *phased*: a device-side barrier (events) before and after each all-reduce, so the
//!   computation ends when every rank's GeMMs have, and the communication is the all-reduce
//!   alone with every rank ready (the split the TP + CTA-pipelining comparison uses for both
//!   sides, [`crate::multigpu::tp_cta`]).
//!
//! NCCL puts one rank per GPU, so on one GPU this runs with one rank: cuBLAS back to back and
//! a one-rank all-reduce (a copy), which exercises the whole NCCL path.

use super::cublas::Cublas;
use super::nccl::{nccl_present, nccl_unavailable_reason, validate_ranks, NcclGroup};
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::ops::gemm::GemmConfig;
use crate::runtime::{Context, DeviceBuffer, Event, Stream};
use crate::verify::relative_error;
use half::bf16;
use rand::{Rng, SeedableRng};

/// The two-layer problem: `Y[m, n] = (X[m, k] A[k, f]) B[f, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TpShape {
    /// Rows of X and Y.
    pub m: usize,
    /// Columns of X, rows of A.
    pub k: usize,
    /// Columns of A, rows of B (the sharded dimension).
    pub f: usize,
    /// Columns of B and Y.
    pub n: usize,
}

impl TpShape {
    /// Floating-point operations of both GeMMs (all ranks together).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.f as f64 * (self.k + self.n) as f64
    }
}

/// Rank `rank`'s slice `(first, len)` of the sharded dimension `f` over `ranks` ranks
/// (Megatron requires `ranks` to divide `f`).
pub fn shard(f: usize, ranks: usize, rank: usize) -> Result<(usize, usize)> {
    if ranks == 0 || rank >= ranks {
        return Err(Error::InvalidArgument(format!(
            "rank {rank} of {ranks}: need 0 <= rank < ranks"
        )));
    }
    if !f.is_multiple_of(ranks) {
        return Err(Error::InvalidArgument(format!(
            "tensor parallelism over {ranks} ranks needs the sharded dimension F = {f} to be a multiple of {ranks}"
        )));
    }
    let len = f / ranks;
    Ok((rank * len, len))
}

/// Checks the shape (every size at least 1) and the sharding.
pub fn validate_tp(shape: TpShape, ranks: usize) -> Result<()> {
    let TpShape { m, k, f, n } = shape;
    if [m, k, f, n].contains(&0) {
        return Err(Error::InvalidArgument(format!(
            "tensor-parallel sizes must be at least 1: M={m}, K={k}, F={f}, N={n}"
        )));
    }
    shard(f, ranks, 0).map(|_| ())
}

/// Checks a stack of `pairs` two-layer blocks: [`validate_tp`], at least one pair, and with
/// more than one pair `N = K` (each pair's output is the next pair's input).
pub fn validate_tp_stack(shape: TpShape, ranks: usize, pairs: usize) -> Result<()> {
    validate_tp(shape, ranks)?;
    if pairs == 0 {
        return Err(Error::InvalidArgument(
            "a tensor-parallel stack needs at least one layer pair".into(),
        ));
    }
    if pairs > 1 && shape.n != shape.k {
        return Err(Error::InvalidArgument(format!(
            "a stack of {pairs} tensor-parallel layer pairs feeds each pair's output [M, N = {}] into the next pair's \
             input [M, K = {}]: N must equal K",
            shape.n, shape.k
        )));
    }
    Ok(())
}

/// Tensor-parallel layer pairs for `layers` layers (Megatron: column- then row-parallel, one
/// all-reduce per pair); an odd count is refused with the reason.
pub fn tp_pairs(layers: usize) -> Result<usize> {
    if layers == 0 || !layers.is_multiple_of(2) {
        return Err(Error::InvalidArgument(format!(
            "Megatron tensor parallelism pairs layers (column-parallel, then row-parallel, an all-reduce every two \
             layers); {layers} layer(s) do not make whole pairs"
        )));
    }
    Ok(layers / 2)
}

/// Columns `first..first + len` of the row-major `[rows, cols]` matrix `a`, as a row-major
/// `[rows, len]` matrix (a column-parallel shard of a weight).
pub fn column_block<T: Copy>(a: &[T], rows: usize, cols: usize, first: usize, len: usize) -> Result<Vec<T>> {
    if a.len() != rows * cols {
        return Err(Error::InvalidArgument(format!(
            "column block: the matrix has {} elements, not {rows} x {cols}",
            a.len()
        )));
    }
    if first + len > cols {
        return Err(Error::InvalidArgument(format!(
            "column block {first}..{} past the matrix's {cols} columns",
            first + len
        )));
    }
    Ok((0..rows)
        .flat_map(|r| a[r * cols + first..r * cols + first + len].iter().copied())
        .collect())
}

/// Rows `first..first + len` of the row-major `[rows, cols]` matrix `b` (a row-parallel shard
/// of a weight): a slice of it.
pub fn row_block<T>(b: &[T], cols: usize, first: usize, len: usize) -> Result<&[T]> {
    b.get(first * cols..(first + len) * cols).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "row block {first}..{} past the matrix's {} rows",
            first + len,
            b.len() / cols.max(1)
        ))
    })
}

/// Row `r` of the f64 reference `(X A) B` (no intermediate rounding) for `X [m, k]`,
/// `A [k, f]`, `B [f, n]` (row-major bf16).
pub fn reference_row(shape: TpShape, x: &[bf16], a: &[bf16], b: &[bf16], r: usize) -> Vec<f64> {
    let TpShape { k, f, n, .. } = shape;
    let mut h = vec![0f64; f];
    for (kk, xv) in x[r * k..(r + 1) * k].iter().enumerate() {
        let xv = xv.to_f64();
        for (acc, av) in h.iter_mut().zip(&a[kk * f..(kk + 1) * f]) {
            *acc += xv * av.to_f64();
        }
    }
    let mut y = vec![0f64; n];
    for (ff, hv) in h.iter().enumerate() {
        for (acc, bv) in y.iter_mut().zip(&b[ff * n..(ff + 1) * n]) {
            *acc += hv * bv.to_f64();
        }
    }
    y
}

/// A device-side barrier across GPUs: every stream of `ranks` records an event, the first
/// stream waits for all of them and records `at` (an event of `ranks[0]`'s context), and every
/// other stream waits for `at`. After it, `at` marks the moment every stream got there.
/// Asynchronous (only stream waits, no host synchronization).
pub fn barrier(ranks: &[(&Context, &Stream)], at: &Event) -> Result<()> {
    let Some(&(_, first)) = ranks.first() else {
        return Err(Error::InvalidArgument("a barrier over no stream".into()));
    };
    for &(cx, s) in &ranks[1..] {
        let done = cx.new_event()?;
        s.record(&done)?;
        first.wait(&done)?;
    }
    first.record(at)?;
    for &(_, s) in &ranks[1..] {
        s.wait(at)?;
    }
    Ok(())
}

/// One tensor-parallel run's times (ms), medians over the timed runs.
#[derive(Clone, Debug, PartialEq)]
pub struct TpTiming {
    /// Ranks (GPUs).
    pub ranks: usize,
    /// Layer pairs (all-reduces per run).
    pub pairs: usize,
    /// Whether barriers split computation and communication ([`TensorParallel::time_phased`]).
    pub phased: bool,
    /// Start to the end of the last all-reduce on every rank.
    pub total: Stats,
    /// The GeMMs: rank 0's (natural timing) or every rank's (phased), summed over the pairs.
    pub compute: Stats,
    /// The all-reduces (see [`TpTiming::compute`]), summed over the pairs.
    pub all_reduce: Stats,
}

struct Rank<'a> {
    cx: &'a Context,
    stream: Stream,
    blas: Cublas,
    x: DeviceBuffer<bf16>,
    /// Per pair, the column block of A and the row block of B.
    a: Vec<DeviceBuffer<bf16>>,
    b: Vec<DeviceBuffer<bf16>>,
    h: DeviceBuffer<bf16>,
    partial: DeviceBuffer<bf16>,
    /// Per pair, the all-reduced output.
    y: Vec<DeviceBuffer<bf16>>,
}

/// The tensor-parallel two-layer GeMM (or stack of them) over the GPUs of `contexts` (one
/// rank each).
pub struct TensorParallel<'a> {
    shape: TpShape,
    ranks: Vec<Rank<'a>>,
    group: NcclGroup,
    host_x: Vec<bf16>,
    host_a: Vec<Vec<bf16>>,
    host_b: Vec<Vec<bf16>>,
}

fn random_bf16(rng: &mut impl Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
        .collect()
}

/// Random bf16 operands of one pair's problem, seeded: `X` in `[-1, 1)`, `A` and `B` scaled by
/// `1.7 / sqrt(fan-in)` (activations stay O(1)). Returned as `(X, A, B)`.
pub fn random_operands(shape: TpShape, seed: u64) -> (Vec<bf16>, Vec<bf16>, Vec<bf16>) {
    let TpShape { m, k, f, n } = shape;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let x = random_bf16(&mut rng, m * k, 1.0);
    let a = random_bf16(&mut rng, k * f, 1.7 / (k as f32).sqrt());
    let b = random_bf16(&mut rng, f * n, 1.7 / (f as f32).sqrt());
    (x, a, b)
}

impl<'a> TensorParallel<'a> {
    /// Rank `r` on `contexts[r]` (distinct GPUs): random X, A, B (seeded), sharded and
    /// uploaded; a cuBLAS handle and the NCCL communicator on each rank's stream. Refuses bad
    /// shapes, ranks sharing a GPU and a missing NCCL before any GPU work.
    pub fn new(contexts: &[&'a Context], shape: TpShape, seed: u64) -> Result<Self> {
        Self::stack(contexts, shape, 1, seed)
    }

    /// As [`TensorParallel::new`] for a stack of `pairs` layer pairs (`2 pairs` layers, an
    /// all-reduce after each pair; `N = K`), each pair with its own random weights.
    pub fn stack(contexts: &[&'a Context], shape: TpShape, pairs: usize, seed: u64) -> Result<Self> {
        validate_tp_stack(shape, contexts.len(), pairs)?;
        validate_ranks(&contexts.iter().map(|c| c.info().ordinal).collect::<Vec<_>>())?;
        if !nccl_present() {
            // Before generating operands that would go unused.
            return Err(Error::InvalidArgument(nccl_unavailable_reason()));
        }
        let TpShape { m, k, f, n } = shape;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let x = random_bf16(&mut rng, m * k, 1.0);
        let (mut a, mut b) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
        for _ in 0..pairs {
            a.push(random_bf16(&mut rng, k * f, 1.7 / (k as f32).sqrt()));
            b.push(random_bf16(&mut rng, f * n, 1.7 / (f as f32).sqrt()));
        }
        Self::from_host(contexts, shape, x, a, b)
    }

    /// On given operands: `x` `[m, k]`, per pair `a[p]` `[k, f]` and `b[p]` `[f, n]` (row-major,
    /// unsharded; kept on the host for [`TensorParallel::check_rows`]). Checks the lengths, the
    /// shape and the ranks before any GPU work.
    pub fn from_host(
        contexts: &[&'a Context],
        shape: TpShape,
        x: Vec<bf16>,
        a: Vec<Vec<bf16>>,
        b: Vec<Vec<bf16>>,
    ) -> Result<Self> {
        let t = contexts.len();
        let pairs = a.len();
        validate_tp_stack(shape, t, pairs)?;
        validate_ranks(&contexts.iter().map(|c| c.info().ordinal).collect::<Vec<_>>())?;
        let TpShape { m, k, f, n } = shape;
        if x.len() != m * k {
            return Err(Error::InvalidArgument(format!(
                "tensor parallelism: X has {} elements, not M x K = {m} x {k}",
                x.len()
            )));
        }
        if b.len() != pairs {
            return Err(Error::InvalidArgument(format!(
                "tensor parallelism: {pairs} A weight(s) but {} B weight(s)",
                b.len()
            )));
        }
        for (p, (ap, bp)) in a.iter().zip(&b).enumerate() {
            if ap.len() != k * f || bp.len() != f * n {
                return Err(Error::InvalidArgument(format!(
                    "tensor parallelism, pair {p}: A has {} elements (K x F = {k} x {f}), B {} (F x N = {f} x {n})",
                    ap.len(),
                    bp.len()
                )));
            }
        }
        let streams = contexts.iter().map(|c| c.new_stream()).collect::<Result<Vec<_>>>()?;
        let group = NcclGroup::new(&streams)?;
        let mut ranks = Vec::with_capacity(t);
        let nan = bf16::from_f32(f32::NAN);
        for (r, (cx, stream)) in contexts.iter().zip(streams).enumerate() {
            let (first, len) = shard(f, t, r)?;
            let mut ra = Vec::with_capacity(pairs);
            let mut rb = Vec::with_capacity(pairs);
            let mut ry = Vec::with_capacity(pairs);
            for p in 0..pairs {
                ra.push(cx.upload(&column_block(&a[p], k, f, first, len)?)?);
                rb.push(cx.upload(row_block(&b[p], n, first, len)?)?);
                ry.push(cx.upload(&vec![nan; m * n])?);
            }
            ranks.push(Rank {
                cx,
                blas: Cublas::new(&stream)?,
                stream,
                x: cx.upload(&x)?,
                a: ra,
                b: rb,
                h: cx.upload(&vec![nan; m * len])?,
                partial: cx.upload(&vec![nan; m * n])?,
                y: ry,
            });
        }
        Ok(Self {
            shape,
            ranks,
            group,
            host_x: x,
            host_a: a,
            host_b: b,
        })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// Layer pairs (all-reduces per run).
    pub fn pairs(&self) -> usize {
        self.host_a.len()
    }

    /// The problem (one pair's).
    pub fn shape(&self) -> TpShape {
        self.shape
    }

    /// Queues both GeMMs of pair `p` on every rank (asynchronous).
    fn enqueue_gemms(&mut self, p: usize) -> Result<()> {
        let TpShape { m, k, n, .. } = self.shape;
        let len = self.shape.f / self.ranks.len();
        let cfg1 = GemmConfig::new(m, len, k);
        let cfg2 = GemmConfig::new(m, n, len);
        for rank in &mut self.ranks {
            let input = if p == 0 { &rank.x } else { &rank.y[p - 1] };
            rank.blas.gemm(&cfg1, input, &rank.a[p], &mut rank.h)?;
            rank.blas.gemm(&cfg2, &rank.h, &rank.b[p], &mut rank.partial)?;
        }
        Ok(())
    }

    /// Queues pair `p`'s all-reduce of every rank's partial into its `y[p]` (asynchronous).
    fn enqueue_all_reduce(&mut self, p: usize) -> Result<()> {
        let (send, mut recv): (Vec<&DeviceBuffer<bf16>>, Vec<&mut DeviceBuffer<bf16>>) =
            self.ranks.iter_mut().map(|r| (&r.partial, &mut r.y[p])).unzip();
        self.group.all_reduce_sum_bf16(&send, &mut recv)
    }

    fn barrier(&self, at: &Event) -> Result<()> {
        let ranks: Vec<(&Context, &Stream)> = self.ranks.iter().map(|r| (r.cx, &r.stream)).collect();
        barrier(&ranks, at)
    }

    /// Runs once; returns `(total, compute, all-reduce)` milliseconds (see the module docs for
    /// what `phased` changes).
    fn run_once(&mut self, phased: bool) -> Result<(f64, f64, f64)> {
        let cx0 = self.ranks[0].cx;
        let pairs = self.pairs();
        let start = cx0.new_event()?;
        let gemms_done = (0..pairs).map(|_| cx0.new_event()).collect::<Result<Vec<_>>>()?;
        let reduced = (0..pairs).map(|_| cx0.new_event()).collect::<Result<Vec<_>>>()?;
        self.ranks[0].stream.record(&start)?;
        for r in &self.ranks[1..] {
            r.stream.wait(&start)?;
        }
        for p in 0..pairs {
            self.enqueue_gemms(p)?;
            if phased {
                self.barrier(&gemms_done[p])?;
            } else {
                self.ranks[0].stream.record(&gemms_done[p])?;
            }
            self.enqueue_all_reduce(p)?;
            if phased || p + 1 == pairs {
                self.barrier(&reduced[p])?;
            } else {
                self.ranks[0].stream.record(&reduced[p])?;
            }
        }
        self.ranks.iter().try_for_each(|r| r.stream.synchronize())?;
        let (mut compute, mut comm) = (0.0, 0.0);
        let mut from = &start;
        for p in 0..pairs {
            compute += from.elapsed_ms(&gemms_done[p])? as f64;
            comm += gemms_done[p].elapsed_ms(&reduced[p])? as f64;
            from = &reduced[p];
        }
        Ok((start.elapsed_ms(&reduced[pairs - 1])? as f64, compute, comm))
    }

    /// Runs once (natural timing) and returns `(total, compute, all-reduce)` milliseconds.
    pub fn run(&mut self) -> Result<(f64, f64, f64)> {
        self.run_once(false)
    }

    fn time_with(&mut self, phased: bool, warmup: usize, iters: usize) -> Result<TpTiming> {
        for _ in 0..warmup {
            self.run_once(phased)?;
        }
        let (mut total, mut compute, mut comm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..iters.max(1) {
            let (t, c, a) = self.run_once(phased)?;
            total.push(t);
            compute.push(c);
            comm.push(a);
        }
        Ok(TpTiming {
            ranks: self.ranks.len(),
            pairs: self.pairs(),
            phased,
            total: Stats::of(&mut total),
            compute: Stats::of(&mut compute),
            all_reduce: Stats::of(&mut comm),
        })
    }

    /// `warmup` untimed runs, then the medians of `iters` timed ones (natural timing).
    pub fn time(&mut self, warmup: usize, iters: usize) -> Result<TpTiming> {
        self.time_with(false, warmup, iters)
    }

    /// As [`TensorParallel::time`] with barriers around every all-reduce: computation until
    /// every rank's GeMMs are done, communication the all-reduce with every rank ready.
    pub fn time_phased(&mut self, warmup: usize, iters: usize) -> Result<TpTiming> {
        self.time_with(true, warmup, iters)
    }

    /// Every rank's final `Y` (the last pair's), downloaded.
    pub fn outputs(&self) -> Result<Vec<Vec<bf16>>> {
        let last = self.pairs() - 1;
        self.ranks.iter().map(|r| r.y[last].download()).collect()
    }

    /// Worst relative error of rows `rows` of every rank's output of every pair against the
    /// f64 reference `(X A) B` of the unsharded weights (no intermediate rounding), pair `p`'s
    /// reference computed from rank 0's output of pair `p - 1` (so pairs are checked
    /// separately).
    pub fn check_rows(&self, rows: &[usize]) -> Result<f64> {
        let m = self.shape.m;
        if let Some(&r) = rows.iter().find(|&&r| r >= m) {
            return Err(Error::InvalidArgument(format!("row {r} past M = {m}")));
        }
        let n = self.shape.n;
        let mut worst = 0.0f64;
        let mut input = self.host_x.clone();
        for p in 0..self.pairs() {
            let outputs: Vec<Vec<bf16>> = self.ranks.iter().map(|r| r.y[p].download()).collect::<Result<_>>()?;
            for &r in rows {
                let want = reference_row(self.shape, &input, &self.host_a[p], &self.host_b[p], r);
                for out in &outputs {
                    let got: Vec<f64> = out[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect();
                    worst = worst.max(relative_error(&got, &want));
                }
            }
            input = outputs.into_iter().next().unwrap_or_default();
        }
        Ok(worst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_f_evenly_and_refuse_remainders() {
        assert_eq!(shard(8192, 2, 1).unwrap(), (4096, 4096));
        assert_eq!(shard(8192, 8, 0).unwrap(), (0, 1024));
        assert_eq!(shard(10, 1, 0).unwrap(), (0, 10));
        let e = shard(10, 4, 0).unwrap_err().to_string();
        assert!(e.contains("multiple of 4"), "{e}");
        assert!(shard(8, 2, 2).is_err());
        assert!(shard(8, 0, 0).is_err());
        let shape = TpShape { m: 4, k: 8, f: 8, n: 8 };
        assert!(validate_tp(shape, 2).is_ok());
        assert!(validate_tp(TpShape { m: 0, ..shape }, 1).is_err());
        assert_eq!(shape.flops(), 2.0 * 4.0 * 8.0 * 16.0);
    }

    #[test]
    fn stacks_pair_layers_and_chain_n_into_k() {
        assert_eq!(tp_pairs(2).unwrap(), 1);
        assert_eq!(tp_pairs(8).unwrap(), 4);
        for odd in [0, 1, 3] {
            let e = tp_pairs(odd).unwrap_err().to_string();
            assert!(e.contains("whole pairs"), "{e}");
        }
        let square = TpShape { m: 4, k: 8, f: 8, n: 8 };
        assert!(validate_tp_stack(square, 4, 2).is_ok());
        let e = validate_tp_stack(TpShape { n: 16, ..square }, 2, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("N must equal K"), "{e}");
        assert!(validate_tp_stack(TpShape { n: 16, ..square }, 2, 1).is_ok());
        let e = validate_tp_stack(square, 2, 0).unwrap_err().to_string();
        assert!(e.contains("at least one layer pair"), "{e}");
        assert!(validate_tp_stack(square, 3, 1).is_err(), "8 is not a multiple of 3");
    }

    #[test]
    fn column_and_row_blocks_rebuild_the_product() {
        // A [2, 4] column-sharded over 2 ranks, B [4, 3] row-sharded: sum_r A_r B_r = A B.
        let a: Vec<f64> = (0..8).map(f64::from).collect();
        let b: Vec<f64> = (0..12).map(|v| f64::from(v) * 0.5).collect();
        assert_eq!(column_block(&a, 2, 4, 2, 2).unwrap(), vec![2.0, 3.0, 6.0, 7.0]);
        assert_eq!(row_block(&b, 3, 2, 2).unwrap(), &b[6..12]);
        let mut sum = [0f64; 6];
        for r in 0..2 {
            let (first, len) = shard(4, 2, r).unwrap();
            let ar = column_block(&a, 2, 4, first, len).unwrap();
            let br = row_block(&b, 3, first, len).unwrap();
            for i in 0..2 {
                for j in 0..3 {
                    sum[i * 3 + j] += (0..len).map(|q| ar[i * len + q] * br[q * 3 + j]).sum::<f64>();
                }
            }
        }
        for i in 0..2 {
            for j in 0..3 {
                let want: f64 = (0..4).map(|q| a[i * 4 + q] * b[q * 3 + j]).sum();
                assert_eq!(sum[i * 3 + j], want);
            }
        }
        let e = column_block(&a, 2, 4, 3, 2).unwrap_err().to_string();
        assert!(e.contains("past the matrix's 4 columns"), "{e}");
        assert!(column_block(&a, 3, 4, 0, 1).is_err());
        let e = row_block(&b, 3, 3, 2).unwrap_err().to_string();
        assert!(e.contains("past the matrix's 4 rows"), "{e}");
    }

    #[test]
    fn the_reference_row_is_x_a_b() {
        let shape = TpShape { m: 2, k: 2, f: 3, n: 2 };
        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        let x = bf(&[1.0, 2.0, 3.0, 4.0]);
        let a = bf(&[1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
        let b = bf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Row 1: h = [3, 4, 7]; y = [3 + 12 + 35, 6 + 16 + 42].
        assert_eq!(reference_row(shape, &x, &a, &b, 1), vec![50.0, 64.0]);
        let (x, a, b) = random_operands(TpShape { m: 3, k: 4, f: 2, n: 5 }, 7);
        assert_eq!((x.len(), a.len(), b.len()), (12, 8, 10));
        assert_eq!(random_operands(TpShape { m: 3, k: 4, f: 2, n: 5 }, 7).0, x, "seeded");
    }
}
