//! Kernel launches through `cuLaunchKernelEx`, for the launch attribute cudarc's builder does
//! not set: programmatic stream serialization (programmatic dependent launch, sm_90 and up).

use super::Stream;
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaFunction, LaunchConfig};
use std::ffi::c_void;

/// How a kernel is ordered behind the work queued before it on its stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamOrder {
    /// Stream order: the kernel starts after the previous one completed.
    #[default]
    AfterPrevious,
    /// Programmatic dependent launch: the kernel may start once every block of the previous
    /// kernel has issued `griddepcontrol.launch_dependents` (or exited). It must not read the
    /// previous kernel's output without another ordering (cusync's semaphores).
    Programmatic,
}

/// Whether a device (`info`) running device code built for `ptx_arch` can launch kernels
/// programmatically ([`StreamOrder::Programmatic`]): an sm_90 device and the sm_90a build,
/// whose kernels issue `griddepcontrol.launch_dependents` and `griddepcontrol.wait` (an sm_80
/// build would run, but every dependent would wait for its predecessor's end). Stream mode's
/// stages and the persistent megakernel (behind its prefill) both ask it.
pub fn programmatic_supported(info: &crate::runtime::DeviceInfo, ptx_arch: &str) -> Result<()> {
    if info.major < 9 || ptx_arch != "sm_90a" {
        return Err(crate::Error::InvalidArgument(format!(
            "programmatic dependent launch needs an sm_90 device and the sm_90a device code \
             (this is {} with compute capability {}.{}, device code built for {ptx_arch}); use \
             the wait kernel (WaitKernelPolicy::Auto) instead",
            info.name, info.major, info.minor
        )));
    }
    Ok(())
}

/// Pointers to a kernel's arguments, in the order of its parameters: build it with
/// [`kernel_arg`] for each.
pub type KernelArgs<'a> = [*mut c_void];

/// The pointer `cuLaunchKernelEx` reads `value`'s bytes from, as the next kernel argument.
pub fn kernel_arg<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// Launches `function` on `stream` with `config`, ordered by `order`.
///
/// # Safety
/// `args` has one pointer per parameter of `function`, each to a live value of that
/// parameter's type (by-value parameters only: no cudarc slices, whose stream tracking this
/// launch does not do), and every device address inside them is valid for the kernel's run.
pub unsafe fn launch_ordered(
    stream: &Stream,
    function: &CudaFunction,
    config: LaunchConfig,
    args: &mut KernelArgs,
    order: StreamOrder,
) -> Result<()> {
    stream
        .raw()
        .context()
        .bind_to_thread()
        .map_err(Error::driver("binding the context"))?;
    // SAFETY: zeroed is a valid value of this plain C union; `id` selects the member read.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    let programmatic = order == StreamOrder::Programmatic;
    let launch = sys::CUlaunchConfig {
        gridDimX: config.grid_dim.0,
        gridDimY: config.grid_dim.1,
        gridDimZ: config.grid_dim.2,
        blockDimX: config.block_dim.0,
        blockDimY: config.block_dim.1,
        blockDimZ: config.block_dim.2,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: stream.raw().cu_stream(),
        attrs: if programmatic {
            &mut attribute
        } else {
            std::ptr::null_mut()
        },
        numAttrs: u32::from(programmatic),
    };
    // SAFETY: `launch` and `attribute` outlive the call; the caller vouches for `args`.
    unsafe { sys::cuLaunchKernelEx(&launch, function.cu_function(), args.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
        .map_err(Error::driver("launching a kernel (cuLaunchKernelEx)"))
}
