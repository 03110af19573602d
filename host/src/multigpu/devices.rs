//! [`DeviceSet`]: several logical devices opened together, with peer access checked and
//! enabled between their GPUs.
//!
//! A logical device is a GPU ordinal; the same ordinal may appear several times (the
//! virtual-device mode): those logical devices share one [`Context`] (cudarc's contexts are the
//! driver's primary contexts, one per GPU), so kernels of different "devices" run concurrently
//! on the one GPU, "peer" pointers between them are plain local pointers, and no peer access
//! is needed. Edges between them still take the system-scope path, so every multi-GPU code
//! path runs, and is tested, on one GPU.

use super::placement::{Link, Topology};
use crate::error::{Error, Result};
use crate::runtime::Context;
use cudarc::driver::sys::CUresult;
use std::sync::Arc;

/// Several logical devices (see the module docs).
pub struct DeviceSet {
    /// One context per distinct GPU, in order of first use.
    contexts: Vec<Arc<Context>>,
    /// Logical device -> index into `contexts`.
    logical: Vec<usize>,
    topology: Topology,
}

impl std::fmt::Debug for DeviceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSet")
            .field("topology", &self.topology)
            .finish_non_exhaustive()
    }
}

impl DeviceSet {
    /// Opens logical device `i` on GPU `ordinals[i]` (repeat an ordinal for virtual devices on
    /// one GPU), loads cusync's PTX once per GPU, and enables peer access between every
    /// ordered pair of distinct GPUs that `cuDeviceCanAccessPeer` allows. Refuses an empty list
    /// and an ordinal that is not present before opening anything.
    pub fn open(ordinals: &[usize]) -> Result<Self> {
        if ordinals.is_empty() {
            return Err(Error::InvalidArgument("a device set needs at least one device".into()));
        }
        let count = Context::device_count()?;
        if let Some(&bad) = ordinals.iter().find(|&&o| o >= count) {
            return Err(Error::NoDevice(format!(
                "device {bad} asked for, but only {count} present (ordinals 0..{count})"
            )));
        }
        let mut physical: Vec<usize> = Vec::new();
        let mut contexts = Vec::new();
        let mut logical = Vec::with_capacity(ordinals.len());
        for &o in ordinals {
            let index = match physical.iter().position(|&p| p == o) {
                Some(i) => i,
                None => {
                    contexts.push(Arc::new(Context::new(o)?));
                    physical.push(o);
                    physical.len() - 1
                }
            };
            logical.push(index);
        }
        let mut peer = Vec::new();
        for (i, a) in contexts.iter().enumerate() {
            for (j, b) in contexts.iter().enumerate() {
                if i != j && enable_peer_access(a, b)? {
                    // cudarc allocates from the device's stream-ordered memory pool
                    // (`cuMemAllocAsync`) wherever pools are supported (the H200), and pool
                    // memory ignores `cuCtxEnablePeerAccess`: without this grant a kernel on
                    // GPU `a` that touches GPU `b`'s buffers faults (CUDA_ERROR_ILLEGAL_ADDRESS).
                    grant_pool_access(b, a)?;
                    peer.push((physical[i], physical[j]));
                }
            }
        }
        Ok(Self {
            contexts,
            logical,
            topology: Topology::new(ordinals.to_vec(), peer),
        })
    }

    /// `n` logical devices on GPU `ordinal` (the virtual-device mode).
    pub fn virtual_on(ordinal: usize, n: usize) -> Result<Self> {
        if n == 0 {
            return Err(Error::InvalidArgument("a device set needs at least one device".into()));
        }
        Self::open(&vec![ordinal; n])
    }

    /// `n` logical devices: GPUs `0..n` when that many are present, else `n` virtual devices
    /// on GPU `fallback`. The second value says whether the set is virtual.
    pub fn present_or_virtual(n: usize, fallback: usize) -> Result<(Self, bool)> {
        let count = Context::device_count()?;
        if count >= n && n > 1 {
            let ordinals: Vec<usize> = (0..n).collect();
            Ok((Self::open(&ordinals)?, false))
        } else {
            let set = Self::virtual_on(fallback, n)?;
            let is_virtual = set.topology.is_virtual();
            Ok((set, is_virtual))
        }
    }

    /// Number of logical devices.
    pub fn len(&self) -> usize {
        self.logical.len()
    }

    /// Whether the set has no device (never true for an opened set).
    pub fn is_empty(&self) -> bool {
        self.logical.is_empty()
    }

    /// The context logical device `device` runs on.
    pub fn context(&self, device: usize) -> Result<&Context> {
        self.context_arc(device).map(|c| c.as_ref())
    }

    /// As [`DeviceSet::context`], shared.
    pub fn context_arc(&self, device: usize) -> Result<&Arc<Context>> {
        self.logical.get(device).map(|&i| &self.contexts[i]).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "device {device} asked for, but the set has {} device(s) (0..{})",
                self.len(),
                self.len()
            ))
        })
    }

    /// The distinct GPUs' contexts, in order of first use.
    pub fn physical_contexts(&self) -> &[Arc<Context>] {
        &self.contexts
    }

    /// The GPU ordinal of logical device `device`.
    pub fn ordinal(&self, device: usize) -> Option<usize> {
        self.topology.ordinal(device)
    }

    /// Checks, before a launch, that a kernel on logical device `device` may dereference the
    /// device address `addr` (`what` names it in the error): memory of its own GPU always;
    /// memory of another GPU only with peer access enabled and, for memory from a
    /// stream-ordered pool (what cudarc allocates), read-write access granted on that pool.
    /// A refused access here is what would otherwise be a `CUDA_ERROR_ILLEGAL_ADDRESS` at the
    /// next synchronization.
    pub fn check_access(&self, device: usize, addr: u64, what: &str) -> Result<()> {
        let cx = self.context(device)?;
        let mine = cx.info().ordinal;
        let owner = pointer_ordinal(cx, addr)
            .map_err(|e| Error::InvalidArgument(format!("{what}: address {addr:#x} is not device memory ({e})")))?;
        let peer = owner != mine && self.topology.has_peer(mine, owner);
        let pool = if owner == mine { None } else { pool_access(addr, mine)? };
        access_verdict(mine, owner, peer, pool)
            .map_err(|why| Error::InvalidArgument(format!("{what} (device {device}, address {addr:#x}): {why}")))
    }

    /// GPUs per logical device and their peer access, for the planner.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// How logical device `from` reaches `to`'s memory.
    pub fn link(&self, from: usize, to: usize) -> Result<Link> {
        self.context(from)?;
        self.context(to)?;
        Ok(self.topology.link(from, to))
    }

    /// Whether some GPU hosts more than one logical device.
    pub fn is_virtual(&self) -> bool {
        self.topology.is_virtual()
    }

    /// One line per logical device: ordinal, name, SMs, and how it reaches the others.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for d in 0..self.len() {
            let info = self.contexts[self.logical[d]].info();
            let links: Vec<String> = (0..self.len())
                .filter(|&o| o != d)
                .map(|o| format!("-> {o}: {:?}", self.topology.link(d, o)))
                .collect();
            s.push_str(&format!(
                "  device {d}: GPU {} {} ({} SMs) {}\n",
                info.ordinal,
                info.name,
                info.sm_count,
                links.join(", ")
            ));
        }
        s
    }
}

/// Whether `from`'s GPU can access `to`'s memory; if so, enables it (idempotent).
fn enable_peer_access(from: &Context, to: &Context) -> Result<bool> {
    let mut can = 0i32;
    // SAFETY: `can` is a valid out-pointer; both handles are live devices of open contexts.
    let r =
        unsafe { cudarc::driver::sys::cuDeviceCanAccessPeer(&mut can, from.cuda().cu_device(), to.cuda().cu_device()) };
    r.result()
        .map_err(Error::driver("asking for peer access (cuDeviceCanAccessPeer)"))?;
    if can == 0 {
        return Ok(false);
    }
    from.cuda()
        .bind_to_thread()
        .map_err(Error::driver("binding the context"))?;
    // SAFETY: `from`'s context is current on this thread; `to`'s context is a live primary
    // context; flags must be 0.
    let r = unsafe { cudarc::driver::sys::cuCtxEnablePeerAccess(to.cuda().cu_ctx(), 0) };
    match r {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
        other => other
            .result()
            .map(|_| true)
            .map_err(Error::driver("enabling peer access (cuCtxEnablePeerAccess)")),
    }
}

/// Lets `accessor`'s GPU read and write every allocation, present and future, of `owner`'s
/// current memory pool (`cuMemPoolSetAccess`); nothing to do where the device has no pools
/// (cudarc then allocates with `cuMemAlloc`, which `cuCtxEnablePeerAccess` covers).
fn grant_pool_access(owner: &Context, accessor: &Context) -> Result<()> {
    use cudarc::driver::sys::{CUmemAccessDesc, CUmemAccess_flags, CUmemLocation, CUmemLocationType};
    if !owner.cuda().has_async_alloc() {
        return Ok(());
    }
    owner
        .cuda()
        .bind_to_thread()
        .map_err(Error::driver("binding the context"))?;
    let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer; the device handle is live.
    unsafe { cudarc::driver::sys::cuDeviceGetMemPool(&mut pool, owner.cuda().cu_device()) }
        .result()
        .map_err(Error::driver("reading the device's memory pool (cuDeviceGetMemPool)"))?;
    let desc = CUmemAccessDesc {
        location: CUmemLocation {
            type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: accessor.info().ordinal as i32,
        },
        flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: `pool` is `owner`'s live pool; `desc` is one valid descriptor.
    unsafe { cudarc::driver::sys::cuMemPoolSetAccess(pool, &desc, 1) }
        .result()
        .map_err(Error::driver(
            "granting a peer GPU access to the memory pool (cuMemPoolSetAccess)",
        ))
}

/// The GPU whose memory `addr` is (`CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`).
fn pointer_ordinal(cx: &Context, addr: u64) -> Result<usize> {
    use cudarc::driver::sys::CUpointer_attribute;
    cx.cuda()
        .bind_to_thread()
        .map_err(Error::driver("binding the context"))?;
    let mut ordinal: i32 = -1;
    // SAFETY: the attribute is an `int`, written to a valid out-pointer.
    unsafe {
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            addr,
        )
    }
    .result()
    .map_err(Error::driver(
        "asking which GPU holds a pointer (cuPointerGetAttribute)",
    ))?;
    usize::try_from(ordinal).map_err(|_| Error::InvalidArgument(format!("address {addr:#x} is on no GPU")))
}

/// For pool memory at `addr` (a context bound on this thread), whether GPU `ordinal` has read-write access to its pool
/// (`Some(false)`: it does not); `None` when `addr` is not pool memory.
fn pool_access(addr: u64, ordinal: usize) -> Result<Option<bool>> {
    use cudarc::driver::sys::{CUmemAccess_flags, CUmemLocation, CUmemLocationType, CUpointer_attribute};
    let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the attribute is a `CUmemoryPool` handle, written to a valid out-pointer.
    let r = unsafe {
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut pool as *mut cudarc::driver::sys::CUmemoryPool).cast(),
            CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
            addr,
        )
    };
    if r.result().is_err() || pool.is_null() {
        return Ok(None); // not from a pool: `cuCtxEnablePeerAccess` governs it
    }
    let mut flags = CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    let mut location = CUmemLocation {
        type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: ordinal as i32,
    };
    // SAFETY: valid out-pointer and location; `pool` is the live pool of a live allocation.
    unsafe { cudarc::driver::sys::cuMemPoolGetAccess(&mut flags, pool, &mut location) }
        .result()
        .map_err(Error::driver("reading a memory pool's access (cuMemPoolGetAccess)"))?;
    Ok(Some(flags == CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
}

/// Whether a kernel on GPU `mine` may read and write memory on GPU `owner`: `peer` says that
/// `cuCtxEnablePeerAccess` succeeded from `mine` to `owner`; `pool` is `None` for memory not
/// from a pool, else whether the pool grants `mine` read-write access.
pub fn access_verdict(mine: usize, owner: usize, peer: bool, pool: Option<bool>) -> std::result::Result<(), String> {
    if owner == mine {
        return Ok(());
    }
    if !peer {
        return Err(format!(
            "the memory is on GPU {owner}, and GPU {mine} has no peer access to it; place both stages on one GPU or on GPUs of one NVLink domain"
        ));
    }
    if pool == Some(false) {
        return Err(format!(
            "the memory is on GPU {owner} from a stream-ordered memory pool that GPU {mine} may not access (cuMemPoolSetAccess not granted; peer access does not cover pool memory); open the devices with DeviceSet::open"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_memory_needs_peer_access_and_pool_access() {
        assert!(
            access_verdict(0, 0, false, Some(false)).is_ok(),
            "own memory is always fine"
        );
        assert!(
            access_verdict(0, 1, true, None).is_ok(),
            "cuMemAlloc memory: peer access suffices"
        );
        assert!(access_verdict(0, 1, true, Some(true)).is_ok());
        let e = access_verdict(0, 1, true, Some(false)).unwrap_err();
        assert!(e.contains("cuMemPoolSetAccess") && e.contains("GPU 1"), "{e}");
        let e = access_verdict(1, 0, false, None).unwrap_err();
        assert!(e.contains("no peer access"), "{e}");
    }

    #[test]
    fn no_gpu_is_an_error_and_bad_input_is_refused() {
        assert!(matches!(DeviceSet::open(&[]), Err(Error::InvalidArgument(_))));
        assert!(matches!(DeviceSet::virtual_on(0, 0), Err(Error::InvalidArgument(_))));
        match DeviceSet::open(&[0, 10_000]) {
            Err(Error::NoDriver) => {}
            Err(Error::NoDevice(msg)) => assert!(msg.contains("10000") || msg.contains("no CUDA device"), "{msg}"),
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("device 10000 cannot exist"),
        }
    }
}
