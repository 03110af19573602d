//! Micro-batching with cuBLAS (the CTA-pipelining paper's baseline, section IV-A): the input's
//! rows are split into chunks, and each chunk runs the whole layer chain; chunks go round
//! robin over `k` streams, so chunk `j`'s layer 2 overlaps chunk `j + 1`'s layer 1. The chunk
//! size decides the trade-off the paper describes (large chunks: long pipeline fill and drain;
//! small chunks: small, inefficient GeMMs and more launches), so it is swept and the best is
//! reported, as the paper does.
//!
//! On one GPU ([`Microbatch::new`], [`microbatch_chain`]) every layer of a chunk runs on the
//! chunk's stream. Across GPUs ([`Microbatch::on_devices`]) layer `i` runs on its device's
//! streams, its output lives on the next layer's device (the planner's placement), and
//! layer `i + 1` of a chunk waits for layer `i` of that chunk through an event.
//!
//! With one GPU, the whole sweep point is captured into a CUDA graph (fork/join over the
//! streams) and replayed, as the paper's baseline runs under CUDA graphs; if capture fails
//! the plain launches are timed and the result says so.

use super::cublas::Cublas;
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::multigpu::chain::validate_chain;
use crate::multigpu::placement::{place, StageBinding};
use crate::multigpu::DeviceSet;
use crate::ops::gemm::GemmConfig;
use crate::runtime::{Context, DeviceBuffer, Event, Stream};
use crate::verify::chain_rows_error;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;
use half::bf16;
use rand::{Rng, SeedableRng};

/// How a sweep runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicrobatchOptions {
    /// Streams per GPU the chunks go round robin over (used by [`microbatch_chain_with`]; a
    /// [`Microbatch`] keeps the streams it was built with).
    pub streams: usize,
    /// Untimed runs before the timed ones, per chunk size.
    pub warmup: usize,
    /// Timed runs per chunk size (the median is reported).
    pub iters: usize,
    /// Capture each chunk size's launches into a CUDA graph (one GPU only).
    pub graph: bool,
    /// Check sampled rows of every layer against an f64 reference after each chunk size.
    pub verify: bool,
    /// Seed of the random input and weights.
    pub seed: u64,
}

/// Streams the chunks go round robin over unless asked otherwise ([`MicrobatchOptions`]' default,
/// and the wave model's micro-batching, `cusync::sim::stacks`).
pub const DEFAULT_STREAMS: usize = 4;

impl Default for MicrobatchOptions {
    fn default() -> Self {
        Self {
            streams: DEFAULT_STREAMS,
            warmup: 2,
            iters: 10,
            graph: true,
            verify: true,
            seed: 5,
        }
    }
}

/// One chunk size's measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkTiming {
    /// Rows per chunk.
    pub chunk: usize,
    /// Number of chunks (the last may be shorter).
    pub pieces: usize,
    /// Milliseconds per run (median, min, max).
    pub stats: Stats,
    /// Whether the runs were CUDA graph replays.
    pub graph: bool,
    /// Worst relative error of the sampled rows (when verified).
    pub error: Option<f64>,
}

/// A sweep's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct MicrobatchResult {
    /// Rows of the input.
    pub m: usize,
    /// `[K, N1, N2, ...]`.
    pub dims: Vec<usize>,
    /// Streams per GPU.
    pub streams: usize,
    /// Every chunk size, in the order swept.
    pub per_chunk: Vec<ChunkTiming>,
    /// The chunk size with the smallest median.
    pub best_chunk: usize,
    /// Its median, in milliseconds.
    pub best_ms: f64,
    /// What did not go as asked (e.g. graph capture refused, plain launches timed).
    pub notes: Vec<String>,
}

impl std::fmt::Display for MicrobatchResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "micro-batching (cuBLAS), M = {}, dims {:?}, {} stream(s) per GPU:",
            self.m, self.dims, self.streams
        )?;
        for t in &self.per_chunk {
            let err = t
                .error
                .map_or(String::new(), |e| format!(", sampled rows within {e:.1e}"));
            writeln!(
                f,
                "  chunk {:>6} rows ({:>3} chunks): {:>9.3} ms (min {:.3}, max {:.3}){}{}{}",
                t.chunk,
                t.pieces,
                t.stats.median,
                t.stats.min,
                t.stats.max,
                if t.graph { ", CUDA graph" } else { "" },
                err,
                if t.chunk == self.best_chunk { "  <- best" } else { "" }
            )?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}

/// `(first row, rows)` of each chunk of `m` rows in pieces of `chunk` (the last one shorter
/// when `chunk` does not divide `m`).
pub fn chunk_rows(m: usize, chunk: usize) -> Vec<(usize, usize)> {
    assert!(chunk > 0, "chunk size 0");
    (0..m).step_by(chunk).map(|r| (r, chunk.min(m - r))).collect()
}

/// The default sweep: powers of two from 256 rows (or `m`, if smaller) up to `m`, and `m`.
pub fn default_chunks(m: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut c = 256.min(m.max(1));
    while c < m {
        v.push(c);
        c *= 2;
    }
    v.push(m.max(1));
    v
}

/// Checks a sweep's arguments: the chain's shape, at least one chunk size, every chunk size
/// in `1..=m`, at least one stream.
pub fn validate_microbatch(m: usize, dims: &[usize], chunks: &[usize], streams: usize) -> Result<()> {
    let layers = dims.len().saturating_sub(1);
    validate_chain(m, dims, &vec![0; layers])?;
    if chunks.is_empty() {
        return Err(Error::InvalidArgument(
            "micro-batching needs at least one chunk size".into(),
        ));
    }
    if let Some(&c) = chunks.iter().find(|&&c| c == 0 || c > m) {
        return Err(Error::InvalidArgument(format!(
            "chunk size {c} out of range: a chunk has 1..={m} rows (M = {m})"
        )));
    }
    if streams == 0 {
        return Err(Error::InvalidArgument(
            "micro-batching needs at least one stream".into(),
        ));
    }
    Ok(())
}

/// Sweeps `chunks` (rows per chunk) for an N-layer bf16 chain `[m, dims[0]] x [dims[0],
/// dims[1]] x ...` on one GPU with cuBLAS and the default options; returns every chunk
/// size's time and the best. The lead's persistent comparison calls this.
pub fn microbatch_chain(cx: &Context, m: usize, dims: &[usize], chunks: &[usize]) -> Result<MicrobatchResult> {
    microbatch_chain_with(cx, m, dims, chunks, &MicrobatchOptions::default())
}

/// As [`microbatch_chain`], with options.
pub fn microbatch_chain_with(
    cx: &Context,
    m: usize,
    dims: &[usize],
    chunks: &[usize],
    opts: &MicrobatchOptions,
) -> Result<MicrobatchResult> {
    validate_microbatch(m, dims, chunks, opts.streams)?;
    let mut mb = Microbatch::new(cx, m, dims, opts.streams, opts.seed)?;
    mb.sweep(chunks, opts)
}

/// The streams and cuBLAS handles of one GPU (or one logical device).
struct Lane<'a> {
    cx: &'a Context,
    /// Layers with the same key share the lane (one GPU, or one logical device).
    key: usize,
    streams: Vec<Stream>,
    blas: Vec<Cublas>,
    /// Per stream, the event that joins it back into the main stream.
    joins: Vec<Event>,
}

/// One chunk size's run, ready to be queued again and again ([`Microbatch::launch`]).
pub struct PreparedRun {
    chunk: usize,
    graph: Option<CudaGraph>,
}

impl PreparedRun {
    /// Rows per chunk.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Whether a launch replays a CUDA graph (else it queues plain launches).
    pub fn is_graph(&self) -> bool {
        self.graph.is_some()
    }
}

/// An N-layer chain's buffers and streams for micro-batching (see the module docs).
pub struct Microbatch<'a> {
    m: usize,
    dims: Vec<usize>,
    /// Per layer, the index of its GPU's lane.
    layer_lane: Vec<usize>,
    lanes: Vec<Lane<'a>>,
    x: DeviceBuffer<bf16>,
    weights: Vec<DeviceBuffer<bf16>>,
    acts: Vec<DeviceBuffer<bf16>>,
    /// `events[layer][piece]`: recorded after a chunk's layer when the next layer runs on
    /// another stream (multi-GPU only); grown on demand.
    events: Vec<Vec<Event>>,
    fork: Event,
}

fn random_bf16(rng: &mut impl Rng, n: usize, scale: f32) -> Vec<bf16> {
    (0..n)
        .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
        .collect()
}

impl<'a> Microbatch<'a> {
    /// Every layer on `cx` (single-GPU micro-batching) with `streams` streams.
    pub fn new(cx: &'a Context, m: usize, dims: &[usize], streams: usize, seed: u64) -> Result<Self> {
        let layers = dims.len().saturating_sub(1);
        Self::build(vec![(cx, 0); layers], m, dims, streams, seed)
    }

    /// Layer `i` on logical device `layer_devices[i]` of `devices` (checked by the placement
    /// planner: devices exist, peer access where a layer writes into the next one's GPU). Each
    /// logical device gets its own streams, also when several share one GPU (virtual devices),
    /// so the cross-device path (a chunk's next layer on another device's stream, ordered by an
    /// event) runs on one GPU too.
    pub fn on_devices(
        devices: &'a DeviceSet,
        layer_devices: &[usize],
        m: usize,
        dims: &[usize],
        streams: usize,
        seed: u64,
    ) -> Result<Self> {
        validate_chain(m, dims, layer_devices)?;
        let stages: Vec<StageBinding> = layer_devices
            .iter()
            .enumerate()
            .map(|(i, &device)| StageBinding {
                name: format!("layer{i}"),
                device,
            })
            .collect();
        let edges: Vec<(usize, usize)> = (1..layer_devices.len()).map(|i| (i - 1, i)).collect();
        place(devices.topology(), &stages, &edges).map_err(|e| Error::InvalidArgument(format!("placement: {e}")))?;
        let contexts = layer_devices
            .iter()
            .map(|&d| devices.context(d).map(|cx| (cx, d)))
            .collect::<Result<Vec<_>>>()?;
        let mb = Self::build(contexts, m, dims, streams, seed)?;
        // Layer i's cuBLAS GeMM writes into the next layer's GPU: refuse what it cannot reach
        // before anything is launched.
        for (i, &d) in layer_devices.iter().enumerate() {
            let input = if i == 0 { &mb.x } else { &mb.acts[i - 1] };
            devices.check_access(d, input.addr(), &format!("micro-batching layer {i}'s input"))?;
            devices.check_access(d, mb.weights[i].addr(), &format!("micro-batching layer {i}'s weight"))?;
            devices.check_access(d, mb.acts[i].addr(), &format!("micro-batching layer {i}'s output"))?;
        }
        Ok(mb)
    }

    /// `contexts[i]`: layer `i`'s context and lane key (layers with one key share streams).
    fn build(contexts: Vec<(&'a Context, usize)>, m: usize, dims: &[usize], streams: usize, seed: u64) -> Result<Self> {
        validate_chain(m, dims, &vec![0; contexts.len()])?;
        if streams == 0 {
            return Err(Error::InvalidArgument(
                "micro-batching needs at least one stream".into(),
            ));
        }
        let mut lanes: Vec<Lane<'a>> = Vec::new();
        let mut layer_lane = Vec::with_capacity(contexts.len());
        for &(cx, key) in &contexts {
            let lane = match lanes.iter().position(|l| l.key == key) {
                Some(i) => i,
                None => {
                    let s = (0..streams).map(|_| cx.new_stream()).collect::<Result<Vec<_>>>()?;
                    let blas = s.iter().map(Cublas::new).collect::<Result<Vec<_>>>()?;
                    let joins = (0..streams).map(|_| cx.new_event()).collect::<Result<Vec<_>>>()?;
                    lanes.push(Lane {
                        cx,
                        key,
                        streams: s,
                        blas,
                        joins,
                    });
                    lanes.len() - 1
                }
            };
            layer_lane.push(lane);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let layers = contexts.len();
        let contexts: Vec<&Context> = contexts.iter().map(|c| c.0).collect();
        let x = contexts[0].upload(&random_bf16(&mut rng, m * dims[0], 1.0))?;
        let mut weights = Vec::with_capacity(layers);
        let mut acts = Vec::with_capacity(layers);
        for i in 0..layers {
            let scale = 1.7 / (dims[i] as f32).sqrt();
            weights.push(contexts[i].upload(&random_bf16(&mut rng, dims[i] * dims[i + 1], scale))?);
            // Layer i's output lives where layer i + 1 reads it.
            let out = contexts[(i + 1).min(layers - 1)];
            acts.push(out.alloc_zeros::<bf16>(m * dims[i + 1])?);
        }
        let fork = lanes[0].cx.new_event()?;
        Ok(Self {
            m,
            dims: dims.to_vec(),
            layer_lane,
            lanes,
            x,
            weights,
            acts,
            events: (0..layers).map(|_| Vec::new()).collect(),
            fork,
        })
    }

    /// Number of layers.
    pub fn layers(&self) -> usize {
        self.dims.len() - 1
    }

    /// The stream every run starts and ends on.
    fn main(&self) -> &Stream {
        &self.lanes[0].streams[0]
    }

    /// Queues one run with chunks of `chunk` rows: fork every stream from the main one, each
    /// chunk's layers on stream `chunk index % k` of each layer's GPU, join back.
    fn enqueue(&mut self, chunk: usize) -> Result<()> {
        let pieces = chunk_rows(self.m, chunk);
        for layer in 0..self.layers().saturating_sub(1) {
            if self.layer_lane[layer + 1] == self.layer_lane[layer] {
                continue; // the next layer of a chunk runs on the same stream
            }
            let lane = &self.lanes[self.layer_lane[layer]];
            while self.events[layer].len() < pieces.len() {
                self.events[layer].push(lane.cx.new_event()?);
            }
        }
        let main = self.main().clone();
        main.record(&self.fork)?;
        // Lane 0's stream 0 is the main stream itself: it neither forks from nor joins into itself.
        for (l, lane) in self.lanes.iter().enumerate() {
            for s in lane.streams.iter().skip(usize::from(l == 0)) {
                s.wait(&self.fork)?;
            }
        }
        for (j, &(row, rows)) in pieces.iter().enumerate() {
            for layer in 0..self.layers() {
                let lane = &self.lanes[self.layer_lane[layer]];
                let slot = j % lane.streams.len();
                if layer > 0 && self.layer_lane[layer - 1] != self.layer_lane[layer] {
                    lane.streams[slot].wait(&self.events[layer - 1][j])?;
                }
                let (k, n) = (self.dims[layer], self.dims[layer + 1]);
                let cfg = GemmConfig::new(rows, n, k);
                let a = if layer == 0 {
                    self.x.addr_of(row * k)
                } else {
                    self.acts[layer - 1].addr_of(row * k)
                };
                let c = self.acts[layer].addr_of(row * n);
                // SAFETY: rows `row..row + rows` of A (`[m, k]`) and C (`[m, n]`) and all of
                // B (`[k, n]`) are inside buffers this struct allocated (bf16, dense) and keeps
                // alive; C is on this layer's GPU or the next layer's, which peer access (or
                // the same GPU) lets this GPU write; callers synchronize before dropping.
                unsafe { lane.blas[slot].gemm_addrs(&cfg, a, self.weights[layer].addr(), c)? };
                if layer + 1 < self.layers() && self.layer_lane[layer + 1] != self.layer_lane[layer] {
                    lane.streams[slot].record(&self.events[layer][j])?;
                }
            }
        }
        for (l, lane) in self.lanes.iter().enumerate() {
            for (s, join) in lane.streams.iter().zip(&lane.joins).skip(usize::from(l == 0)) {
                s.record(join)?;
                main.wait(join)?;
            }
        }
        Ok(())
    }

    /// Captures one run with chunks of `chunk` rows into a CUDA graph on the main stream.
    fn capture(&mut self, chunk: usize) -> Result<CudaGraph> {
        let main = self.main().raw().clone();
        main.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(Error::driver("beginning a stream capture"))?;
        let recorded = self.enqueue(chunk);
        let ended = main
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(Error::driver("ending a stream capture"));
        recorded?;
        let graph = ended?.ok_or_else(|| Error::InvalidArgument("the captured micro-batching run is empty".into()))?;
        graph.upload().map_err(Error::driver("uploading a CUDA graph"))?;
        Ok(graph)
    }

    /// Runs once with chunks of `chunk` rows and waits for it.
    pub fn run(&mut self, chunk: usize) -> Result<()> {
        validate_microbatch(self.m, &self.dims, &[chunk], 1)?;
        self.enqueue(chunk)?;
        self.synchronize()
    }

    fn synchronize(&self) -> Result<()> {
        self.lanes
            .iter()
            .flat_map(|l| l.streams.iter())
            .try_for_each(|s| s.synchronize())
    }

    /// The stream every run starts and ends on: events recorded there around
    /// [`Microbatch::launch`] time one run.
    pub fn main_stream(&self) -> &Stream {
        self.main()
    }

    /// Prepares runs with chunks of `chunk` rows: captured into a CUDA graph when `graph` is
    /// asked and there is one GPU, else plain launches; the note says what was not as asked.
    pub fn prepare(&mut self, chunk: usize, graph: bool) -> Result<(PreparedRun, Option<String>)> {
        validate_microbatch(self.m, &self.dims, &[chunk], 1)?;
        let mut note = None;
        let graph = if graph && self.lanes.len() == 1 {
            match self.capture(chunk) {
                Ok(g) => Some(g),
                Err(e) => {
                    self.synchronize()?;
                    note = Some(format!(
                        "chunk {chunk}: CUDA graph capture failed ({e}); plain launches timed"
                    ));
                    None
                }
            }
        } else {
            if graph {
                note = Some("several devices: plain launches timed (no multi-device graph capture)".into());
            }
            None
        };
        Ok((PreparedRun { chunk, graph }, note))
    }

    /// Queues one prepared run (from the main stream back to it), without waiting.
    pub fn launch(&mut self, run: &PreparedRun) -> Result<()> {
        match &run.graph {
            Some(g) => g.launch().map_err(Error::driver("launching a CUDA graph")),
            None => self.enqueue(run.chunk),
        }
    }

    /// Times chunk size `chunk`: `opts.warmup` untimed runs, then `opts.iters` runs each
    /// between two events on the main stream (graph replays when asked and possible).
    pub fn time(&mut self, chunk: usize, opts: &MicrobatchOptions) -> Result<(ChunkTiming, Option<String>)> {
        let (run, note) = self.prepare(chunk, opts.graph)?;
        let cx = self.lanes[0].cx;
        let mut samples = Vec::with_capacity(opts.iters.max(1));
        for i in 0..opts.warmup + opts.iters.max(1) {
            let (start, end) = (cx.new_event()?, cx.new_event()?);
            self.main().record(&start)?;
            self.launch(&run)?;
            self.main().record(&end)?;
            self.synchronize()?;
            if i >= opts.warmup {
                samples.push(start.elapsed_ms(&end)? as f64);
            }
        }
        Ok((
            ChunkTiming {
                chunk,
                pieces: chunk_rows(self.m, chunk).len(),
                stats: Stats::of(&mut samples),
                graph: run.is_graph(),
                error: None,
            },
            note,
        ))
    }

    /// Waits for every stream's work.
    pub fn wait_idle(&self) -> Result<()> {
        self.synchronize()
    }

    /// Times every chunk size of `chunks` (verifying each when `opts.verify`) and picks the best.
    pub fn sweep(&mut self, chunks: &[usize], opts: &MicrobatchOptions) -> Result<MicrobatchResult> {
        validate_microbatch(self.m, &self.dims, chunks, 1)?;
        let mut per_chunk = Vec::with_capacity(chunks.len());
        let mut notes = Vec::new();
        for &c in chunks {
            let (mut t, note) = self.time(c, opts)?;
            notes.extend(note);
            if opts.verify {
                t.error = Some(self.check_chunk(c)?);
            }
            per_chunk.push(t);
        }
        notes.dedup();
        let best = per_chunk
            .iter()
            .min_by(|a, b| a.stats.median.total_cmp(&b.stats.median))
            .expect("at least one chunk size");
        Ok(MicrobatchResult {
            m: self.m,
            dims: self.dims.clone(),
            streams: self.lanes[0].streams.len(),
            best_chunk: best.chunk,
            best_ms: best.stats.median,
            per_chunk,
            notes,
        })
    }

    /// Runs once with chunks of `chunk` rows on NaN-poisoned outputs and checks rows touching
    /// the first chunk, a chunk boundary and the last chunk against the f64 reference; returns
    /// the worst relative error, an error above 1e-2.
    pub fn check_chunk(&mut self, chunk: usize) -> Result<f64> {
        self.poison()?;
        self.run(chunk)?;
        let rows = sample_rows(self.m, chunk);
        let err = self.check_rows(&rows)?;
        if err > 1e-2 {
            return Err(Error::Verification(format!(
                "micro-batching with chunks of {chunk} rows: relative error {err:.3e} on rows {rows:?} against the f64 reference"
            )));
        }
        Ok(err)
    }

    /// NaN-poisons every layer's output.
    pub fn poison(&mut self) -> Result<()> {
        let nan = bf16::from_f32(f32::NAN);
        self.acts.iter_mut().try_for_each(|a| a.fill(nan))
    }

    /// Every layer's output, downloaded.
    pub fn outputs(&self) -> Result<Vec<Vec<bf16>>> {
        self.acts.iter().map(|a| a.download()).collect()
    }

    /// Worst relative error of rows `rows` of every layer against an f64 reference from the
    /// device's input to that layer.
    pub fn check_rows(&self, rows: &[usize]) -> Result<f64> {
        if let Some(&r) = rows.iter().find(|&&r| r >= self.m) {
            return Err(Error::InvalidArgument(format!("row {r} past M = {}", self.m)));
        }
        let input = self.x.download()?;
        let weights: Vec<Vec<bf16>> = self.weights.iter().map(|w| w.download()).collect::<Result<_>>()?;
        let outputs = self.outputs()?;
        Ok(chain_rows_error(&input, &weights, &outputs, &self.dims, rows))
    }
}

/// Rows that touch the first chunk, a chunk boundary and the last chunk.
fn sample_rows(m: usize, chunk: usize) -> Vec<usize> {
    let mut rows = vec![0, chunk.min(m - 1), m - 1];
    rows.sort_unstable();
    rows.dedup();
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_row_once() {
        assert_eq!(chunk_rows(10, 4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(chunk_rows(8, 8), vec![(0, 8)]);
        assert_eq!(chunk_rows(3, 1), vec![(0, 1), (1, 1), (2, 1)]);
        for (m, c) in [(16384, 3000), (1, 1), (1000, 999)] {
            let pieces = chunk_rows(m, c);
            assert_eq!(pieces.iter().map(|p| p.1).sum::<usize>(), m);
            assert!(pieces.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        }
    }

    #[test]
    fn the_default_sweep_ends_at_m() {
        assert_eq!(default_chunks(16384), vec![256, 512, 1024, 2048, 4096, 8192, 16384]);
        assert_eq!(default_chunks(1000), vec![256, 512, 1000]);
        assert_eq!(default_chunks(100), vec![100]);
        assert_eq!(sample_rows(100, 40), vec![0, 40, 99]);
        assert_eq!(sample_rows(100, 100), vec![0, 99]);
    }

    #[test]
    fn bad_sweeps_are_refused_before_any_gpu_work() {
        let dims = [64, 64, 64];
        assert!(validate_microbatch(128, &dims, &[32, 128], 2).is_ok());
        for (m, dims, chunks, streams, want) in [
            (128, &dims[..], &[0usize][..], 2, "chunk size 0 out of range"),
            (128, &dims[..], &[129][..], 2, "chunk size 129 out of range"),
            (128, &dims[..], &[][..], 2, "at least one chunk size"),
            (128, &dims[..], &[64][..], 0, "at least one stream"),
            (128, &dims[..1], &[64][..], 1, "at least two entries"),
            (0, &dims[..], &[64][..], 1, "at least 1"),
        ] {
            let e = validate_microbatch(m, dims, chunks, streams).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn no_gpu_is_an_error_not_a_panic() {
        if let Ok(cx) = Context::new(0) {
            let r = microbatch_chain_with(
                &cx,
                64,
                &[32, 32],
                &[16, 64],
                &MicrobatchOptions {
                    iters: 1,
                    warmup: 0,
                    ..Default::default()
                },
            );
            assert!(r.is_ok() || r.unwrap_err().to_string().contains("cuBLAS"));
        }
    }
}
