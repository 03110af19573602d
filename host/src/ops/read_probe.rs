//! The weight-streaming ceiling of issue 3, measured: how fast one wave of blocks reads a GeMM's
//! `B` (`[K, N]`, row-major) once under a given access pattern, with no arithmetic
//! (device/src/kernels/read_probe.rs). `run gemm --read-probe` times it beside the GeMM and
//! cuBLAS on the same weight size, so "the floor" of a bandwidth-bound GeMM is the rate this
//! machine gives, not only the datasheet's.

use super::gemm::{median, time_gemm, time_launches, GemmConfig, TimingOptions};
use crate::cudarc::driver::{LaunchConfig, PushKernelArg};
use crate::{Context, Error, Result};
use cusync_shared::read_probe::{ORDER_CHUNK_MAJOR, ORDER_ROW_BLOCKED};
use std::fmt::Write;

/// Threads of a block (the device's `PROBE_THREADS`).
const PROBE_THREADS: u32 = 256;
/// Bytes of an input element (bf16 and f16 both).
const INPUT_BYTES: usize = 2;

/// One access pattern of the read probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadPattern {
    /// Bytes each block reads per row of a unit (a column block's width); 0: the whole row.
    pub run_bytes: u32,
    /// Units laid chunk by chunk (adjacent column blocks of the same rows in a block's range)
    /// rather than column block by column block (the skinny plan's order).
    pub chunk_major: bool,
    /// Each thread's loads of a unit run down `run / 16` consecutive rows at one column (the
    /// skinny GeMM's rows per lane: an instruction reads rows 8 apart), not across the unit
    /// row by row. Not with whole rows.
    pub row_blocked: bool,
    /// 16-byte loads in flight per thread: into registers, 8 or 16 (twice that at the turn);
    /// through `cp.async`, 32 or 48 (4 or 6 groups of 8: 128 or 192 KiB of shared memory).
    pub depth: u32,
    /// The loads go through `cp.async` into shared memory rather than into registers.
    pub cp_async: bool,
}

impl ReadPattern {
    /// The patterns `run gemm --read-probe` sweeps: the skinny kernel's 128-byte runs and
    /// wider ones, into registers and through `cp.async` at two depths, a chunk-major order
    /// and whole rows.
    pub fn sweep() -> Vec<ReadPattern> {
        let at = |run_bytes, depth, cp_async| ReadPattern {
            run_bytes,
            chunk_major: false,
            row_blocked: false,
            depth,
            cp_async,
        };
        let mut v = vec![at(128, 16, false), at(256, 16, false), at(512, 16, false)];
        for depth in [32, 48] {
            v.extend([128, 256, 512, 1024].map(|run| at(run, depth, true)));
        }
        v.push(ReadPattern {
            chunk_major: true,
            ..at(512, 48, true)
        });
        v.push(at(0, 48, true));
        // The skinny kernel's rows per lane, 128-byte runs, into registers and through cp.async.
        for (depth, cp_async) in [(16, false), (32, true)] {
            v.push(ReadPattern {
                row_blocked: true,
                ..at(128, depth, cp_async)
            });
        }
        v
    }

    /// The entry point's `order` flags (`cusync_shared::read_probe`).
    fn order_flags(&self) -> u32 {
        (if self.chunk_major { ORDER_CHUNK_MAJOR } else { 0 }) | (if self.row_blocked { ORDER_ROW_BLOCKED } else { 0 })
    }

    /// The entry point of this pattern, and its dynamic shared memory.
    fn kernel(&self) -> Result<(&'static str, u32)> {
        match (self.cp_async, self.depth) {
            (false, 8) => Ok(("bench_read_runs_d8", 0)),
            (false, 16) => Ok(("bench_read_runs_d16", 0)),
            (true, 32) => Ok(("bench_read_async_g4", 4 * 32 * 1024)),
            (true, 48) => Ok(("bench_read_async_g6", 6 * 32 * 1024)),
            (a, d) => Err(Error::InvalidArgument(format!(
                "read probe depth {d}{}: the kernels have 8 or 16 register loads, or 32 or 48 cp.async \
                 copies, in flight",
                if a { " through cp.async" } else { "" }
            ))),
        }
    }

    /// The run width for rows of `row_bytes`, checked: the whole row (a multiple of 4096
    /// bytes), or a power of two from 128 to 4096 that divides the row.
    fn run_for(&self, row_bytes: u32) -> Result<u32> {
        let run = if self.run_bytes == 0 { row_bytes } else { self.run_bytes };
        let ok = if run == row_bytes {
            run.is_multiple_of(4096)
        } else {
            run.is_power_of_two() && (128..=4096).contains(&run) && row_bytes.is_multiple_of(run)
        };
        if run == row_bytes && self.row_blocked {
            return Err(Error::InvalidArgument(
                "read probe: row-blocked loads need runs narrower than the row".into(),
            ));
        }
        if !ok {
            return Err(Error::InvalidArgument(format!(
                "read probe: runs of {run} bytes in rows of {row_bytes} bytes (a run is the whole row, a \
                 multiple of 4096 bytes, or a power of two from 128 to 4096 dividing it)"
            )));
        }
        Ok(run)
    }

    /// A short label: `run 128 B, by column block, 8 in flight`.
    pub fn label(&self) -> String {
        let run = if self.run_bytes == 0 {
            "whole rows".to_string()
        } else {
            format!("runs of {} B", self.run_bytes)
        };
        let order = match (self.chunk_major, self.row_blocked) {
            (true, false) => "by chunk",
            (false, false) => "by column block",
            (true, true) => "by chunk, rows per thread",
            (false, true) => "by column block, rows per thread",
        };
        let via = if self.cp_async { "cp.async" } else { "registers" };
        format!("{run}, {order}, {} in flight ({via})", self.depth)
    }
}

/// Per-launch times (ms, sorted) of the read probe over `cfg`'s `B` (random, rotated like
/// [`time_launches`] rotates a GeMM's operands), one block of 256 threads per SM.
pub fn time_read_probe(cx: &Context, cfg: &GemmConfig, pattern: ReadPattern, opts: TimingOptions) -> Result<Vec<f32>> {
    let row_bytes = u32::try_from(cfg.n * INPUT_BYTES)
        .map_err(|_| Error::InvalidArgument("read probe: a row of B is over 4 GiB".into()))?;
    let rows = u32::try_from(cfg.k).map_err(|_| Error::InvalidArgument("read probe: K is over 2^32".into()))?;
    if !rows.is_multiple_of(256) {
        return Err(Error::InvalidArgument(format!(
            "read probe: K = {rows} is not a multiple of 256 (the probe reads whole 256-row chunks)"
        )));
    }
    let run = pattern.run_for(row_bytes)?;
    let (name, smem) = pattern.kernel()?;
    if smem > 48 * 1024 {
        cx.set_max_dynamic_smem(name, smem)?;
    }
    let f = cx.function(name)?;
    let grid = cx.info().sm_count;
    let mut out = cx.alloc_zeros::<u32>((grid * PROBE_THREADS) as usize)?;
    let out_addr = out.addr();
    let order = pattern.order_flags();
    let stream = cx.new_stream()?;
    let samples = time_launches(cx, cfg, opts, &stream, |s, o| {
        let mut b = s.raw().launch_builder(&f);
        b.arg(&o.b)
            .arg(&rows)
            .arg(&row_bytes)
            .arg(&run)
            .arg(&order)
            .arg(&out_addr);
        let launch = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (PROBE_THREADS, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: the entry point takes (u64 base, u32 rows, u32 row_bytes, u32 run_bytes, u32
        // order, u64 out) (`run_for` rejected row-blocked whole rows) and `smem` bytes of dynamic shared memory; `o.b` holds K x N elements of the input type (rows x
        // row_bytes bytes, 16-byte aligned: a fresh allocation), `run` tiles the row, and `out`
        // holds grid x 256 words and outlives the synchronized stream.
        unsafe { b.launch(launch) }
            .map(|_| ())
            .map_err(Error::driver("launching the read probe"))
    })?;
    stream.synchronize()?;
    // Keep the output alive (and touched) until every launch is done.
    out.fill(0)?;
    Ok(samples)
}

/// The probe's table for `cfg`: each pattern's median time and rate, as a fraction of
/// 4.3 TB/s and against the GeMM's own median (this library's default kernel for `cfg`, timed
/// first in the same process).
pub fn read_probe_report(cx: &Context, cfg: &GemmConfig, iters: usize) -> Result<String> {
    let opts = TimingOptions {
        warmup: 5,
        iters,
        rotate: true,
    };
    let gemm_ms = time_gemm(cx, cfg, opts)?;
    let bytes = (cfg.k * cfg.n * INPUT_BYTES) as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "read probe: B [{}, {}] read once ({:.1} MB) by {} blocks of 256 threads, medians of {iters}:",
        cfg.k,
        cfg.n,
        bytes / 1e6,
        cx.info().sm_count
    );
    let _ = writeln!(
        s,
        "  {:<74} {:>9} {:>8} {:>9} {:>10}",
        "pattern", "ms", "TB/s", "of 4.3", "GeMM/probe"
    );
    for pattern in ReadPattern::sweep() {
        let ms = median(&time_read_probe(cx, cfg, pattern, opts)?);
        let tbs = bytes / (ms * 1e-3) / 1e12;
        let _ = writeln!(
            s,
            "  {:<74} {ms:>9.4} {tbs:>8.2} {:>9.3} {:>10.3}",
            pattern.label(),
            tbs / 4.3,
            gemm_ms / ms
        );
    }
    let tbs = bytes / (gemm_ms * 1e-3) / 1e12;
    let _ = writeln!(
        s,
        "  {:<74} {gemm_ms:>9.4} {tbs:>8.2} {:>9.3}",
        "the GeMM (its weight bytes only)",
        tbs / 4.3
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_check_their_runs_and_depths() {
        let p = ReadPattern {
            run_bytes: 128,
            chunk_major: false,
            row_blocked: false,
            depth: 8,
            cp_async: false,
        };
        assert_eq!(p.run_for(12288).unwrap(), 128);
        assert!(p.run_for(12280).is_err(), "128 does not divide the row");
        assert!(
            ReadPattern { run_bytes: 384, ..p }.run_for(12288).is_err(),
            "not a power of two"
        );
        let whole = ReadPattern { run_bytes: 0, ..p };
        assert_eq!(whole.run_for(24576).unwrap(), 24576);
        let blocked = ReadPattern { row_blocked: true, ..p };
        assert_eq!(blocked.run_for(12288).unwrap(), 128);
        assert!(
            ReadPattern {
                run_bytes: 0,
                ..blocked
            }
            .run_for(24576)
            .is_err(),
            "row-blocked loads of whole rows"
        );
        assert_eq!(p.order_flags(), 0);
        assert_eq!(
            ReadPattern {
                chunk_major: true,
                ..blocked
            }
            .order_flags(),
            ORDER_CHUNK_MAJOR | ORDER_ROW_BLOCKED
        );
        assert!(ReadPattern { depth: 12, ..p }.kernel().is_err());
        assert!(ReadPattern {
            depth: 16,
            cp_async: true,
            ..p
        }
        .kernel()
        .is_err());
        assert_eq!(
            ReadPattern {
                depth: 48,
                cp_async: true,
                ..p
            }
            .kernel()
            .unwrap()
            .1,
            196608
        );
        let sweep = ReadPattern::sweep();
        assert_eq!(sweep.len(), 15);
        assert!(sweep.iter().all(|p| p.kernel().is_ok() && p.run_for(24576).is_ok()));
        assert!(
            sweep.contains(&ReadPattern { depth: 16, ..p }),
            "the skinny kernel's pattern is measured"
        );
        assert!(
            sweep.contains(&ReadPattern {
                depth: 16,
                row_blocked: true,
                ..p
            }),
            "the skinny kernel's rows per lane are measured"
        );
    }
}
