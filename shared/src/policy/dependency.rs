//! Data dependencies: which producer tiles a consumer tile reads, and in what order.
//!
//! A consumer tile's main loop reads the producer's output in steps. The dependency says how
//! many steps a consumer tile takes ([`Dependency::step_count`]), what each step is
//! ([`Dependency::step`]) and which producer output tile it reads ([`Dependency::reads`]).
//! Policies decide which steps wait; soundness is checked against these reads.

use crate::tile::{Grid, TileIdx};

/// How a consumer stage reads its producer's output.
#[repr(C, u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// The consumer reads nothing of the producer (independent stages; [`super::NoSync`]).
    #[default]
    Independent,
    /// GeMM A-operand dependency: consumer tile `(x, y, z)` reads producer row `x` entirely,
    /// columns `0, 1, .., producer.y - 1` in that order (the consumer's K loop runs over the
    /// producer's N). Every split-K slice of the consumer is taken to read the whole row.
    /// Requires equal row tiling (same M and tile height, so `producer.x == consumer.x`).
    GemmRow,
    /// The attention dependency of the paper (XQKV -> dot product): consumer tile `(x, y)`
    /// reads producer tiles `(x, r), (x, r + stride), ..` with `r = y % stride`, i.e. the
    /// `r`-th column tile of each of the `producer.y / stride` slices (XQ, XK, XV).
    Strided {
        /// Column tiles per slice of the producer output.
        stride: u32,
    },
    /// Implicit-GeMM Conv2D: the consumer's A operand is the im2col of the producer's output
    /// (`[B*P*Q, C*R*S]`). Its main loop has `producer.y * taps` steps, channel tile outer and
    /// filter tap inner: step `k` reads producer column tile `k / taps`. Because a filter tap
    /// shifts the input by up to `halo` producer row tiles (`(R/2)*Q + S/2` pixels, see
    /// [`conv2d_halo_tiles`]), each step reads producer rows `x - halo ..= x + halo` (clipped
    /// to the grid); steps enumerate those rows innermost.
    Conv2D {
        /// Filter taps per input channel (`R * S`, 9 for a 3x3 filter).
        taps: u32,
        /// Producer row tiles a consumer row tile reaches above and below itself.
        halo: u32,
    },
}

/// One step of a consumer tile's main loop that reads the producer's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// Producer row tile the step reads.
    pub row: u32,
    /// Main-loop position along K: the producer column tile for GeMM-like dependencies, the
    /// im2col K tile (`channel_tile * taps + tap`) for Conv2D.
    pub k: u32,
    /// Whether this is the consumer tile's first step that reads `row`.
    pub first_in_row: bool,
}

/// Producer row tiles a consumer row tile reaches, for a 3x3-style "same" convolution with
/// stride 1: a filter of `r x s` taps over an image `image_w` pixels wide moves the input by
/// up to `(r/2) * image_w + s/2` pixels of the flattened `[B*P*Q]` row dimension, i.e. this
/// many tiles of `tile_m` rows. A 1x1 filter has no halo.
pub const fn conv2d_halo_tiles(r: u32, s: u32, image_w: u32, tile_m: u32) -> u32 {
    let pixels = (r / 2) * image_w + s / 2;
    if tile_m == 0 {
        0
    } else {
        pixels.div_ceil(tile_m)
    }
}

/// Rows `lo..=hi` of a Conv2D band around row `x`, clipped to `rows` row tiles.
const fn band(x: u32, halo: u32, rows: u32) -> (u32, u32) {
    let lo = x.saturating_sub(halo);
    let hi = x.saturating_add(halo);
    let hi = if hi >= rows { rows.saturating_sub(1) } else { hi };
    (lo, hi)
}

impl Dependency {
    /// The dependency as four words `[tag, p0, p1, 0]` (for descriptors that must be `Pod`).
    pub const fn encode(&self) -> [u32; 4] {
        match *self {
            Dependency::Independent => [0, 0, 0, 0],
            Dependency::GemmRow => [1, 0, 0, 0],
            Dependency::Strided { stride } => [2, stride, 0, 0],
            Dependency::Conv2D { taps, halo } => [3, taps, halo, 0],
        }
    }

    /// Inverse of [`Dependency::encode`]; `None` for an unknown tag.
    pub const fn decode(words: [u32; 4]) -> Option<Self> {
        match words {
            [0, ..] => Some(Dependency::Independent),
            [1, ..] => Some(Dependency::GemmRow),
            [2, stride, ..] => Some(Dependency::Strided { stride }),
            [3, taps, halo, _] => Some(Dependency::Conv2D { taps, halo }),
            _ => None,
        }
    }

    /// How many steps consumer tile `tile` takes over a producer of grid `producer`.
    pub const fn step_count(&self, producer: Grid, tile: TileIdx) -> u32 {
        match *self {
            Dependency::Independent => 0,
            Dependency::GemmRow => producer.y,
            Dependency::Strided { stride } => {
                let stride = if stride == 0 { 1 } else { stride };
                let r = tile.y % stride;
                if r < producer.y {
                    (producer.y - r).div_ceil(stride)
                } else {
                    0
                }
            }
            Dependency::Conv2D { taps, halo } => {
                if producer.x == 0 || tile.x >= producer.x {
                    return 0;
                }
                let (lo, hi) = band(tile.x, halo, producer.x);
                producer.y * taps * (hi - lo + 1)
            }
        }
    }

    /// Step `i` (`< step_count`) of consumer tile `tile`.
    pub const fn step(&self, producer: Grid, tile: TileIdx, i: u32) -> Step {
        match *self {
            Dependency::Independent | Dependency::GemmRow => Step {
                row: tile.x,
                k: i,
                first_in_row: i == 0,
            },
            Dependency::Strided { stride } => {
                let stride = if stride == 0 { 1 } else { stride };
                Step {
                    row: tile.x,
                    k: tile.y % stride + i * stride,
                    first_in_row: i == 0,
                }
            }
            Dependency::Conv2D { halo, .. } => {
                let (lo, hi) = band(tile.x, halo, producer.x);
                let rows = hi - lo + 1;
                let k = i / rows;
                Step {
                    row: lo + i % rows,
                    k,
                    first_in_row: k == 0,
                }
            }
        }
    }

    /// The producer output tile (`z = 0` stands for all its split-K slices) that `step` reads.
    pub const fn reads(&self, step: Step) -> TileIdx {
        match *self {
            Dependency::Conv2D { taps, .. } => {
                let taps = if taps == 0 { 1 } else { taps };
                TileIdx::new(step.row, step.k / taps, 0)
            }
            _ => TileIdx::new(step.row, step.k, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_round_trip_through_words() {
        for d in [
            Dependency::Independent,
            Dependency::GemmRow,
            Dependency::Strided { stride: 4 },
            Dependency::Conv2D { taps: 9, halo: 2 },
        ] {
            assert_eq!(Dependency::decode(d.encode()), Some(d));
        }
        assert_eq!(Dependency::decode([9, 0, 0, 0]), None);
    }

    #[test]
    fn gemm_row_reads_the_whole_row_in_order() {
        let p = Grid::new(4, 3, 2);
        let d = Dependency::GemmRow;
        let t = TileIdx::new(2, 7, 0);
        assert_eq!(d.step_count(p, t), 3);
        for i in 0..3 {
            let s = d.step(p, t, i);
            assert_eq!(d.reads(s), TileIdx::new(2, i, 0));
            assert_eq!(s.first_in_row, i == 0);
        }
    }

    #[test]
    fn strided_reads_one_column_per_slice() {
        let p = Grid::new(1, 6, 1);
        let d = Dependency::Strided { stride: 2 };
        let t = TileIdx::new(0, 1, 0);
        let cols: [u32; 3] = core::array::from_fn(|i| d.reads(d.step(p, t, i as u32)).y);
        assert_eq!(d.step_count(p, t), 3);
        assert_eq!(cols, [1, 3, 5]);
    }

    #[test]
    fn conv2d_reads_the_halo_band_per_channel_tile() {
        let p = Grid::new(5, 2, 1);
        let d = Dependency::Conv2D { taps: 9, halo: 1 };
        // Row 0 reaches rows 0..=1; row 2 reaches 1..=3; row 4 reaches 3..=4.
        assert_eq!(d.step_count(p, TileIdx::new(0, 0, 0)), 2 * 9 * 2);
        assert_eq!(d.step_count(p, TileIdx::new(2, 0, 0)), 2 * 9 * 3);
        let t = TileIdx::new(2, 0, 0);
        let s = d.step(p, t, 3 * 9 + 2); // k = 9: channel tile 1, first tap; row 3
        assert_eq!((s.row, s.k), (3, 9));
        assert_eq!(d.reads(s), TileIdx::new(3, 1, 0));
        assert!(d.step(p, t, 1).first_in_row);
        assert!(!d.step(p, t, 3).first_in_row);
    }

    #[test]
    fn halo_of_a_3x3_same_conv() {
        // 28x28 image, 64-row tiles: 28 + 1 = 29 pixels -> 1 tile. 56-wide, 32-row tiles -> 2.
        assert_eq!(conv2d_halo_tiles(3, 3, 28, 64), 1);
        assert_eq!(conv2d_halo_tiles(3, 3, 56, 32), 2);
        assert_eq!(conv2d_halo_tiles(1, 1, 56, 32), 0);
    }
}
