//! The trace model: the device's events plus what a reader needs to interpret them.

use serde::{Deserialize, Serialize};

use crate::shared::layout::TraceEvent;
use crate::shared::Grid;
use crate::{Error, Result};

/// What is known about one stage (one kernel in stream mode, one workqueue in persistent mode).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageMeta {
    /// Stage id, as in [`TraceEvent::stage`]. Stage order (producer before consumer) is id order.
    pub id: u32,
    /// Human-readable name ("gemm1", "producer", ...).
    pub name: String,
    /// The stage's tile grid, when known (written as `[x, y, z]`).
    #[serde(default, with = "grid_serde", skip_serializing_if = "Option::is_none")]
    pub grid: Option<Grid>,
    /// Co-resident CTAs of this stage per SM (occupancy), when known. Without it the analysis
    /// uses the most tiles of the stage it saw overlapping on one SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_sm: Option<u32>,
}

/// Everything about a traced run except the events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// The run's label (title of reports and timelines).
    #[serde(default)]
    pub label: String,
    /// Device name ("NVIDIA H200").
    #[serde(default)]
    pub device: String,
    /// SMs on the device. Without it the analysis assumes `max(sm) + 1`, which undercounts
    /// SMs that ran nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<u32>,
    /// One entry per stage, in any order; ids are unique.
    #[serde(default)]
    pub stages: Vec<StageMeta>,
}

/// A traced run: one [`TraceEvent`] per tile plus its [`TraceMeta`].
///
/// Invariants ([`Trace::validate`]): every event has `t_dispatch <= t_ready <= t_end` and
/// `t_dispatch <= t_start <= t_end` (`t_start < t_ready` is allowed: with optimization R the
/// main loop issues independent loads before the wait returns); `sm < sm_count` when the SM
/// count is known; stage ids in the metadata are unique and every event's stage has an entry
/// ([`Trace::new`] adds missing ones); occupancies and the SM count are not 0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Run metadata.
    pub meta: TraceMeta,
    /// One event per tile, in any order.
    pub events: Vec<TraceEvent>,
}

impl Trace {
    /// A validated trace. Stages that appear in `events` but not in `meta.stages` get an entry
    /// named `stage N`; `meta.stages` ends up sorted by id.
    pub fn new(mut meta: TraceMeta, events: Vec<TraceEvent>) -> Result<Self> {
        for e in &events {
            if !meta.stages.iter().any(|s| s.id == e.stage) {
                meta.stages.push(StageMeta {
                    id: e.stage,
                    name: format!("stage {}", e.stage),
                    ..StageMeta::default()
                });
            }
        }
        meta.stages.sort_by_key(|s| s.id);
        let trace = Self { meta, events };
        trace.validate()?;
        Ok(trace)
    }

    /// Checks the invariants listed on [`Trace`]; the error names the offending event.
    pub fn validate(&self) -> Result<()> {
        if self.meta.sm_count == Some(0) {
            return Err(Error::InvalidArgument("trace metadata: sm_count is 0".into()));
        }
        for (i, s) in self.meta.stages.iter().enumerate() {
            if self.meta.stages[..i].iter().any(|o| o.id == s.id) {
                return Err(Error::InvalidArgument(format!(
                    "trace metadata: stage id {} is listed twice",
                    s.id
                )));
            }
            if s.blocks_per_sm == Some(0) {
                return Err(Error::InvalidArgument(format!(
                    "trace metadata: stage {} has blocks_per_sm 0",
                    s.id
                )));
            }
        }
        for (i, e) in self.events.iter().enumerate() {
            let located = |msg: String| Error::InvalidArgument(format!("event {i}: {msg}"));
            check_event(e).map_err(located)?;
            if let Some(n) = self.meta.sm_count {
                if e.sm >= n {
                    return Err(located(format!("sm {} is not below the trace's sm_count {n}", e.sm)));
                }
            }
            if self.stage(e.stage).is_none() {
                return Err(located(format!("stage {} has no entry in the metadata", e.stage)));
            }
        }
        Ok(())
    }

    /// The metadata of stage `id`.
    pub fn stage(&self, id: u32) -> Option<&StageMeta> {
        self.meta.stages.iter().find(|s| s.id == id)
    }

    /// The name of stage `id` (`stage N` when it has none).
    pub fn stage_name(&self, id: u32) -> String {
        match self.stage(id) {
            Some(s) if !s.name.is_empty() => s.name.clone(),
            _ => format!("stage {id}"),
        }
    }

    /// Stage ids in stage order: every id in the metadata or in an event, ascending.
    pub fn stage_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.meta.stages.iter().map(|s| s.id).collect();
        ids.extend(self.events.iter().map(|e| e.stage));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// SMs on the device: the metadata's count, else `max(sm) + 1` (0 for an empty trace).
    pub fn sm_count(&self) -> u32 {
        self.meta
            .sm_count
            .unwrap_or_else(|| self.events.iter().map(|e| e.sm + 1).max().unwrap_or(0))
    }

    /// The first dispatch (`min t_dispatch`): time zero of every relative time.
    pub fn t0(&self) -> Option<u64> {
        self.events.iter().map(|e| e.t_dispatch).min()
    }

    /// The last tile end (`max t_end`).
    pub fn t_last(&self) -> Option<u64> {
        self.events.iter().map(|e| e.t_end).max()
    }

    /// The run label, or a stand-in when there is none.
    pub fn label(&self) -> &str {
        if self.meta.label.is_empty() {
            "unlabelled run"
        } else {
            &self.meta.label
        }
    }

    /// The device name, or a stand-in when there is none.
    pub fn device(&self) -> &str {
        if self.meta.device.is_empty() {
            "unknown device"
        } else {
            &self.meta.device
        }
    }
}

/// The ordering checks of one event; the message names the fields and values.
pub(crate) fn check_event(e: &TraceEvent) -> std::result::Result<(), String> {
    let pairs = [
        ("t_dispatch", e.t_dispatch, "t_ready", e.t_ready),
        ("t_ready", e.t_ready, "t_end", e.t_end),
        ("t_dispatch", e.t_dispatch, "t_start", e.t_start),
        ("t_start", e.t_start, "t_end", e.t_end),
    ];
    for (a, va, b, vb) in pairs {
        if va > vb {
            return Err(format!(
                "stage {} tile {}: {b} ({vb}) is before {a} ({va})",
                e.stage, e.tile
            ));
        }
    }
    Ok(())
}

/// `Option<Grid>` as `[x, y, z]` or null.
mod grid_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::shared::Grid;

    pub fn serialize<S: Serializer>(grid: &Option<Grid>, s: S) -> Result<S::Ok, S::Error> {
        grid.map(|g| [g.x, g.y, g.z]).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Grid>, D::Error> {
        Ok(Option::<[u32; 3]>::deserialize(d)?.map(|[x, y, z]| Grid::new(x, y, z)))
    }
}
