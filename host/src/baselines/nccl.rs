//! NCCL through cudarc's `nccl` feature (dynamically loaded, like the driver and cuBLAS): the
//! all-reduce of the tensor-parallel baseline.
//!
//! cudarc looks for `libnccl.so` (and `libnccl.so.13`, `.12`, ..., `.1`: see
//! `cudarc::get_lib_name_candidates`), **not** `libnccl.so.2`, the soname the `nvidia-nccl-cu13`
//! Python package ships. So the library needs a `libnccl.so` link on `LD_LIBRARY_PATH`;
//! `scripts/gpu-check` makes one:
//!
//! ```sh
//! NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')
//! mkdir -p /tmp/cusync-nccl && ln -sf "$NCCL_LIB/libnccl.so.2" /tmp/cusync-nccl/libnccl.so
//! export LD_LIBRARY_PATH=/tmp/cusync-nccl:$NCCL_LIB:$LD_LIBRARY_PATH
//! ```
//!
//! Without it, [`NcclGroup::new`] returns an error naming this recipe; nothing panics.
//! NCCL puts one rank per GPU: a communicator over virtual devices of one GPU is refused, so
//! on one GPU the all-reduce path runs with one rank.

use crate::error::{Error, Result};
use crate::runtime::{DeviceBuffer, Stream};
use cudarc::nccl::{group_end, group_start, Comm, ReduceOp};
use half::bf16;

/// Whether libnccl can be loaded on this machine.
pub fn nccl_present() -> bool {
    // SAFETY: only tries to dlopen libnccl; no NCCL call is made.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// Why NCCL is unavailable, with the fix.
pub fn nccl_unavailable_reason() -> String {
    "NCCL could not be loaded: cudarc looks for libnccl.so (not libnccl.so.2); link \
     libnccl.so -> libnccl.so.2 from the nvidia-nccl-cu13 package into a directory on \
     LD_LIBRARY_PATH (scripts/gpu-check does this; see cusync::baselines::nccl)"
        .to_string()
}

fn nccl_error(op: &str, e: cudarc::nccl::result::NcclError) -> Error {
    Error::InvalidArgument(format!("NCCL {op} failed: {:?}", e.0))
}

/// The loaded library's version `(major, minor, patch)`.
pub fn nccl_version() -> Result<(u32, u32, u32)> {
    if !nccl_present() {
        return Err(Error::InvalidArgument(nccl_unavailable_reason()));
    }
    let mut v: std::ffi::c_int = 0;
    // SAFETY: the library is present (checked above); `v` is a valid out-pointer.
    let r = unsafe { cudarc::nccl::sys::ncclGetVersion(&mut v) };
    r.result().map_err(|e| nccl_error("ncclGetVersion", e))?;
    let v = v.max(0) as u32;
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
    Ok((v / 10000, (v / 100) % 100, v % 100))
}

/// One NCCL communicator over a set of streams, one rank per stream, each on its own GPU,
/// driven from this thread (`ncclCommInitAll`).
pub struct NcclGroup {
    comms: Vec<Comm>,
}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclGroup").field("ranks", &self.comms.len()).finish()
    }
}

/// Refuses a rank list NCCL cannot run: none, or two ranks on one GPU.
pub fn validate_ranks(ordinals: &[usize]) -> Result<()> {
    if ordinals.is_empty() {
        return Err(Error::InvalidArgument(
            "an NCCL communicator needs at least one rank".into(),
        ));
    }
    for (i, a) in ordinals.iter().enumerate() {
        if let Some(j) = ordinals[i + 1..].iter().position(|b| b == a) {
            return Err(Error::InvalidArgument(format!(
                "ranks {i} and {} are both on GPU {a}; NCCL puts one rank per GPU (virtual devices of one GPU cannot be NCCL ranks)",
                i + 1 + j
            )));
        }
    }
    Ok(())
}

impl NcclGroup {
    /// Rank `r` on `streams[r]` (distinct GPUs). An error, not a panic, without NCCL.
    pub fn new(streams: &[Stream]) -> Result<Self> {
        let ordinals: Vec<usize> = streams.iter().map(|s| s.raw().context().ordinal()).collect();
        validate_ranks(&ordinals)?;
        if !nccl_present() {
            return Err(Error::InvalidArgument(nccl_unavailable_reason()));
        }
        let comms = Comm::from_devices(streams.iter().map(|s| s.raw().clone()).collect())
            .map_err(|e| nccl_error("ncclCommInitAll", e))?;
        Ok(Self { comms })
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.comms.len()
    }

    /// Sums `send[r]` over all ranks into every `recv[r]` (bf16, out of place), each rank's
    /// work queued on its stream, all ranks in one NCCL group. Asynchronous.
    pub fn all_reduce_sum_bf16(
        &self,
        send: &[&DeviceBuffer<bf16>],
        recv: &mut [&mut DeviceBuffer<bf16>],
    ) -> Result<()> {
        let n = self.comms.len();
        if send.len() != n || recv.len() != n {
            return Err(Error::InvalidArgument(format!(
                "all-reduce over {n} rank(s) given {} send and {} receive buffer(s)",
                send.len(),
                recv.len()
            )));
        }
        for (r, (s, d)) in send.iter().zip(recv.iter()).enumerate() {
            let ordinal = self.comms[r].ordinal();
            if s.len() != d.len() || s.len() != send[0].len() {
                return Err(Error::InvalidArgument(format!(
                    "all-reduce rank {r}: send {} and receive {} elements (rank 0 sends {})",
                    s.len(),
                    d.len(),
                    send[0].len()
                )));
            }
            if s.device() != ordinal || d.device() != ordinal {
                return Err(Error::InvalidArgument(format!(
                    "all-reduce rank {r} runs on GPU {ordinal}, but its buffers are on GPUs {} and {}",
                    s.device(),
                    d.device()
                )));
            }
        }
        group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        let queued = self
            .comms
            .iter()
            .zip(send.iter().zip(recv.iter_mut()))
            .try_for_each(|(c, (s, d))| {
                c.all_reduce(s.slice(), d.slice_mut(), &ReduceOp::Sum)
                    .map(|_| ())
                    .map_err(|e| nccl_error("ncclAllReduce", e))
            });
        let ended = group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
        queued?;
        ended.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_on_one_gpu_are_refused() {
        assert!(validate_ranks(&[0, 1, 2]).is_ok());
        let e = validate_ranks(&[0, 1, 0]).unwrap_err().to_string();
        assert!(e.contains("ranks 0 and 2 are both on GPU 0"), "{e}");
        assert!(validate_ranks(&[]).is_err());
    }

    #[test]
    fn missing_nccl_is_an_error_not_a_panic() {
        // Without the library the version query must say how to fix it; with it, a version.
        match nccl_version() {
            Ok((major, _, _)) => assert!(major >= 2),
            Err(e) => assert!(e.to_string().contains("libnccl.so"), "{e}"),
        }
    }
}
