//! How a stream-mode graph's stages are launched: [`WaitKernelPolicy`] (the wait kernel, or
//! programmatic dependent launch on sm_90) and the per-run launch plan [`StreamGraph::run`]
//! follows.
//!
//! [`StreamGraph::run`]: super::StreamGraph::run

use super::spec::StageId;
use crate::runtime::{programmatic_supported, Context, StreamOrder};

/// When to launch the wait kernel in front of a consumer stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitKernelPolicy {
    /// Skip it when producer and consumer fit in one wave together (optimization W).
    #[default]
    Auto,
    /// Always launch it.
    Always,
    /// Never launch it (only safe when the grids fit in one wave).
    Never,
    /// No wait kernel and no second stream: every stage goes on one stream in dependency
    /// order, each launched with programmatic dependent launch (sm_90 and up; the stages
    /// launch through [`StageLaunch::launch`](super::StageLaunch::launch)). A consumer
    /// starts once every block of the stage before it has started (each block issues
    /// `griddepcontrol.launch_dependents` in its `start`), the wait kernel's guarantee given
    /// by the hardware; the semaphores order its reads as before. It saves the wait kernel's
    /// launch and the cross-stream events.
    Programmatic,
}

impl WaitKernelPolicy {
    /// Its name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            WaitKernelPolicy::Auto => "auto",
            WaitKernelPolicy::Always => "always",
            WaitKernelPolicy::Never => "never",
            WaitKernelPolicy::Programmatic => "pdl",
        }
    }

    /// The launch the MLP's policy graphs take by default on `cx`:
    /// [`WaitKernelPolicy::Programmatic`] where the device and build run it (sm_90a; on the
    /// H200 its best variant was as fast or faster than the wait kernel's at every batch of two
    /// side-by-side sweeps, by up to 1.8%: docs/perf-notes.md, session 38), else
    /// [`WaitKernelPolicy::Auto`].
    pub fn preferred(cx: &Context) -> Self {
        Self::preferred_for(cx.info(), crate::kernels::PTX_ARCH)
    }

    /// `launches`, or the preferred launch on `cx` alone when it is empty (the default of the
    /// MLP's sweep, runs and traces).
    pub fn listed_or_preferred(cx: &Context, launches: &[Self]) -> Vec<Self> {
        if launches.is_empty() {
            vec![Self::preferred(cx)]
        } else {
            launches.to_vec()
        }
    }

    /// [`WaitKernelPolicy::preferred`] for a device `info` running code built for `ptx_arch`.
    pub fn preferred_for(info: &crate::runtime::DeviceInfo, ptx_arch: &str) -> Self {
        if programmatic_supported(info, ptx_arch).is_ok() {
            Self::Programmatic
        } else {
            Self::Auto
        }
    }

    /// The policy named `name` ([`WaitKernelPolicy::name`]).
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Auto, Self::Always, Self::Never, Self::Programmatic]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// Where and how one stage of a run is launched ([`launch_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PlannedLaunch {
    pub(super) stage: StageId,
    /// On the first stream (of the first stage in dependency order), not the stage's own.
    pub(super) first_stream: bool,
    /// A wait kernel goes in front of it.
    pub(super) wait_kernel: bool,
    /// Programmatic, or after the previous kernel on the stream.
    pub(super) order: StreamOrder,
}

/// The launches of one run, in launch order: `topo` is the stages in dependency order and
/// `wait_kernel` the prepared per-stage choice. Serialized runs (StreamSync) put every stage
/// on the first stream in dependency order with nothing in between; programmatic runs do the
/// same with every stage after the first launched programmatically; otherwise each stage goes
/// on its own stream behind its wait kernel, consumers first when asked.
pub(super) fn launch_plan(
    topo: &[StageId],
    wait_kernel: &[bool],
    serialized: bool,
    programmatic: bool,
    consumers_first: bool,
) -> Vec<PlannedLaunch> {
    let one_stream = serialized || programmatic;
    let ordered: Vec<StageId> = if consumers_first && !one_stream {
        topo.iter().rev().copied().collect()
    } else {
        topo.to_vec()
    };
    ordered
        .into_iter()
        .enumerate()
        .map(|(i, stage)| PlannedLaunch {
            stage,
            first_stream: one_stream,
            wait_kernel: wait_kernel[stage.0] && !one_stream,
            order: if programmatic && !serialized && i > 0 {
                StreamOrder::Programmatic
            } else {
                StreamOrder::AfterPrevious
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<StageId> {
        (0..n).map(StageId).collect()
    }

    #[test]
    fn streams_plan_puts_each_stage_on_its_stream_behind_its_wait_kernel() {
        let plan = launch_plan(&ids(3), &[false, true, false], false, false, false);
        assert_eq!(plan.iter().map(|p| p.stage.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(plan
            .iter()
            .all(|p| !p.first_stream && p.order == StreamOrder::AfterPrevious));
        assert_eq!(
            plan.iter().map(|p| p.wait_kernel).collect::<Vec<_>>(),
            [false, true, false]
        );
        let reversed = launch_plan(&ids(3), &[false, true, true], false, false, true);
        assert_eq!(reversed.iter().map(|p| p.stage.0).collect::<Vec<_>>(), [2, 1, 0]);
    }

    #[test]
    fn programmatic_plan_is_one_stream_in_dependency_order_without_wait_kernels() {
        // Asked for consumers first and wait kernels: a programmatic run keeps neither.
        let plan = launch_plan(&ids(3), &[false, true, true], false, true, true);
        assert_eq!(plan.iter().map(|p| p.stage.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(plan.iter().all(|p| p.first_stream && !p.wait_kernel));
        assert_eq!(
            plan.iter().map(|p| p.order).collect::<Vec<_>>(),
            [
                StreamOrder::AfterPrevious,
                StreamOrder::Programmatic,
                StreamOrder::Programmatic
            ]
        );
    }

    #[test]
    fn serialized_plan_wins_over_programmatic() {
        let plan = launch_plan(&ids(2), &[false, true], true, true, true);
        assert_eq!(plan.iter().map(|p| p.stage.0).collect::<Vec<_>>(), [0, 1]);
        assert!(plan
            .iter()
            .all(|p| p.first_stream && !p.wait_kernel && p.order == StreamOrder::AfterPrevious));
    }

    #[test]
    fn programmatic_launch_needs_sm90_and_the_sm90a_build() {
        let hopper = crate::runtime::DeviceInfo::hopper_for_tests("NVIDIA H200");
        assert!(programmatic_supported(&hopper, "sm_90a").is_ok());
        let e = programmatic_supported(&hopper, "sm_80").unwrap_err().to_string();
        assert!(e.contains("sm_90a device code") && e.contains("built for sm_80"), "{e}");
        let ampere = crate::runtime::DeviceInfo {
            major: 8,
            ..hopper.clone()
        };
        let e = programmatic_supported(&ampere, "sm_90a").unwrap_err().to_string();
        assert!(
            e.contains("compute capability 8.0") && e.contains("WaitKernelPolicy::Auto"),
            "{e}"
        );
        assert_eq!(
            WaitKernelPolicy::preferred_for(&hopper, "sm_90a"),
            WaitKernelPolicy::Programmatic
        );
        assert_eq!(
            WaitKernelPolicy::preferred_for(&hopper, "sm_80"),
            WaitKernelPolicy::Auto
        );
        assert_eq!(
            WaitKernelPolicy::preferred_for(&ampere, "sm_80"),
            WaitKernelPolicy::Auto
        );
    }

    #[test]
    fn wait_kernel_policy_names_round_trip() {
        for p in [
            WaitKernelPolicy::Auto,
            WaitKernelPolicy::Always,
            WaitKernelPolicy::Never,
            WaitKernelPolicy::Programmatic,
        ] {
            assert_eq!(WaitKernelPolicy::parse(p.name()), Some(p));
        }
        assert_eq!(WaitKernelPolicy::parse("sometimes"), None);
    }
}
