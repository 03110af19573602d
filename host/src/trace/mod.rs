//! Tile traces: what ran where and when, per tile, and what that says about waves.
//!
//! The device records one [`TraceEvent`] per tile (`{stage, tile, sm, cta, t_dispatch, t_ready,
//! t_start, t_end}`, `%globaltimer` nanoseconds; see `cusync_shared::layout`). A [`Trace`] is
//! those events plus the [`TraceMeta`] needed to read them (device, SM count, stage names,
//! grids, blocks per SM, a run label). This module reads and writes traces and analyses them;
//! it never touches a GPU.
//!
//! * [`model`]: [`Trace`], [`TraceMeta`], [`StageMeta`] and validation.
//! * [`chrome`]: Chrome trace JSON (opens in Perfetto and `chrome://tracing`), writer and reader.
//! * [`csv`]: CSV with a header row (metadata in a `#` comment line), writer and reader.
//! * [`files`]: load and save by file extension.
//! * [`slots`]: which CTA slot of its SM each tile occupied (rows of the timeline).
//! * [`analysis`]: per-stage waves, tile and wait times, rounds, tails ([`analyze`]).
//! * [`busy`]: SM busy and occupied fractions over time.
//! * [`critical`]: the (approximate) critical path.
//! * [`periods`]: steady-state tile periods per CTA (a tile's cost to its CTA, end to end).
//! * [`report`]: the plain-text report ([`Analysis`] implements `Display`).
//! * [`svg`]: the SVG timeline, one row per SM slot.
//! * [`synthetic`]: synthetic producer/consumer runs for tests and `cusync trace demo`.
//! * [`cli`]: what the `cusync trace` subcommands do.
//!
//! Every time in an [`Analysis`] is in nanoseconds relative to the trace's first dispatch.

pub mod analysis;
pub mod busy;
pub mod chrome;
pub mod cli;
pub mod critical;
pub mod csv;
pub mod files;
pub mod model;
pub mod periods;
pub mod report;
pub mod slots;
pub mod svg;
pub mod synthetic;

#[cfg(test)]
mod tests;

pub use crate::shared::layout::TraceEvent;
pub use analysis::{
    analyze, Analysis, AnalysisOptions, BetweenTiles, LeadIns, Rounds, SlowSm, SlowSms, StageStats, Stats, Tail,
    SLOW_SM_FACTOR, SLOW_SM_MIN_TILES,
};
pub use busy::TimelineBucket;
pub use chrome::ChromeLayout;
pub use critical::{CriticalPath, Edge, PathStep};
pub use model::{StageMeta, Trace, TraceMeta};
pub use periods::{
    boundary_gap, period_halves, single_tile_events, single_tile_lead_ins, single_tile_spans, tile_periods,
    tile_periods_at,
};
pub use slots::Slots;
pub use svg::SvgOptions;
pub use synthetic::{SyntheticSync, SyntheticTwoStage};
