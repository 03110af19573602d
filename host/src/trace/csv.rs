//! CSV: one row per tile under a header row, metadata in a comment line.
//!
//! ```text
//! # cusync trace v1: one row per tile, times in %globaltimer ns
//! # cusync-meta: {"label":"...","device":"...","sm_count":132,"stages":[...]}
//! stage,tile,sm,cta,t_dispatch,t_ready,t_start,t_end
//! 0,0,3,0,1000000,1000000,1000200,1010200
//! ```
//!
//! Readers that skip `#` comments (`pandas.read_csv(f, comment="#")`) see a plain table.
//! [`Trace::from_csv`] takes the columns by name (in any order; extra columns are ignored),
//! skips blank lines and other comments, and names the line of any error.

use crate::shared::layout::TraceEvent;
use crate::{Error, Result};

use super::model::{check_event, Trace, TraceMeta};

/// The header row, in the order [`Trace::to_csv`] writes it.
pub const COLUMNS: [&str; 8] = [
    "stage",
    "tile",
    "sm",
    "cta",
    "t_dispatch",
    "t_ready",
    "t_start",
    "t_end",
];

const META_PREFIX: &str = "# cusync-meta:";

impl Trace {
    /// The trace as CSV (see the module docs).
    pub fn to_csv(&self) -> String {
        let meta = serde_json::to_string(&self.meta).unwrap_or_else(|_| "{}".into());
        let mut out = format!(
            "# cusync trace v1: one row per tile, times in %globaltimer ns\n{META_PREFIX} {meta}\n{}\n",
            COLUMNS.join(",")
        );
        for e in &self.events {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{}\n",
                e.stage, e.tile, e.sm, e.cta, e.t_dispatch, e.t_ready, e.t_start, e.t_end
            ));
        }
        out
    }

    /// Reads CSV written by [`Trace::to_csv`] (or by hand, with that header). Malformed input
    /// is [`Error::InvalidArgument`] naming the line (and column).
    pub fn from_csv(text: &str) -> Result<Self> {
        let mut meta = TraceMeta::default();
        // Position of each of COLUMNS in the header, and the header's width.
        let mut header: Option<([usize; 8], usize)> = None;
        let mut events = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = line.trim();
            let at = |msg: String| Error::InvalidArgument(format!("line {line_no}: {msg}"));
            if let Some(json) = line.strip_prefix(META_PREFIX) {
                meta = serde_json::from_str(json.trim()).map_err(|e| at(format!("metadata: {e}")))?;
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let Some((pos, width)) = header else {
                header = Some((read_header(&fields).map_err(at)?, fields.len()));
                continue;
            };
            if fields.len() != width {
                return Err(at(format!(
                    "expected {width} fields as in the header, found {}",
                    fields.len()
                )));
            }
            let mut v = [0u64; 8];
            for (k, value) in v.iter_mut().enumerate() {
                let text = fields[pos[k]];
                *value = text
                    .parse()
                    .map_err(|_| at(format!("column {}: {text:?} is not an unsigned integer", COLUMNS[k])))?;
                if k < 4 && *value > u64::from(u32::MAX) {
                    return Err(at(format!("column {}: {text} does not fit in 32 bits", COLUMNS[k])));
                }
            }
            let e = TraceEvent {
                stage: v[0] as u32,
                tile: v[1] as u32,
                sm: v[2] as u32,
                cta: v[3] as u32,
                t_dispatch: v[4],
                t_ready: v[5],
                t_start: v[6],
                t_end: v[7],
            };
            check_event(&e).map_err(at)?;
            events.push(e);
        }
        if header.is_none() {
            return Err(Error::InvalidArgument(format!(
                "no header row: expected a line \"{}\"",
                COLUMNS.join(",")
            )));
        }
        Self::new(meta, events)
    }
}

/// Where each of [`COLUMNS`] is in `fields`.
fn read_header(fields: &[&str]) -> std::result::Result<[usize; 8], String> {
    let mut pos = [0usize; 8];
    for (k, name) in COLUMNS.iter().enumerate() {
        let mut found = fields.iter().enumerate().filter(|(_, f)| f == &name).map(|(i, _)| i);
        pos[k] = match (found.next(), found.next()) {
            (Some(i), None) => i,
            (None, _) => {
                return Err(format!(
                    "header {:?} lacks column {name} (expected {})",
                    fields.join(","),
                    COLUMNS.join(",")
                ))
            }
            (Some(_), Some(_)) => return Err(format!("header names column {name} twice")),
        };
    }
    Ok(pos)
}
