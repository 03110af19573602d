//! cuBLAS GeMM baseline (`cublasGemmEx`: bf16/f16 in, f32 compute, bf16/f16/f32 out), the
//! number our kernels are compared against.
//!
//! cuBLAS is column-major; our matrices are row-major. A row-major `[R, C]` matrix is the
//! column-major `[C, R]` matrix of its transpose, so `C = A B` (row-major) is computed as
//! `C^T = B^T A^T` (column-major): cuBLAS's first operand is our B, its second our A, with
//! `m = N`, `n = M`. A row-major B (`[K, N]`) is column-major `B^T` (`N x K`, ld N): op N; a
//! transposed B (stored `[N, K]`) is column-major `B` (`K x N`, ld K): op T. Likewise A:
//! row-major (`[M, K]`) is `A^T` (`K x M`, ld K): op N; transposed (stored `[K, M]`) is `A`
//! (`M x K`, ld M): op T.
//!
//! libcublas is loaded at run time (cudarc's dynamic loading, e.g. `libcublas.so.13` from
//! `/usr/local/cuda/lib64` on the H200 machines, found through `LD_LIBRARY_PATH` or the loader
//! cache). If it cannot be loaded, [`Cublas::new`] returns an error instead of panicking.
//! Only the plain product is offered: bias/GeLU epilogues are refused (they would need
//! cuBLASLt).
//!
//! Each handle owns a [`WORKSPACE_BYTES`] workspace (`cublasSetWorkspace`), so cuBLAS never
//! allocates while a stream is captured: [`Cublas::capture`] records a sequence of GeMMs into
//! a CUDA graph ([`CublasGraph`]) that is launched as one unit, which is how PyTorch's
//! baselines (`baselines/torch_baselines.py`, graph replay) run cuBLAS back to back.

use crate::ops::gemm::{
    time_launches, validate_buffers, GemmConfig, InputType, Layout, OperandAddrs, OutputType, TimingOptions,
};
use crate::runtime::Element;
use crate::{Context, DeviceBuffer, Error, Result, Stream};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice};
use std::ffi::c_void;

/// Bytes of the workspace every [`Cublas`] handle owns (NVIDIA recommends 32 MiB on Hopper).
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// Whether libcublas can be loaded on this machine.
pub fn cublas_present() -> bool {
    // SAFETY: only tries to dlopen libcublas; no cuBLAS call is made.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

fn unavailable(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "cuBLAS baseline unavailable: {what} (cudarc looks for libcublas.so / libcublas.so.13; \
         add /usr/local/cuda/lib64 to LD_LIBRARY_PATH)"
    ))
}

/// A cuBLAS handle bound to one stream, with its own workspace.
#[derive(Debug)]
pub struct Cublas {
    blas: CudaBlas,
    stream: Stream,
    ordinal: usize,
    _workspace: CudaSlice<u8>,
}

/// cuBLAS work captured from a handle's stream into a CUDA graph ([`Cublas::capture`]),
/// launched as one unit on that stream. It holds device addresses, not buffers: launch it only
/// while the buffers it was captured on are alive (owners such as
/// [`crate::mlp::Mlp`] keep the graph next to the buffers).
pub struct CublasGraph {
    graph: CudaGraph,
    stream: Stream,
}

impl std::fmt::Debug for CublasGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasGraph").finish_non_exhaustive()
    }
}

impl CublasGraph {
    /// Queues one launch of the graph on the stream it was captured from (asynchronous).
    pub fn launch(&self) -> Result<()> {
        self.graph.launch().map_err(Error::driver("launching a CUDA graph"))
    }

    /// The stream the graph launches on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Whether the graph was captured from `stream`.
    pub fn is_on(&self, stream: &Stream) -> bool {
        self.stream.raw().cu_stream() == stream.raw().cu_stream()
    }
}

impl Cublas {
    /// A handle whose work goes on `stream`; an error (not a panic) when libcublas is missing.
    pub fn new(stream: &Stream) -> Result<Self> {
        if !cublas_present() {
            return Err(unavailable("libcublas could not be loaded"));
        }
        let blas =
            CudaBlas::new(stream.raw().clone()).map_err(|e| unavailable(&format!("cublasCreate failed: {e}")))?;
        let workspace = stream
            .raw()
            .alloc_zeros::<u8>(WORKSPACE_BYTES)
            .map_err(Error::driver("allocating the cuBLAS workspace"))?;
        stream.synchronize()?;
        let ptr = cudarc::driver::DevicePtr::device_ptr(&workspace, stream.raw()).0;
        // SAFETY: the handle is live; the workspace is a device allocation of WORKSPACE_BYTES
        // on the handle's device that lives as long as the handle (both are fields of `Self`,
        // the handle declared first so it is destroyed first).
        let status =
            unsafe { cudarc::cublas::sys::cublasSetWorkspace_v2(*blas.handle(), ptr as *mut c_void, WORKSPACE_BYTES) };
        if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(unavailable(&format!("cublasSetWorkspace failed: {status:?}")));
        }
        Ok(Self {
            blas,
            stream: stream.clone(),
            ordinal: stream.raw().context().ordinal(),
            _workspace: workspace,
        })
    }

    /// Captures the work `record` queues through this handle into a CUDA graph (stream
    /// capture of the handle's stream, thread-local mode) and instantiates it. Nothing runs
    /// while capturing; launch the graph with [`CublasGraph::launch`]. Capture is always ended,
    /// also when `record` fails (its error is returned).
    pub fn capture(&self, record: impl FnOnce(&Self) -> Result<()>) -> Result<CublasGraph> {
        let raw = self.stream.raw();
        raw.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(Error::driver("beginning a stream capture"))?;
        let recorded = record(self);
        let ended = raw
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(Error::driver("ending a stream capture"));
        recorded?;
        let graph = ended?.ok_or_else(|| Error::InvalidArgument("the captured cuBLAS sequence is empty".into()))?;
        graph.upload().map_err(Error::driver("uploading a CUDA graph"))?;
        Ok(CublasGraph {
            graph,
            stream: self.stream.clone(),
        })
    }

    /// The stream the handle's work goes on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `C = A B` per `cfg` (its epilogue must be [`crate::ops::gemm::Epilogue::None`]), after
    /// the same buffer checks as [`crate::ops::gemm::Gemm::launch`]. Asynchronous.
    pub fn gemm<I: Element, O: Element>(
        &self,
        cfg: &GemmConfig,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
    ) -> Result<()> {
        check_supported(cfg)?;
        validate_buffers(cfg, self.ordinal, a, b, c, None)?;
        // SAFETY: the buffers were checked against `cfg` and are borrowed for the call; the
        // caller synchronizes before dropping them.
        unsafe { self.gemm_addrs(cfg, a.addr(), b.addr(), c.addr()) }
    }

    /// As [`Cublas::gemm`] on raw device addresses of dense operands.
    ///
    /// # Safety
    /// The addresses hold live dense A, B, C of `cfg`'s types and shapes until the work completes.
    pub unsafe fn gemm_addrs(&self, cfg: &GemmConfig, a: u64, b: u64, c: u64) -> Result<()> {
        check_supported(cfg)?;
        let (m, n, k) = (cfg.m as i32, cfg.n as i32, cfg.k as i32);
        let (lda, ldb) = cfg.leading_dims();
        let op = |l: Layout| match l {
            Layout::RowMajor => cublasOperation_t::CUBLAS_OP_N,
            Layout::Transposed => cublasOperation_t::CUBLAS_OP_T,
        };
        let in_type = match cfg.input {
            InputType::Bf16 => cudaDataType::CUDA_R_16BF,
            InputType::F16 => cudaDataType::CUDA_R_16F,
        };
        let out_type = match cfg.output {
            OutputType::Bf16 => cudaDataType::CUDA_R_16BF,
            OutputType::F16 => cudaDataType::CUDA_R_16F,
            OutputType::F32 => cudaDataType::CUDA_R_32F,
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: column-major C^T (N x M, ld N) = op(B) (N x K) x op(A) (K x M), see the
        // module docs; alpha/beta are host f32 as CUBLAS_COMPUTE_32F requires; the caller
        // vouches for the memory.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *self.blas.handle(),
                op(cfg.b_layout),
                op(cfg.a_layout),
                n,
                m,
                k,
                &alpha as *const f32 as *const c_void,
                b as *const c_void,
                in_type,
                ldb as i32,
                a as *const c_void,
                in_type,
                lda as i32,
                &beta as *const f32 as *const c_void,
                c as *mut c_void,
                out_type,
                n,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| Error::InvalidArgument(format!("cublasGemmEx failed for {cfg:?}: {e}")))
    }
}

fn check_supported(cfg: &GemmConfig) -> Result<()> {
    if cfg.epilogue != crate::ops::gemm::Epilogue::None {
        return Err(Error::InvalidArgument(format!(
            "the cuBLAS baseline computes the plain product only; epilogue {:?} is not supported",
            cfg.epilogue
        )));
    }
    for (name, v) in [("M", cfg.m), ("N", cfg.n), ("K", cfg.k)] {
        if v == 0 || v > i32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "cuBLAS GeMM dimension {name} = {v} out of range"
            )));
        }
    }
    Ok(())
}

/// Per-launch times (ms, sorted) of cuBLAS on `cfg`, measured exactly as
/// [`crate::ops::gemm::time_gemm_samples`] measures our kernel (same operands, rotation, events).
pub fn time_cublas_gemm_samples(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<Vec<f32>> {
    check_supported(cfg)?;
    let stream = cx.new_stream()?;
    let blas = Cublas::new(&stream)?;
    time_launches(cx, cfg, opts, &stream, |_, o: &OperandAddrs| {
        // SAFETY: `time_launches` allocated the operands for `cfg` and keeps them alive until
        // the stream is synchronized.
        unsafe { blas.gemm_addrs(cfg, o.a, o.b, o.c) }
    })
}

/// The median of [`time_cublas_gemm_samples`], in milliseconds.
pub fn time_cublas_gemm(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<f64> {
    let s = time_cublas_gemm_samples(cx, cfg, opts)?;
    Ok(crate::ops::gemm::median(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_cublas_or_gpu_is_an_error_not_a_panic() {
        match Context::new(0) {
            Ok(cx) => {
                let s = cx.default_stream();
                match Cublas::new(&s) {
                    Ok(_) => assert!(cublas_present()),
                    Err(e) => assert!(e.to_string().contains("cuBLAS baseline unavailable"), "{e}"),
                }
            }
            Err(_) => {
                // No GPU: the presence check alone must not panic.
                let _ = cublas_present();
            }
        }
    }

    #[test]
    fn epilogues_are_refused() {
        let cfg = GemmConfig::new(8, 8, 8).epilogue(crate::ops::gemm::Epilogue::Gelu);
        let e = check_supported(&cfg).unwrap_err().to_string();
        assert!(e.contains("plain product only"), "{e}");
        assert!(check_supported(&GemmConfig::new(8, 8, 8)).is_ok());
    }
}
