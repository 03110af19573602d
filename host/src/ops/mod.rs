//! Operations cusync runs on the GPU: host APIs over the device kernels, with validation,
//! CPU references and timing helpers.

pub mod gemm;
pub mod gemm_run;
pub mod gemm_skinny;
pub mod gemm_sm90;
pub mod gemm_table;
pub mod read_probe;
pub mod tma_probe;
