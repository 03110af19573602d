//! [`Context`]: one CUDA device with the embedded PTX module loaded.

use crate::error::{Error, Result};
use crate::kernels;
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DriverError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// GPU time [`Context::hold`] keeps a stream busy before a timed region of the MLP, stream-mode
/// and protocol comparisons: longer than the host takes to submit any of them (tens of µs),
/// so every variant is timed from a queued start, none from an idle GPU waiting for the host.
pub const TIMING_HOLD_NS: u64 = 200_000;

/// What cusync needs to know about a device to plan launches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Compute capability, major.
    pub major: i32,
    /// Compute capability, minor.
    pub minor: i32,
    /// Number of SMs.
    pub sm_count: u32,
    /// Shared memory a block may opt in to, in bytes.
    pub max_smem_per_block_optin: u32,
    /// Shared memory per SM, in bytes.
    pub smem_per_sm: u32,
    /// L2 cache size, in bytes.
    pub l2_bytes: u32,
    /// Device memory, in bytes.
    pub total_mem: usize,
}

impl DeviceInfo {
    /// A 132-SM sm_90 device named `name` (unit tests of the rules that read the device).
    #[cfg(test)]
    pub(crate) fn hopper_for_tests(name: &str) -> Self {
        DeviceInfo {
            ordinal: 0,
            name: name.into(),
            major: 9,
            minor: 0,
            sm_count: 132,
            max_smem_per_block_optin: 232_448,
            smem_per_sm: 233_472,
            l2_bytes: 50 << 20,
            total_mem: 80 << 30,
        }
    }
}

/// One CUDA device with cusync's PTX module loaded.
///
/// Cross-stream event tracking is off: cusync's stages run on separate streams *on purpose*
/// and order themselves with semaphores; cudarc's tracking would serialize them.
pub struct Context {
    cuda: Arc<CudaContext>,
    module: Arc<CudaModule>,
    info: DeviceInfo,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

/// A CUDA stream of a [`Context`].
#[derive(Clone, Debug)]
pub struct Stream(Arc<CudaStream>);

/// A CUDA event (timing enabled).
#[derive(Debug)]
pub struct Event(CudaEvent);

/// Whether the CUDA driver library can be loaded on this machine.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn map_init(e: DriverError) -> Error {
    use cudarc::driver::sys::CUresult;
    match e.0 {
        CUresult::CUDA_ERROR_NO_DEVICE => Error::NoDevice("the driver reports no CUDA device".into()),
        CUresult::CUDA_ERROR_INVALID_DEVICE => Error::NoDevice("no CUDA device with that ordinal".into()),
        _ => Error::Driver {
            op: "initializing the device",
            source: e,
        },
    }
}

impl Context {
    /// Number of CUDA devices, or an error if there is no driver.
    pub fn device_count() -> Result<usize> {
        if !driver_present() {
            return Err(Error::NoDriver);
        }
        let n = CudaContext::device_count().map_err(map_init)?;
        Ok(n.max(0) as usize)
    }

    /// Opens device `ordinal`, checks that it can run the embedded PTX, and loads the module.
    pub fn new(ordinal: usize) -> Result<Self> {
        let count = Self::device_count()?;
        if count == 0 {
            return Err(Error::NoDevice("the driver reports no CUDA device".into()));
        }
        if ordinal >= count {
            return Err(Error::NoDevice(format!(
                "device {ordinal} asked for, but only {count} present"
            )));
        }
        let cuda = CudaContext::new(ordinal).map_err(map_init)?;
        let info = Self::read_info(&cuda, ordinal)?;
        check_arch(&info)?;
        // SAFETY: cusync synchronizes its streams itself (semaphores, explicit stream syncs
        // before any host access); no buffer is freed while a kernel that uses it runs,
        // because buffers are dropped only after the owning call synchronized.
        unsafe { cuda.disable_event_tracking() };
        let image = match kernels::module_image()? {
            kernels::ModuleImage::Ptx(text) => cudarc::nvrtc::Ptx::from_src(text),
            kernels::ModuleImage::Cubin(bytes) => cudarc::nvrtc::Ptx::from_binary(bytes),
        };
        let module = cuda
            .load_module(image)
            .map_err(Error::driver("loading the cusync PTX module"))?;
        let cx = Self {
            cuda,
            module,
            info,
            functions: Mutex::new(HashMap::new()),
        };
        for name in kernels::all_entry_points() {
            cx.function(name)?;
        }
        Ok(cx)
    }

    fn read_info(cuda: &Arc<CudaContext>, ordinal: usize) -> Result<DeviceInfo> {
        let attr = |a| cuda.attribute(a).map_err(Error::driver("reading device attributes"));
        let (major, minor) = cuda
            .compute_capability()
            .map_err(Error::driver("reading compute capability"))?;
        Ok(DeviceInfo {
            ordinal,
            name: cuda.name().map_err(Error::driver("reading the device name"))?,
            major,
            minor,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            max_smem_per_block_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32,
            smem_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            total_mem: cuda.total_mem().map_err(Error::driver("reading device memory size"))?,
        })
    }

    /// The device's properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The underlying cudarc context (for launches the library does not wrap yet).
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.cuda
    }

    /// A kernel of the embedded module by name (cached).
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut cache = self.functions.lock().expect("function cache poisoned");
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .module
            .load_function(name)
            .map_err(|_| Error::InvalidArgument(format!("kernel `{name}` is not in the embedded PTX")))?;
        load_eagerly(&f)?;
        cache.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// Allows `name` to use up to `bytes` of dynamic shared memory (needed above 48 KiB).
    pub fn set_max_dynamic_smem(&self, name: &str, bytes: u32) -> Result<()> {
        if bytes > self.info.max_smem_per_block_optin {
            return Err(Error::InvalidArgument(format!(
                "{bytes} bytes of shared memory asked for `{name}`, but a block can have at most {}",
                self.info.max_smem_per_block_optin
            )));
        }
        let f = self.function(name)?;
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .map_err(Error::driver("setting the dynamic shared memory limit"))
    }

    /// How many blocks of `name` fit on one SM with `threads` threads and `smem` dynamic bytes.
    pub fn occupancy(&self, name: &str, threads: u32, smem: u32) -> Result<u32> {
        let f = self.function(name)?;
        let n = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
            .map_err(Error::driver("querying occupancy"))?;
        Ok(n)
    }

    /// Clusters of entry point `name` (compiled with a required cluster size of `cluster`
    /// blocks) that can be resident at once with `threads` threads and `smem` bytes of dynamic
    /// shared memory per block (`cuOccupancyMaxActiveClusters`).
    pub fn max_active_clusters(&self, name: &str, cluster: u32, threads: u32, smem: u32) -> Result<u32> {
        let f = self.function(name)?;
        self.cuda
            .bind_to_thread()
            .map_err(Error::driver("binding the context"))?;
        let config = cudarc::driver::sys::CUlaunchConfig {
            gridDimX: cluster,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: threads,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: smem,
            hStream: std::ptr::null_mut(),
            attrs: std::ptr::null_mut(),
            numAttrs: 0,
        };
        let mut n: std::ffi::c_int = 0;
        // SAFETY: `f` is a live function of this (bound) context; `config` and `n` outlive the
        // call, and the kernel's cluster size comes from its PTX (no attributes passed).
        unsafe { cudarc::driver::sys::cuOccupancyMaxActiveClusters(&mut n, f.cu_function(), &config) }
            .result()
            .map_err(Error::driver("querying cluster occupancy"))?;
        Ok(n.max(0) as u32)
    }

    /// The context's default stream (legacy stream semantics are not used by cusync).
    pub fn default_stream(&self) -> Stream {
        Stream(self.cuda.default_stream())
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream> {
        self.cuda
            .new_stream()
            .map(Stream)
            .map_err(Error::driver("creating a stream"))
    }

    /// A new non-blocking stream whose blocks the hardware schedules ahead of those of
    /// `rank`-higher streams: rank 0 is the highest priority the device offers; ranks past the
    /// device's range share its lowest priority.
    pub fn new_stream_ranked(&self, rank: u32) -> Result<Stream> {
        self.cuda
            .bind_to_thread()
            .map_err(Error::driver("binding the context"))?;
        let (least, greatest) =
            cudarc::driver::result::stream::get_priority_range().map_err(Error::driver("reading stream priorities"))?;
        let priority = (greatest + rank as i32).min(least);
        self.cuda
            .new_stream_with_priority(priority)
            .map(Stream)
            .map_err(Error::driver("creating a stream with priority"))
    }

    /// A new timing event.
    pub fn new_event(&self) -> Result<Event> {
        self.cuda
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map(Event)
            .map_err(Error::driver("creating an event"))
    }

    /// Keeps `stream` busy for `ns` nanoseconds of GPU time (the one-thread `hold_stream`
    /// kernel, which waits on nothing but the clock). Queued before a timed region's start
    /// event, it lets the host submit the whole region while the GPU is busy, so the events
    /// time the GPU's work and not the host's launch calls ([`TIMING_HOLD_NS`]).
    pub fn hold(&self, stream: &Stream, ns: u64) -> Result<()> {
        use cudarc::driver::{LaunchConfig, PushKernelArg};
        let f = self.function("hold_stream")?;
        let mut b = stream.raw().launch_builder(&f);
        b.arg(&ns);
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `hold_stream` takes one u64 by value and touches no memory.
        unsafe { b.launch(one) }
            .map(|_| ())
            .map_err(Error::driver("launching hold_stream"))
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.cuda
            .synchronize()
            .map_err(Error::driver("synchronizing the device"))
    }
}

impl Stream {
    /// The underlying cudarc stream (for building launches).
    pub fn raw(&self) -> &Arc<CudaStream> {
        &self.0
    }

    /// Waits for all work queued on this stream; reports any asynchronous launch error.
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize().map_err(Error::driver("synchronizing a stream"))
    }

    /// Records `event` on this stream.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.0.record(&self.0).map_err(Error::driver("recording an event"))
    }

    /// Makes this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.0.wait(&event.0).map_err(Error::driver("waiting on an event"))
    }
}

impl Event {
    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.0.elapsed_ms(&end.0).map_err(Error::driver("reading event time"))
    }

    /// Waits until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize().map_err(Error::driver("synchronizing an event"))
    }
}

/// Forces `f` to be loaded now (`cuFuncLoad`).
///
/// Under CUDA's lazy module loading (the default since CUDA 12.2) a kernel is loaded at its
/// first launch, and loading waits for the kernels already running on the device. A consumer
/// that spins on a semaphore which a not-yet-loaded producer would post then waits for the
/// producer's load, which waits for the consumer: a deadlock that only the timeout ends (seen on
/// the H200 on 2026-11-29). So every kernel is loaded when the context opens.
fn load_eagerly(f: &CudaFunction) -> Result<()> {
    // SAFETY: `f` is a live function handle of this context's module.
    let r = unsafe { cudarc::driver::sys::cuFuncLoad(f.cu_function()) };
    r.result().map_err(Error::driver("loading a kernel (cuFuncLoad)"))
}

/// Whether the driver has `f` loaded (tests check that no kernel is left to lazy loading).
pub fn is_loaded(f: &CudaFunction) -> Result<bool> {
    let mut state = cudarc::driver::sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_UNLOADED;
    // SAFETY: `state` is a valid out-pointer and `f` a live function handle.
    let r = unsafe { cudarc::driver::sys::cuFuncIsLoaded(&mut state, f.cu_function()) };
    r.result().map_err(Error::driver("asking whether a kernel is loaded"))?;
    Ok(state == cudarc::driver::sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_LOADED)
}

/// Refuses a device the embedded PTX cannot run on, before anything is loaded or launched.
pub(crate) fn check_arch(info: &DeviceInfo) -> Result<()> {
    let ((need_major, need_minor), exact_family) = kernels::required_capability();
    let ok = if exact_family {
        info.major == need_major && info.minor == need_minor
    } else {
        (info.major, info.minor) >= (need_major, need_minor)
    };
    if ok {
        return Ok(());
    }
    Err(Error::UnsupportedArch {
        device: info.name.clone(),
        major: info.major,
        minor: info.minor,
        ptx_arch: kernels::PTX_ARCH,
        hint: if exact_family {
            "sm_90a code runs only on Hopper (sm_90); rebuild with CUSYNC_ARCH=sm_80 for other GPUs"
        } else {
            "cusync needs an Ampere (sm_80) or newer GPU"
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: i32, minor: i32) -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "test".into(),
            major,
            minor,
            sm_count: 1,
            max_smem_per_block_optin: 0,
            smem_per_sm: 0,
            l2_bytes: 0,
            total_mem: 0,
        }
    }

    #[test]
    fn arch_check_matches_the_embedded_ptx() {
        let ((maj, min), exact) = kernels::required_capability();
        assert!(check_arch(&info(maj, min)).is_ok());
        assert!(matches!(check_arch(&info(7, 0)), Err(Error::UnsupportedArch { .. })));
        if exact {
            // sm_90a PTX must be refused on Blackwell and Ampere alike.
            assert!(check_arch(&info(10, 0)).is_err());
            assert!(check_arch(&info(8, 0)).is_err());
        } else {
            assert!(check_arch(&info(9, 0)).is_ok());
        }
    }

    #[test]
    fn no_gpu_is_an_error_not_a_panic() {
        // On a machine without a driver or device this must be an Err; with one, Ok.
        match Context::new(0) {
            Ok(cx) => assert!(cx.info().sm_count > 0),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    matches!(e, Error::NoDriver | Error::NoDevice(_) | Error::UnsupportedArch { .. }),
                    "unexpected error: {msg}"
                );
            }
        }
        assert!(matches!(
            Context::new(10_000),
            Err(Error::NoDriver | Error::NoDevice(_))
        ));
    }
}
