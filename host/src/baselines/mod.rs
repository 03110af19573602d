//! What users get today, run on the same device for comparison: vendor libraries through
//! cudarc (dynamically loaded; a missing library is an error, never a panic).
//!
//! * [`cublas`]: cuBLAS GeMMs (and CUDA-graph capture of a sequence of them);
//! * [`microbatch`]: micro-batching an N-layer chain with cuBLAS, chunk size swept;
//! * [`nccl`] and [`tensor_parallel`]: Megatron-style tensor parallelism with an NCCL all-reduce.

pub mod cublas;
pub mod microbatch;
pub mod nccl;
pub mod tensor_parallel;
