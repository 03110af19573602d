//! [`MlpPlan`]: how the MLP's two GeMMs run, as Policy::Auto decides it. Either StreamSync (the
//! same kernels back to back on one stream, no protocol code), where no policy gains over it,
//! or the stream-mode graph under a policy with both stages walking one tile order.
//!
//! A plan is spelled `streamsync` or `<policy>/<order>` (`rowsync/col`, `strided:4/band2`): the
//! words [`super::parse_policy`] and [`super::compare::parse_order`] read. The trial cache
//! stores plans in this spelling.

use super::compare::{order_name, parse_order};
use super::{parse_policy, MlpOrder};
use crate::error::{Error, Result};
use cusync_shared::policy::PolicyKind;

/// How the MLP runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlpPlan {
    /// Both GeMMs' plain kernels back to back on one stream ([`super::Mlp::run_stream_sync`]):
    /// no policy is predicted (or measured) to beat it.
    StreamSync,
    /// The stream-mode graph ([`super::Mlp::graph_ordered`]) under `policy`, both stages walking
    /// `order`.
    Synced {
        /// Which producer tiles each consumer tile waits for.
        policy: PolicyKind,
        /// The tile order of both stages.
        order: MlpOrder,
    },
}

impl MlpPlan {
    /// The plan's spelling: `streamsync`, or the policy and the order joined by `/`
    /// (`rowsync/col`), which [`MlpPlan::parse`] reads back.
    pub fn spelling(self) -> String {
        match self {
            MlpPlan::StreamSync => "streamsync".into(),
            MlpPlan::Synced { policy, order } => {
                format!("{}/{}", super::auto::policy_spelling(policy), order_name(order))
            }
        }
    }

    /// Reads a plan: `streamsync`, `<policy>/<order>`, or a policy alone (row-major order, what
    /// [`super::Mlp::graph`] walks).
    pub fn parse(s: &str) -> Result<Self> {
        let text = s.trim();
        if text.eq_ignore_ascii_case("streamsync") {
            return Ok(MlpPlan::StreamSync);
        }
        let (policy, order) = match text.split_once('/') {
            Some((p, o)) => (p, parse_order(o)?),
            None => (text, MlpOrder::RowMajor),
        };
        let policy = parse_policy(policy.trim())
            .map_err(|e| Error::InvalidArgument(format!("plan `{s}`: {e}; or use streamsync")))?;
        Ok(MlpPlan::Synced { policy, order })
    }

    /// The name in tables: `StreamSync`, or `RowSync/col` (the sweep's spelling).
    pub fn name(self) -> String {
        match self {
            MlpPlan::StreamSync => "StreamSync".into(),
            MlpPlan::Synced { policy, order } => format!("{}/{}", policy.name(), order_name(order)),
        }
    }

    /// The policy, when the plan synchronizes.
    pub fn policy(self) -> Option<PolicyKind> {
        match self {
            MlpPlan::StreamSync => None,
            MlpPlan::Synced { policy, .. } => Some(policy),
        }
    }

    /// The plan Policy::Auto takes from the wave model's `prediction`: its best policy, walking
    /// row-major tiles (the order the model schedules), where it gains at least `margin` (a
    /// fraction) over StreamSync ([`crate::sim::PairPrediction::recommended`]); else StreamSync.
    pub fn from_prediction(prediction: &crate::sim::PairPrediction, margin: f64) -> Self {
        prediction
            .recommended(margin)
            .map_or(MlpPlan::StreamSync, |best| MlpPlan::Synced {
                policy: best.policy,
                order: MlpOrder::RowMajor,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_spell_and_parse_back() {
        let plans = [
            MlpPlan::StreamSync,
            MlpPlan::Synced {
                policy: PolicyKind::RowSync,
                order: MlpOrder::ColumnMajor,
            },
            MlpPlan::Synced {
                policy: PolicyKind::TileSync,
                order: MlpOrder::RowMajor,
            },
            MlpPlan::Synced {
                policy: PolicyKind::StridedSync { stride: 4 },
                order: MlpOrder::Banded(2),
            },
        ];
        for p in plans {
            assert_eq!(MlpPlan::parse(&p.spelling()).unwrap(), p, "{}", p.spelling());
        }
        assert_eq!(plans[1].spelling(), "rowsync/col");
        assert_eq!(plans[1].name(), "RowSync/col");
        assert_eq!(plans[3].spelling(), "strided:4/band2");
        assert_eq!(MlpPlan::StreamSync.name(), "StreamSync");
        assert_eq!(MlpPlan::StreamSync.policy(), None);
        assert_eq!(plans[2].policy(), Some(PolicyKind::TileSync));
        // A policy alone walks row-major tiles; case and spaces do not matter.
        assert_eq!(MlpPlan::parse(" RowSync ").unwrap().spelling(), "rowsync/row");
        assert_eq!(MlpPlan::parse("StreamSync").unwrap(), MlpPlan::StreamSync);
    }

    #[test]
    fn bad_plans_say_what_is_read() {
        for (bad, words) in [
            ("fastest", "streamsync"),
            ("rowsync/diagonal", "unknown tile order"),
            ("rowsync/band0", "band<N>"),
            ("/col", "unknown policy"),
        ] {
            let e = MlpPlan::parse(bad).unwrap_err().to_string();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn the_model_keeps_stream_sync_unless_a_policy_gains_the_margin() {
        use crate::sim::{PairPrediction, PolicyOutcome, ScheduleStats};
        let stats = |makespan: f64| ScheduleStats {
            makespan,
            ..ScheduleStats::default()
        };
        let outcome = |policy, makespan| PolicyOutcome {
            policy,
            stats: stats(makespan),
        };
        let prediction = |ss: f64, row: f64| PairPrediction {
            stream_sync: stats(ss),
            policies: vec![
                outcome(PolicyKind::TileSync, row + 1.0),
                outcome(PolicyKind::RowSync, row),
            ],
        };
        assert_eq!(
            MlpPlan::from_prediction(&prediction(110.0, 100.0), 0.01),
            MlpPlan::Synced {
                policy: PolicyKind::RowSync,
                order: MlpOrder::RowMajor
            }
        );
        // 0.5% is under a 1% margin; slower is never taken.
        assert_eq!(
            MlpPlan::from_prediction(&prediction(100.5, 100.0), 0.01),
            MlpPlan::StreamSync
        );
        assert_eq!(
            MlpPlan::from_prediction(&prediction(90.0, 100.0), 0.01),
            MlpPlan::StreamSync
        );
        // No policy fits the grids: StreamSync.
        let none = PairPrediction {
            stream_sync: stats(100.0),
            policies: Vec::new(),
        };
        assert_eq!(MlpPlan::from_prediction(&none, 0.01), MlpPlan::StreamSync);
    }
}
