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

#[cfg(test)]
mod tests {
    use super::*;

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
