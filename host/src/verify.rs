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

#[cfg(test)]
mod tests {
    use super::*;

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
