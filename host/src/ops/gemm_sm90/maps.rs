//! The tensor maps path 2 loads through (`cuTensorMapEncodeTiled`): their swizzle, their L2
//! promotion, and the A and B maps of a problem.

use super::WgTile;
use crate::error::{Error, Result};
use crate::ops::gemm::InputType;
use cudarc::driver::sys;
use cusync_shared::gemm::GemmParams;
use cusync_shared::gemm_sm90::{a_map_dims_rows, b_map_dims};

/// The shared-memory swizzle of a tensor map's boxes: the width in bytes of a swizzled row
/// (a box's inner extent may not exceed it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapSwizzle {
    /// 32-byte rows (16 elements of 16 bits).
    B32,
    /// 64-byte rows (32 elements).
    B64,
    /// 128-byte rows (64 elements): every path-2 GeMM operand.
    B128,
}

impl MapSwizzle {
    /// The swizzle whose rows are `bytes` wide (32, 64 or 128).
    pub fn for_row_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            32 => Some(Self::B32),
            64 => Some(Self::B64),
            128 => Some(Self::B128),
            _ => None,
        }
    }

    fn raw(self) -> sys::CUtensorMapSwizzle {
        match self {
            Self::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Self::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Self::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// How far L2 widens a tensor map's fills past the bytes a box asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    /// Only the sectors asked for.
    None,
    /// To 64 bytes.
    B64,
    /// To 128 bytes.
    B128,
    /// To 256 bytes: every path-2 GeMM operand.
    B256,
}

impl L2Promotion {
    /// Parses `none`, `64`, `128` or `256`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "none" | "0" => Ok(Self::None),
            "64" => Ok(Self::B64),
            "128" => Ok(Self::B128),
            "256" => Ok(Self::B256),
            _ => Err(Error::InvalidArgument(format!(
                "L2 promotion {s:?}: expected none, 64, 128 or 256"
            ))),
        }
    }

    /// `none`, `64`, `128` or `256`.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::B64 => "64",
            Self::B128 => "128",
            Self::B256 => "256",
        }
    }

    fn raw(self) -> sys::CUtensorMapL2promotion {
        match self {
            Self::None => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            Self::B64 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            Self::B128 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            Self::B256 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }
}

/// Encodes one 2-D tensor map of 16-bit elements: `dims` and `box_` innermost first, leading
/// dimension `ld` elements, the given swizzle and L2 promotion, zero fill out of bounds.
pub fn encode_map_2d(
    input: InputType,
    base: u64,
    dims: [u32; 2],
    box_: [u32; 2],
    ld: u32,
    swizzle: MapSwizzle,
    promotion: L2Promotion,
) -> Result<[u64; 16]> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dtype = match input {
        InputType::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        InputType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    };
    let global_dim = [dims[0] as u64, dims[1] as u64];
    let global_strides = [ld as u64 * 2];
    let element_strides = [1u32, 1];
    // SAFETY: every pointer is to a live local array of the length the driver reads for rank 2;
    // `base` is only recorded in the map, not dereferenced.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            2,
            base as *mut std::ffi::c_void,
            global_dim.as_ptr(),
            global_strides.as_ptr(),
            box_.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle.raw(),
            promotion.raw(),
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::InvalidArgument(format!(
            "cuTensorMapEncodeTiled refused dims {dims:?}, box {box_:?}, leading dimension {ld}, swizzle \
             {swizzle:?}, L2 promotion {promotion:?} at {base:#x}: {r:?}"
        )));
    }
    Ok(map.opaque)
}

/// A path-2 GeMM operand's tensor map: [`encode_map_2d`] with a `swizzle_bytes` (128, 64 or
/// 32) swizzle.
fn encode_map(
    input: InputType,
    base: u64,
    dims: [u32; 2],
    box_: [u32; 2],
    ld: u32,
    swizzle_bytes: u32,
    promotion: L2Promotion,
) -> Result<[u64; 16]> {
    let swizzle = MapSwizzle::for_row_bytes(swizzle_bytes).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "GeMM path 2: no {swizzle_bytes}-byte swizzle tensor maps (128, 64 or 32)"
        ))
    })?;
    encode_map_2d(input, base, dims, box_, ld, swizzle, promotion)
}

/// A's and B's tensor maps for `p` with tile `tile`, as the 32 words the kernel reads (256-byte
/// L2 promotion).
pub fn encode_maps(p: &GemmParams, tile: WgTile, input: InputType) -> Result<[u64; 32]> {
    encode_maps_promoted(p, tile, input, L2Promotion::B256)
}

/// [`encode_maps`] with both maps' L2 promotion `promotion`.
pub fn encode_maps_promoted(
    p: &GemmParams,
    tile: WgTile,
    input: InputType,
    promotion: L2Promotion,
) -> Result<[u64; 32]> {
    let (a_dims, a_box) = a_map_dims_rows(p.m, p.k, p.a_trans(), tile.shape().a_rows());
    let (b_dims, b_box) = b_map_dims(p.n, p.k, p.b_trans(), tile.shape().bn);
    let a = encode_map(input, p.a, a_dims, a_box, p.lda, 128, promotion)?;
    let b = encode_map(
        input,
        p.b,
        b_dims,
        b_box,
        p.ldb,
        tile.shape().b_swizzle_bytes(p.b_trans()),
        promotion,
    )?;
    let mut words = [0u64; 32];
    words[..16].copy_from_slice(&a);
    words[16..].copy_from_slice(&b);
    Ok(words)
}
