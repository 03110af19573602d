//! Tensor parallelism, Megatron-LM style (the CTA-pipelining paper's TP baseline, section
//! IV-B): for `Y = (X A) B` with `A [K, F]` and `B [F, N]`, rank `r` of `T` holds the column
//! block `A[:, r F/T .. (r+1) F/T]` (column-parallel GeMM 1) and the row block
//! `B[r F/T .. (r+1) F/T, :]` (row-parallel GeMM 2), computes its partial `Y_r = (X A_r) B_r`
//! with cuBLAS, and an NCCL all-reduce sums the partials into every rank's `Y`. `X` is
//! replicated. The time is split into computation (both GeMMs) and communication (the
//! all-reduce), as seen on rank 0.
//!
//! NCCL puts one rank per GPU, so on one GPU this runs with one rank: cuBLAS back to back and
//! a one-rank all-reduce (a copy), which exercises the whole NCCL path.

use super::cublas::Cublas;
use super::nccl::{validate_ranks, NcclGroup};
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

/// One tensor-parallel run's times (ms), medians over the timed runs.
#[derive(Clone, Debug, PartialEq)]
pub struct TpTiming {
    /// Ranks (GPUs).
    pub ranks: usize,
    /// Start to the end of the all-reduce on every rank.
    pub total: Stats,
    /// Rank 0: start to the end of its two GeMMs.
    pub compute: Stats,
    /// Rank 0: end of its GeMMs to the end of the all-reduce.
    pub all_reduce: Stats,
}

struct Rank<'a> {
    cx: &'a Context,
    stream: Stream,
    blas: Cublas,
    x: DeviceBuffer<bf16>,
    a: DeviceBuffer<bf16>,
    b: DeviceBuffer<bf16>,
    h: DeviceBuffer<bf16>,
    partial: DeviceBuffer<bf16>,
    y: DeviceBuffer<bf16>,
}

/// The tensor-parallel two-layer GeMM over the GPUs of `contexts` (one rank each).
pub struct TensorParallel<'a> {
    shape: TpShape,
    ranks: Vec<Rank<'a>>,
    group: NcclGroup,
    host_x: Vec<bf16>,
    host_a: Vec<bf16>,
    host_b: Vec<bf16>,
}

fn random_bf16(rng: &mut impl Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
        .collect()
}

impl<'a> TensorParallel<'a> {
    /// Rank `r` on `contexts[r]` (distinct GPUs): random X, A, B (seeded), sharded and
    /// uploaded; a cuBLAS handle and the NCCL communicator on each rank's stream. Refuses bad
    /// shapes, ranks sharing a GPU and a missing NCCL before any GPU work.
    pub fn new(contexts: &[&'a Context], shape: TpShape, seed: u64) -> Result<Self> {
        let t = contexts.len();
        validate_tp(shape, t)?;
        validate_ranks(&contexts.iter().map(|c| c.info().ordinal).collect::<Vec<_>>())?;
        let TpShape { m, k, f, n } = shape;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let host_x = random_bf16(&mut rng, m * k, 1.0);
        let host_a = random_bf16(&mut rng, k * f, 1.7 / (k as f32).sqrt());
        let host_b = random_bf16(&mut rng, f * n, 1.7 / (f as f32).sqrt());
        let streams = contexts.iter().map(|c| c.new_stream()).collect::<Result<Vec<_>>>()?;
        let group = NcclGroup::new(&streams)?;
        let mut ranks = Vec::with_capacity(t);
        for (r, (cx, stream)) in contexts.iter().zip(streams).enumerate() {
            let (first, len) = shard(f, t, r)?;
            let a: Vec<bf16> = (0..k)
                .flat_map(|row| host_a[row * f + first..row * f + first + len].iter().copied())
                .collect();
            let b = &host_b[first * n..(first + len) * n];
            let nan = bf16::from_f32(f32::NAN);
            ranks.push(Rank {
                cx,
                blas: Cublas::new(&stream)?,
                stream,
                x: cx.upload(&host_x)?,
                a: cx.upload(&a)?,
                b: cx.upload(b)?,
                h: cx.upload(&vec![nan; m * len])?,
                partial: cx.upload(&vec![nan; m * n])?,
                y: cx.upload(&vec![nan; m * n])?,
            });
        }
        Ok(Self {
            shape,
            ranks,
            group,
            host_x,
            host_a,
            host_b,
        })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The problem.
    pub fn shape(&self) -> TpShape {
        self.shape
    }

    /// Queues one run: both GeMMs on every rank, then the all-reduce; records `mid` on rank
    /// 0 after its GeMMs. Every rank's stream first waits for `start` (recorded on rank 0).
    fn enqueue(&mut self, start: &Event, mid: &Event) -> Result<()> {
        let TpShape { m, k, n, .. } = self.shape;
        let len = self.shape.f / self.ranks.len();
        let cfg1 = GemmConfig::new(m, len, k);
        let cfg2 = GemmConfig::new(m, n, len);
        for (r, rank) in self.ranks.iter_mut().enumerate() {
            if r > 0 {
                rank.stream.wait(start)?;
            }
            rank.blas.gemm(&cfg1, &rank.x, &rank.a, &mut rank.h)?;
            rank.blas.gemm(&cfg2, &rank.h, &rank.b, &mut rank.partial)?;
            if r == 0 {
                rank.stream.record(mid)?;
            }
        }
        let (send, mut recv): (Vec<&DeviceBuffer<bf16>>, Vec<&mut DeviceBuffer<bf16>>) =
            self.ranks.iter_mut().map(|r| (&r.partial, &mut r.y)).unzip();
        self.group.all_reduce_sum_bf16(&send, &mut recv)
    }

    /// Runs once and returns `(total, compute, all-reduce)` milliseconds.
    pub fn run(&mut self) -> Result<(f64, f64, f64)> {
        let cx0 = self.ranks[0].cx;
        let (start, mid, end) = (cx0.new_event()?, cx0.new_event()?, cx0.new_event()?);
        self.ranks[0].stream.record(&start)?;
        self.enqueue(&start, &mid)?;
        for r in 1..self.ranks.len() {
            let done = self.ranks[r].cx.new_event()?;
            self.ranks[r].stream.record(&done)?;
            self.ranks[0].stream.wait(&done)?;
        }
        self.ranks[0].stream.record(&end)?;
        self.ranks.iter().try_for_each(|r| r.stream.synchronize())?;
        Ok((
            start.elapsed_ms(&end)? as f64,
            start.elapsed_ms(&mid)? as f64,
            mid.elapsed_ms(&end)? as f64,
        ))
    }

    /// `warmup` untimed runs, then the medians of `iters` timed ones.
    pub fn time(&mut self, warmup: usize, iters: usize) -> Result<TpTiming> {
        for _ in 0..warmup {
            self.run()?;
        }
        let (mut total, mut compute, mut comm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..iters.max(1) {
            let (t, c, a) = self.run()?;
            total.push(t);
            compute.push(c);
            comm.push(a);
        }
        Ok(TpTiming {
            ranks: self.ranks.len(),
            total: Stats::of(&mut total),
            compute: Stats::of(&mut compute),
            all_reduce: Stats::of(&mut comm),
        })
    }

    /// Every rank's `Y`, downloaded.
    pub fn outputs(&self) -> Result<Vec<Vec<bf16>>> {
        self.ranks.iter().map(|r| r.y.download()).collect()
    }

    /// Worst relative error of rows `rows` of every rank's `Y` against the f64 reference
    /// `(X A) B` of the unsharded weights (no intermediate rounding).
    pub fn check_rows(&self, rows: &[usize]) -> Result<f64> {
        let TpShape { m, k, f, n } = self.shape;
        if let Some(&r) = rows.iter().find(|&&r| r >= m) {
            return Err(Error::InvalidArgument(format!("row {r} past M = {m}")));
        }
        let outputs = self.outputs()?;
        let mut worst = 0.0f64;
        for &r in rows {
            let mut h = vec![0f64; f];
            for (kk, x) in self.host_x[r * k..(r + 1) * k].iter().enumerate() {
                let x = x.to_f64();
                for (acc, a) in h.iter_mut().zip(&self.host_a[kk * f..(kk + 1) * f]) {
                    *acc += x * a.to_f64();
                }
            }
            let mut y = vec![0f64; n];
            for (ff, hv) in h.iter().enumerate() {
                for (acc, b) in y.iter_mut().zip(&self.host_b[ff * n..(ff + 1) * n]) {
                    *acc += hv * b.to_f64();
                }
            }
            for out in &outputs {
                let got: Vec<f64> = out[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect();
                worst = worst.max(relative_error(&got, &y));
            }
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
}
