//! The stream-mode protocol check: a consumer kernel, launched first on its own stream, waits
//! per block on semaphores that a producer kernel, launched second on another stream, posts
//! after writing its tile. It proves the streams really run concurrently (were they serialized,
//! the consumer would time out and say so) and that every element the consumer reads is the one
//! the producer wrote. The `cusync` binary runs it as part of its main job; the GPU tests run it
//! with several epochs and block permutations.

use crate::cudarc::driver::{LaunchConfig, PushKernelArg};
use crate::error::{Error, Result};
use crate::runtime::{Context, DeviceBuffer, ErrorSlotBuffer, Stream};

/// Shape of the check.
#[derive(Clone, Copy, Debug)]
pub struct StreamPairConfig {
    /// Blocks of each kernel (one tile each).
    pub blocks: u32,
    /// Floats per tile.
    pub tile_elems: u32,
    /// Threads per block.
    pub threads: u32,
    /// How long each producer block waits before writing, so consumers really wait.
    pub producer_delay_ns: u64,
    /// Bound on each consumer wait.
    pub timeout_ns: u64,
}

impl Default for StreamPairConfig {
    fn default() -> Self {
        Self {
            blocks: 96,
            tile_elems: 8192,
            threads: 256,
            producer_delay_ns: 200_000,
            timeout_ns: 2_000_000_000,
        }
    }
}

/// The value producer block `b` writes at element `i` in launch `epoch` (mirrors
/// `device/src/kernels/protocol_test.rs`).
pub fn produced_value(b: u32, i: u32, epoch: u32) -> f32 {
    (b * 1000 + i % 1000) as f32 + 0.25 * epoch as f32
}

/// Device state of one producer/consumer pair; semaphores persist across epochs.
pub struct StreamPair {
    cfg: StreamPairConfig,
    data: DeviceBuffer<f32>,
    sems: DeviceBuffer<u32>,
    out: DeviceBuffer<f32>,
    error: ErrorSlotBuffer,
    producer_stream: Stream,
    consumer_stream: Stream,
}

/// What one epoch of the check measured.
#[derive(Clone, Copy, Debug)]
pub struct EpochReport {
    /// Epoch (0-based).
    pub epoch: u32,
    /// Host wall time from the consumer's launch to both streams idle, in ms.
    pub wall_ms: f64,
}

impl StreamPair {
    /// Allocates the pair with poisoned (NaN) data and output and zeroed semaphores.
    pub fn new(cx: &Context, cfg: StreamPairConfig) -> Result<Self> {
        let n = (cfg.blocks * cfg.tile_elems) as usize;
        Ok(Self {
            cfg,
            data: cx.upload(&vec![f32::NAN; n])?,
            sems: cx.alloc_zeros(cfg.blocks as usize)?,
            out: cx.upload(&vec![f32::NAN; n])?,
            error: ErrorSlotBuffer::new(cx)?,
            producer_stream: cx.new_stream()?,
            consumer_stream: cx.new_stream()?,
        })
    }

    /// The semaphores (for tests that inspect addresses and counts).
    pub fn semaphores(&self) -> &DeviceBuffer<u32> {
        &self.sems
    }

    fn launch_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.cfg.blocks, 1, 1),
            block_dim: (self.cfg.threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Launches the consumer of `epoch` on its stream; consumer block c reads producer tile
    /// `(c * perm_mul) % blocks`.
    pub fn launch_consumer(&mut self, cx: &Context, epoch: u32, perm_mul: u32) -> Result<()> {
        let f = cx.function("protocol_consumer")?;
        let cfg = self.launch_config();
        let (n, err, timeout) = (self.cfg.tile_elems, self.error.addr(), self.cfg.timeout_ns);
        let mut b = self.consumer_stream.raw().launch_builder(&f);
        b.arg(self.data.slice())
            .arg(self.sems.slice())
            .arg(self.out.slice_mut());
        b.arg(&n).arg(&epoch).arg(&perm_mul).arg(&err).arg(&timeout);
        // SAFETY: argument types and order match `protocol_consumer`; buffers hold blocks * n elements.
        unsafe { b.launch(cfg) }.map_err(Error::driver("launching protocol_consumer"))?;
        Ok(())
    }

    /// Launches the producer of `epoch` on its stream.
    pub fn launch_producer(&mut self, cx: &Context, epoch: u32) -> Result<()> {
        let f = cx.function("protocol_producer")?;
        let cfg = self.launch_config();
        let (n, delay) = (self.cfg.tile_elems, self.cfg.producer_delay_ns);
        let mut b = self.producer_stream.raw().launch_builder(&f);
        b.arg(self.data.slice_mut())
            .arg(self.sems.slice_mut())
            .arg(&n)
            .arg(&epoch)
            .arg(&delay);
        // SAFETY: argument types and order match `protocol_producer`; buffers hold blocks * n elements.
        unsafe { b.launch(cfg) }.map_err(Error::driver("launching protocol_producer"))?;
        Ok(())
    }

    /// Waits for both streams and returns the device's timeout report, if any.
    pub fn finish(&self) -> Result<()> {
        self.consumer_stream.synchronize()?;
        self.producer_stream.synchronize()?;
        self.error.check()
    }

    /// Checks every consumer element against the producer's formula.
    pub fn verify(&self, epoch: u32, perm_mul: u32) -> Result<()> {
        let v = self.out.download()?;
        let (blocks, n) = (self.cfg.blocks, self.cfg.tile_elems);
        for c in 0..blocks {
            let src = (c * perm_mul) % blocks;
            for i in 0..n {
                let got = v[(c * n + i) as usize];
                let want = 2.0 * produced_value(src, i, epoch) + 1.0;
                if got != want {
                    return Err(Error::Verification(format!(
                        "epoch {epoch}: consumer block {c} element {i} is {got}, expected {want}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// One epoch: consumer first, producer second, wait, verify.
    pub fn run_epoch(&mut self, cx: &Context, epoch: u32, perm_mul: u32) -> Result<EpochReport> {
        let t0 = std::time::Instant::now();
        self.launch_consumer(cx, epoch, perm_mul)?;
        self.launch_producer(cx, epoch)?;
        self.finish()?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.verify(epoch, perm_mul)?;
        Ok(EpochReport { epoch, wall_ms })
    }
}
