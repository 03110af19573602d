//! The f64 CPU reference of a GeMM (tests, benches, `run gemm`'s sampled checks).

use super::{GemmConfig, Layout};

/// The problem's operands on the host in f64, in their storage layouts (what the device reads).
fn row_major_a(cfg: &GemmConfig, a: &[f64]) -> Vec<f64> {
    match cfg.a_layout {
        Layout::RowMajor => a[..cfg.a_len()].to_vec(),
        Layout::Transposed => transpose(a, cfg.k, cfg.m),
    }
}

/// B as `[N, K]` (each column of B contiguous).
fn column_major_b(cfg: &GemmConfig, b: &[f64]) -> Vec<f64> {
    match cfg.b_layout {
        Layout::RowMajor => transpose(b, cfg.k, cfg.n),
        Layout::Transposed => b[..cfg.b_len()].to_vec(),
    }
}

/// `rows x cols` row-major -> `cols x rows` row-major.
fn transpose(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    t
}

/// GeLU, tanh approximation, in f64 (what the device's epilogue approximates in f32):
/// `0.5 x (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated as the identical
/// `x / (1 + exp(-2u))`, which keeps its relative accuracy for very negative `x` (where
/// `1 + tanh(u)` cancels catastrophically).
pub fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    x / (1.0 + (-2.0 * u).exp())
}

/// f64 reference of `C = epilogue(A B)` at the given `(row, col)` points of C, in order.
/// `a` and `b` are the operands' values in their storage layouts (as the device reads them,
/// e.g. bf16 converted exactly to f64); `bias` has `n` entries when the epilogue reads it.
/// Spreads the points over the host's cores.
pub fn reference_gemm_at(
    cfg: &GemmConfig,
    a: &[f64],
    b: &[f64],
    bias: Option<&[f64]>,
    points: &[(usize, usize)],
) -> Vec<f64> {
    assert!(
        a.len() >= cfg.a_len() && b.len() >= cfg.b_len(),
        "operands smaller than the problem"
    );
    assert!(
        !cfg.epilogue.has_bias() || bias.is_some_and(|v| v.len() >= cfg.n),
        "bias missing"
    );
    let ar = row_major_a(cfg, a);
    let bc = column_major_b(cfg, b);
    let k = cfg.k;
    let eval = |&(r, c): &(usize, usize)| -> f64 {
        let x = &ar[r * k..(r + 1) * k];
        let y = &bc[c * k..(c + 1) * k];
        let mut acc = x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
        if cfg.epilogue.has_bias() {
            acc += bias.map_or(0.0, |v| v[c]);
        }
        if cfg.epilogue.has_gelu() {
            acc = gelu_tanh(acc);
        }
        acc
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64);
    let chunk = points.len().div_ceil(threads).max(1024);
    let mut out = vec![0.0; points.len()];
    std::thread::scope(|s| {
        for (o, p) in out.chunks_mut(chunk).zip(points.chunks(chunk)) {
            s.spawn(move || {
                for (dst, pt) in o.iter_mut().zip(p) {
                    *dst = eval(pt);
                }
            });
        }
    });
    out
}

/// f64 reference of the whole of C (`m x n`, row-major); see [`reference_gemm_at`].
pub fn reference_gemm(cfg: &GemmConfig, a: &[f64], b: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let points: Vec<(usize, usize)> = (0..cfg.m).flat_map(|r| (0..cfg.n).map(move |c| (r, c))).collect();
    reference_gemm_at(cfg, a, b, bias, &points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::Epilogue;

    #[test]
    fn reference_matches_a_hand_computed_product_in_every_layout() {
        // A = [[1, 2, 3], [4, 5, 6]] (2x3), B = [[1, 0], [0, 1], [1, 1]] (3x2): AB = [[4, 5], [10, 11]].
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let at = transpose(&a, 2, 3);
        let bt = transpose(&b, 3, 2);
        let want = [4.0, 5.0, 10.0, 11.0];
        for (al, bl) in [
            (Layout::RowMajor, Layout::RowMajor),
            (Layout::Transposed, Layout::RowMajor),
            (Layout::RowMajor, Layout::Transposed),
            (Layout::Transposed, Layout::Transposed),
        ] {
            let cfg = GemmConfig::new(2, 2, 3).layouts(al, bl);
            let aa = if al == Layout::RowMajor { &a[..] } else { &at[..] };
            let bb = if bl == Layout::RowMajor { &b[..] } else { &bt[..] };
            assert_eq!(reference_gemm(&cfg, aa, bb, None), want, "{al:?} {bl:?}");
        }
        let cfg = GemmConfig::new(2, 2, 3).epilogue(Epilogue::BiasGelu);
        let bias = [1.0, -20.0];
        let got = reference_gemm_at(&cfg, &a, &b, Some(&bias), &[(0, 0), (1, 1)]);
        assert!((got[0] - gelu_tanh(5.0)).abs() < 1e-12 && (got[0] - 5.0).abs() < 1e-5);
        assert!((got[1] - gelu_tanh(-9.0)).abs() < 1e-12 && got[1].abs() < 1e-10);
    }

    #[test]
    fn gelu_tanh_matches_known_values() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert!((gelu_tanh(1.0) - 0.841_191_990_608_276_8).abs() < 1e-12);
        assert!((gelu_tanh(-1.0) + 0.158_808_009_391_723_2).abs() < 1e-12);
        // Far in the negative tail the value is tiny but still accurate (no cancellation):
        // x * sigmoid(2u) ~ x * exp(2u) for 2u << 0.
        let x: f64 = -7.0;
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        let tail = x * (2.0 * u).exp() / (1.0 + (2.0 * u).exp());
        assert!(((gelu_tanh(x) - tail) / tail).abs() < 1e-12);
    }
}
