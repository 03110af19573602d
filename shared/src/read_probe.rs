//! The read probe's order flags (issue 3's weight-streaming ceiling): the `order` argument of
//! the probe's entry points (device/src/kernels/read_probe.rs), set by the host
//! (host/src/ops/read_probe.rs).

/// Units laid chunk by chunk (adjacent column blocks of the same rows in a block's range)
/// rather than column block by column block (the skinny plan's order).
pub const ORDER_CHUNK_MAJOR: u32 = 1;

/// Each thread's loads of a unit run down `run / 16` consecutive rows at one 16-byte column
/// (the skinny GeMM's rows: for 128-byte runs a warp's quarter-warps 8 rows apart, each
/// instruction reading rows `r, r + 8, r + 16, r + 24`), rather than vector `tid + 256 j` of the
/// unit (an instruction reading consecutive rows). Not for whole-row runs.
pub const ORDER_ROW_BLOCKED: u32 = 2;
