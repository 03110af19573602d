//! Chrome trace JSON (the "JSON Array/Object format"), which Perfetto and `chrome://tracing`
//! open.
//!
//! Layout written by [`Trace::to_chrome_json`]:
//!
//! * `{"traceEvents": [...], "otherData": {...}}`, `traceEvents` first (Perfetto stops at an
//!   unknown top-level key, and reads `otherData` only to skip it). No `displayTimeUnit`.
//! * One process per stage ([`ChromeLayout::PerStage`], `pid = stage + 1`) or one for the GPU
//!   ([`ChromeLayout::PerGpu`], `pid = 1`); one thread row per SM (`SM 7`), or per SM slot
//!   (`SM 7.1`) where co-resident CTAs overlap in time ([`super::slots`]).
//! * A complete event (`"ph": "X"`, `"cat": "tile"`, named after the stage) per tile over
//!   `[t_start, t_end]`, with the raw event in `args`; a complete event `"cat": "wait"` named
//!   `wait` over `[t_dispatch, min(t_ready, t_start)]` where that is non-empty (clipped so that
//!   slices on one row nest, as Perfetto requires).
//! * `ts`/`dur` in microseconds relative to the first dispatch; the absolute first dispatch
//!   (`%globaltimer` ns) is `otherData.t0_ns`, the metadata is `otherData.cusync`.
//!
//! [`Trace::from_chrome_json`] reads back exactly what was written: the `tile` events' `args`
//! (integers in ns, so nothing is lost to rounding) and the metadata; every other event is
//! ignored. Errors name the JSON path (`$.traceEvents[12].args.t_end`).

use serde_json::{json, Map, Value};

use crate::shared::layout::TraceEvent;
use crate::{Error, Result};

use super::model::{check_event, Trace, TraceMeta};
use super::slots::Slots;

/// The `otherData.cusync_trace_version` this module writes and reads.
pub const FORMAT_VERSION: u64 = 1;

/// How processes are laid out in the Chrome trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChromeLayout {
    /// One process per stage, one thread row per SM (slot) within it.
    #[default]
    PerStage,
    /// One process for the GPU, one thread row per SM (slot), all stages in it.
    PerGpu,
}

impl Trace {
    /// The trace as Chrome trace JSON (see the module docs), one event per line.
    pub fn to_chrome_json(&self, layout: ChromeLayout) -> String {
        let t0 = self.t0().unwrap_or(0);
        let us = |t: u64| t.saturating_sub(t0) as f64 / 1000.0;
        let mut out: Vec<Value> = Vec::new();

        // Processes and the events each holds.
        let groups: Vec<(u32, String, Vec<usize>)> = match layout {
            ChromeLayout::PerStage => self
                .stage_ids()
                .into_iter()
                .map(|s| {
                    let idx = (0..self.events.len()).filter(|&i| self.events[i].stage == s).collect();
                    (s + 1, format!("stage {s}: {}", self.stage_name(s)), idx)
                })
                .collect(),
            ChromeLayout::PerGpu => vec![(
                1,
                format!("{} ({})", self.device(), self.label()),
                (0..self.events.len()).collect(),
            )],
        };

        for (pid, pname, idx) in groups {
            out.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": pname}}));
            out.push(
                json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}),
            );
            let events: Vec<TraceEvent> = idx.iter().map(|&i| self.events[i]).collect();
            let slots = Slots::assign(&events, self.sm_count());
            let per = slots.max_per_sm().max(1);
            let tid = |e: &TraceEvent, k: usize| e.sm * per + slots.slot[k] + 1;
            for (sm, &n) in slots.per_sm.iter().enumerate() {
                for slot in 0..n {
                    let name = if per == 1 {
                        format!("SM {sm}")
                    } else {
                        format!("SM {sm}.{slot}")
                    };
                    let t = sm as u32 * per + slot + 1;
                    out.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": name}}));
                    out.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": t, "args": {"sort_index": t}}));
                }
            }
            for (k, e) in events.iter().enumerate() {
                let wait_end = e.t_ready.min(e.t_start);
                if wait_end > e.t_dispatch {
                    out.push(json!({
                        "name": "wait", "cat": "wait", "ph": "X",
                        "ts": us(e.t_dispatch), "dur": (wait_end - e.t_dispatch) as f64 / 1000.0,
                        "pid": pid, "tid": tid(e, k),
                        "args": {"stage": e.stage, "tile": e.tile, "wait_ns": e.t_ready.saturating_sub(e.t_dispatch)},
                    }));
                }
                out.push(json!({
                    "name": self.stage_name(e.stage), "cat": "tile", "ph": "X",
                    "ts": us(e.t_start), "dur": e.t_end.saturating_sub(e.t_start) as f64 / 1000.0,
                    "pid": pid, "tid": tid(e, k),
                    "args": {
                        "stage": e.stage, "tile": e.tile, "sm": e.sm, "cta": e.cta,
                        "t_dispatch": e.t_dispatch, "t_ready": e.t_ready,
                        "t_start": e.t_start, "t_end": e.t_end,
                    },
                }));
            }
        }

        let mut text = String::from("{\"traceEvents\": [\n");
        let lines: Vec<String> = out.iter().map(Value::to_string).collect();
        text.push_str(&lines.join(",\n"));
        let other = json!({
            "cusync_trace_version": FORMAT_VERSION,
            "t0_ns": t0,
            "cusync": self.meta,
        });
        text.push_str("\n],\n\"otherData\": ");
        text.push_str(&other.to_string());
        text.push_str("}\n");
        text
    }

    /// Reads a trace written by [`Trace::to_chrome_json`]. Malformed input is
    /// [`Error::InvalidArgument`] naming the line and column (bad JSON) or the JSON path.
    pub fn from_chrome_json(text: &str) -> Result<Self> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("malformed JSON: {e}")))?;
        let root = root
            .as_object()
            .ok_or_else(|| bad("$", "expected an object with \"traceEvents\""))?;
        let events = root
            .get("traceEvents")
            .ok_or_else(|| bad("$.traceEvents", "missing"))?
            .as_array()
            .ok_or_else(|| bad("$.traceEvents", "expected an array"))?;

        let meta = match root.get("otherData") {
            None => TraceMeta::default(),
            Some(other) => read_meta(other)?,
        };

        let mut out = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            let path = format!("$.traceEvents[{i}]");
            let ev = ev.as_object().ok_or_else(|| bad(&path, "expected an object"))?;
            let is_tile = ev.get("ph").and_then(Value::as_str) == Some("X")
                && ev.get("cat").and_then(Value::as_str) == Some("tile");
            if !is_tile {
                continue;
            }
            let args_path = format!("{path}.args");
            let args = ev
                .get("args")
                .ok_or_else(|| bad(&args_path, "missing"))?
                .as_object()
                .ok_or_else(|| bad(&args_path, "expected an object"))?;
            let e = TraceEvent {
                stage: field_u32(args, &args_path, "stage")?,
                tile: field_u32(args, &args_path, "tile")?,
                sm: field_u32(args, &args_path, "sm")?,
                cta: field_u32(args, &args_path, "cta")?,
                t_dispatch: field_u64(args, &args_path, "t_dispatch")?,
                t_ready: field_u64(args, &args_path, "t_ready")?,
                t_start: field_u64(args, &args_path, "t_start")?,
                t_end: field_u64(args, &args_path, "t_end")?,
            };
            check_event(&e).map_err(|m| bad(&args_path, &m))?;
            out.push(e);
        }
        Self::new(meta, out)
    }
}

/// The metadata in `otherData`, checking the format version when present.
fn read_meta(other: &Value) -> Result<TraceMeta> {
    if let Some(v) = other.get("cusync_trace_version") {
        if v.as_u64() != Some(FORMAT_VERSION) {
            return Err(bad(
                "$.otherData.cusync_trace_version",
                &format!("this reader knows version {FORMAT_VERSION}, found {v}"),
            ));
        }
    }
    match other.get("cusync") {
        None => Ok(TraceMeta::default()),
        Some(m) => serde_json::from_value(m.clone()).map_err(|e| bad("$.otherData.cusync", &e.to_string())),
    }
}

fn bad(path: &str, msg: &str) -> Error {
    Error::InvalidArgument(format!("{path}: {msg}"))
}

fn field_u64(args: &Map<String, Value>, path: &str, key: &str) -> Result<u64> {
    let v = args.get(key).ok_or_else(|| bad(&format!("{path}.{key}"), "missing"))?;
    v.as_u64().ok_or_else(|| {
        bad(
            &format!("{path}.{key}"),
            &format!("expected an unsigned integer, found {v}"),
        )
    })
}

fn field_u32(args: &Map<String, Value>, path: &str, key: &str) -> Result<u32> {
    let v = field_u64(args, path, key)?;
    u32::try_from(v).map_err(|_| bad(&format!("{path}.{key}"), &format!("{v} does not fit in 32 bits")))
}
