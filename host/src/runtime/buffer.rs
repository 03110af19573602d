//! Typed device buffers (bf16, f16, f32, u32, and raw words for protocol state).

use super::context::{Context, Stream};
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, ValidAsZeroBits};

/// Element types a [`DeviceBuffer`] may hold.
pub trait Element: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + 'static {
    /// Name used in error messages ("bf16", "f32", ...).
    const NAME: &'static str;
}

macro_rules! element {
    ($($t:ty => $n:literal),*) => {$(impl Element for $t { const NAME: &'static str = $n; })*};
}
element!(half::bf16 => "bf16", half::f16 => "f16", f32 => "f32", u32 => "u32", u64 => "u64", u8 => "u8", u16 => "u16", i32 => "i32");

/// A typed buffer in one device's memory.
#[derive(Debug)]
pub struct DeviceBuffer<T: Element> {
    slice: CudaSlice<T>,
    stream: Stream,
    ordinal: usize,
}

impl<T: Element> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }

    /// Ordinal of the device that holds the buffer.
    pub fn device(&self) -> usize {
        self.ordinal
    }

    /// The device address of element 0 (for descriptors the kernels read).
    pub fn addr(&self) -> u64 {
        let (ptr, _sync) = self.slice.device_ptr(self.stream.raw());
        ptr
    }

    /// The device address of element `i` (`i <= len`).
    pub fn addr_of(&self, i: usize) -> u64 {
        assert!(
            i <= self.len(),
            "index {i} past the end of a {}-element buffer",
            self.len()
        );
        self.addr() + (i * std::mem::size_of::<T>()) as u64
    }

    /// The underlying cudarc slice (for kernel launches).
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.slice
    }

    /// The underlying cudarc slice, mutably (for kernel launches that write it).
    pub fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slice
    }

    /// Copies the whole buffer to the host (synchronizes the buffer's stream).
    pub fn download(&self) -> Result<Vec<T>> {
        let v = self
            .stream
            .raw()
            .clone_dtoh(&self.slice)
            .map_err(Error::driver("copying device to host"))?;
        self.stream.synchronize()?;
        Ok(v)
    }

    /// Overwrites the buffer with `host` (same length; synchronizes the buffer's stream).
    pub fn upload(&mut self, host: &[T]) -> Result<()> {
        if host.len() != self.len() {
            return Err(Error::InvalidArgument(format!(
                "upload of {} {} elements into a buffer of {}",
                host.len(),
                T::NAME,
                self.len()
            )));
        }
        self.stream
            .raw()
            .memcpy_htod(host, &mut self.slice)
            .map_err(Error::driver("copying host to device"))?;
        self.stream.synchronize()
    }

    /// Sets every element to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        let host = vec![value; self.len()];
        self.upload(&host)
    }
}

impl DeviceBuffer<u8> {
    /// Copies the whole buffer to the host as `#[repr(C)]` records of `T` laid end to end (a
    /// trailing partial record is dropped): trace events and block stamps, which live in
    /// `cusync_shared` and so cannot be buffer [`Element`]s themselves.
    pub fn download_records<T: bytemuck::AnyBitPattern>(&self) -> Result<Vec<T>> {
        Ok(self
            .download()?
            .chunks_exact(std::mem::size_of::<T>())
            .map(bytemuck::pod_read_unaligned)
            .collect())
    }
}

impl Context {
    /// A zeroed buffer of `len` elements.
    pub fn alloc_zeros<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let stream = self.default_stream();
        let slice = stream
            .raw()
            .alloc_zeros::<T>(len.max(1))
            .map_err(Error::driver("allocating device memory"))?;
        stream.synchronize()?;
        Ok(DeviceBuffer {
            slice,
            stream,
            ordinal: self.info().ordinal,
        })
    }

    /// A buffer holding a copy of `host`.
    pub fn upload<T: Element>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let stream = self.default_stream();
        let slice = stream
            .raw()
            .clone_htod(host)
            .map_err(Error::driver("copying host to device"))?;
        stream.synchronize()?;
        Ok(DeviceBuffer {
            slice,
            stream,
            ordinal: self.info().ordinal,
        })
    }
}
