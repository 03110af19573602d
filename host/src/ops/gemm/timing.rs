//! Timing a GeMM configuration with CUDA events on random operands (rotated through copies
//! that overflow L2 on request).

use super::{Gemm, GemmConfig, InputType};
use crate::runtime::Element;
use crate::{Context, Result, Stream};
use rand::{Rng, SeedableRng};

/// Options of [`time_gemm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingOptions {
    /// Untimed launches first.
    pub warmup: usize,
    /// Timed launches (the median is reported).
    pub iters: usize,
    /// Rotate through copies of A, B and C whose total is about twice the L2 size when one
    /// set fits in L2, so the timed launches do not read operands left in L2 by the last one.
    pub rotate: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            warmup: 10,
            iters: 50,
            rotate: true,
        }
    }
}

/// How many operand sets [`time_gemm`] rotates through for `bytes` per set and an L2 of `l2`.
pub fn rotation_copies(bytes: usize, l2: usize, rotate: bool) -> usize {
    if !rotate || bytes == 0 || bytes > l2 {
        1
    } else {
        (2 * l2).div_ceil(bytes).clamp(1, 32)
    }
}

/// Device addresses of one operand set of a timing run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandAddrs {
    /// A (input type, dense storage).
    pub a: u64,
    /// B (input type, dense storage).
    pub b: u64,
    /// C (output type).
    pub c: u64,
    /// Bias (`n` f32), 0 unless the epilogue reads it.
    pub bias: u64,
}

/// Per-launch device times (ms, sorted ascending) of `cfg` with this library's kernel and
/// random inputs: see [`time_launches`].
pub fn time_gemm_samples(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<Vec<f32>> {
    let gemm = Gemm::new(cx, *cfg)?;
    let stream = cx.new_stream()?;
    time_launches(cx, cfg, opts, &stream, |s, o| {
        let p = gemm.params(o.a, o.b, o.c, o.bias);
        // SAFETY: `time_launches` allocated the operands for exactly this problem and keeps
        // them alive until the stream is synchronized.
        unsafe { gemm.launch_params(s, &p) }
    })
}

/// The median of [`time_gemm_samples`], in milliseconds.
pub fn time_gemm(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<f64> {
    let s = time_gemm_samples(cx, cfg, opts)?;
    Ok(median(&s))
}

/// Times any implementation of `cfg`: allocates random operand sets (A, B uniform in
/// [-1, 1) of the input type, C of the output type, a bias when the epilogue reads one),
/// as many as [`rotation_copies`] asks, then `launch`es `warmup` times untimed and `iters`
/// times each between two CUDA events on `stream`, rotating sets. Returns the per-launch
/// times in ms, sorted ascending.
pub fn time_launches(
    cx: &Context,
    cfg: &GemmConfig,
    opts: TimingOptions,
    stream: &Stream,
    launch: impl FnMut(&Stream, &OperandAddrs) -> Result<()>,
) -> Result<Vec<f32>> {
    match cfg.input {
        InputType::Bf16 => time_typed::<half::bf16>(cx, cfg, opts, stream, launch),
        InputType::F16 => time_typed::<half::f16>(cx, cfg, opts, stream, launch),
    }
}

/// Median of samples (0 when empty); the statistics live in [`crate::microbench::Stats`].
pub fn median(samples: &[f32]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v: Vec<f64> = samples.iter().map(|&x| x as f64).collect();
    crate::microbench::Stats::of(&mut v).median
}

/// A host element type for random operands.
pub trait RandomInput: Element {
    /// The value nearest `x`.
    fn from_f32(x: f32) -> Self;
}

impl RandomInput for half::bf16 {
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
}

impl RandomInput for half::f16 {
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}

fn time_typed<I: RandomInput>(
    cx: &Context,
    cfg: &GemmConfig,
    opts: TimingOptions,
    stream: &Stream,
    mut launch: impl FnMut(&Stream, &OperandAddrs) -> Result<()>,
) -> Result<Vec<f32>> {
    let tile = cfg.resolve_tile(cx.info().sm_count);
    cfg.validate(tile)?;
    let c_bytes = cfg.output.bytes() * cfg.c_len();
    let set_bytes = 2 * (cfg.a_len() + cfg.b_len()) + c_bytes;
    let copies = rotation_copies(set_bytes, cx.info().l2_bytes as usize, opts.rotate);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6e6d_6d00 ^ (cfg.m * 31 + cfg.n * 17 + cfg.k) as u64);
    let mut random = |n: usize| -> Vec<I> { (0..n).map(|_| I::from_f32(rng.random_range(-1.0f32..1.0))).collect() };
    let bias = if cfg.epilogue.has_bias() {
        let v: Vec<f32> = (0..cfg.n).map(|i| (i % 7) as f32 * 0.125 - 0.375).collect();
        Some(cx.upload(&v)?)
    } else {
        None
    };
    let bias_addr = bias.as_ref().map_or(0, |v| v.addr());
    let mut sets = Vec::with_capacity(copies);
    for _ in 0..copies {
        let a = cx.upload(&random(cfg.a_len()))?;
        let b = cx.upload(&random(cfg.b_len()))?;
        // C as raw bytes: only the kernel cares about its type.
        let c = cx.alloc_zeros::<u8>(c_bytes)?;
        sets.push((a, b, c));
    }
    let addrs: Vec<OperandAddrs> = sets
        .iter()
        .map(|(a, b, c)| OperandAddrs {
            a: a.addr(),
            b: b.addr(),
            c: c.addr(),
            bias: bias_addr,
        })
        .collect();
    let run = |launch: &mut dyn FnMut(&Stream, &OperandAddrs) -> Result<()>| -> Result<Vec<f32>> {
        for i in 0..opts.warmup {
            launch(stream, &addrs[i % copies])?;
        }
        let mut events = Vec::with_capacity(opts.iters);
        for i in 0..opts.iters {
            let (start, end) = (cx.new_event()?, cx.new_event()?);
            stream.record(&start)?;
            launch(stream, &addrs[(opts.warmup + i) % copies])?;
            stream.record(&end)?;
            events.push((start, end));
        }
        stream.synchronize()?;
        events.iter().map(|(s, e)| s.elapsed_ms(e)).collect()
    };
    let result = run(&mut launch);
    // Whatever happened, nothing may still read the operands when they are freed.
    let synced = stream.synchronize();
    let mut samples = result?;
    synced?;
    samples.sort_by(f32::total_cmp);
    drop(sets);
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_fills_twice_the_l2_when_a_set_fits() {
        let l2 = 50 << 20;
        assert_eq!(rotation_copies(100 << 20, l2, true), 1);
        assert_eq!(rotation_copies(25 << 20, l2, true), 4);
        assert_eq!(rotation_copies(1 << 10, l2, true), 32);
        assert_eq!(rotation_copies(1 << 10, l2, false), 1);
        assert_eq!(median(&[1.0, 2.0, 4.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 8.0]), 3.0);
    }
}
