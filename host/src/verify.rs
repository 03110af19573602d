//! Result checks shared by the library's self-checks, its benchmarks and the tests: the relative
//! error against an f64 reference (METHOD.md's measure) and bitwise comparison.

/// ‖out − ref‖ / ‖ref‖ over f64; a NaN or infinity anywhere in `out` gives infinity (so an
/// unwritten, NaN-poisoned element can never pass). With an all-zero reference, ‖out‖.
pub fn relative_error(out: &[f64], reference: &[f64]) -> f64 {
    assert_eq!(out.len(), reference.len(), "output and reference lengths differ");
    let (mut num, mut den) = (0.0, 0.0);
    for (o, r) in out.iter().zip(reference) {
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The first index where two bf16 slices differ bitwise (the shorter length if their lengths
/// differ), or `None` when they are identical.
pub fn first_difference(a: &[half::bf16], b: &[half::bf16]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits())
}

/// Checks rows `rows` of every layer of a dense bf16 layer chain (`y_l = x_l W_l`, row-major,
/// `W_l` of shape `dims[l] x dims[l + 1]`) against an f64 reference computed from that layer's
/// *own* input (`input` for layer 0, then `outputs[l - 1]`), so layers are judged separately;
/// returns the worst [`relative_error`] of a row. `weights` and `outputs` have one entry per
/// layer; `rows` must lie inside `input`.
pub fn chain_rows_error(
    input: &[half::bf16],
    weights: &[Vec<half::bf16>],
    outputs: &[Vec<half::bf16>],
    dims: &[usize],
    rows: &[usize],
) -> f64 {
    let mut worst = 0.0f64;
    let mut x = input;
    for (layer, (w, out)) in weights.iter().zip(outputs).enumerate() {
        let (k, n) = (dims[layer], dims[layer + 1]);
        for &r in rows {
            let mut reference = vec![0f64; n];
            for (kk, a) in x[r * k..(r + 1) * k].iter().enumerate() {
                let a = a.to_f64();
                for (acc, b) in reference.iter_mut().zip(&w[kk * n..(kk + 1) * n]) {
                    *acc += a * b.to_f64();
                }
            }
            let got: Vec<f64> = out[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect();
            worst = worst.max(relative_error(&got, &reference));
        }
        x = out;
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_rows_judge_each_layer_from_its_own_input() {
        use half::bf16;
        let b = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        // x [2,2], W0 = 2 I, W1 = [[1],[1]]: exact outputs give 0.
        let x = b(&[1.0, 2.0, 3.0, 4.0]);
        let w = vec![b(&[2.0, 0.0, 0.0, 2.0]), b(&[1.0, 1.0])];
        let mut outs = vec![b(&[2.0, 4.0, 6.0, 8.0]), b(&[6.0, 14.0])];
        assert_eq!(chain_rows_error(&x, &w, &outs, &[2, 2, 1], &[0, 1]), 0.0);
        // A wrong layer-0 row is caught; layer 1 is judged from that (wrong) input, not x.
        outs[0][2] = bf16::from_f32(7.0);
        let e = chain_rows_error(&x, &w, &outs, &[2, 2, 1], &[1]);
        assert!(e > 0.09 && e.is_finite(), "{e}");
        assert!(chain_rows_error(&x, &w, &outs, &[2, 2, 1], &[0]) == 0.0);
        // A NaN (unwritten) output never passes.
        outs[1][0] = bf16::NAN;
        assert!(chain_rows_error(&x, &w, &outs, &[2, 2, 1], &[0]).is_infinite());
    }

    #[test]
    fn nan_never_passes_and_exact_is_zero() {
        assert_eq!(relative_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!(relative_error(&[f64::NAN, 2.0], &[1.0, 2.0]).is_infinite());
        assert!((relative_error(&[1.1], &[1.0]) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn first_difference_finds_the_index() {
        let a = [half::bf16::from_f32(1.0), half::bf16::from_f32(2.0)];
        let b = [half::bf16::from_f32(1.0), half::bf16::from_f32(3.0)];
        assert_eq!(first_difference(&a, &a), None);
        assert_eq!(first_difference(&a, &b), Some(1));
        assert_eq!(first_difference(&a, &b[..1]), Some(1));
    }
}
