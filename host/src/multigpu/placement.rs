//! The placement planner: stages bound to logical devices, and for every edge where each of
//! its pieces lives ([`cusync_shared::placement`] holds the rule, this module applies it to a
//! graph and checks it against the machine's [`Topology`]).
//!
//! Everything here is pure (no GPU), so it is tested on the CPU: out-of-range devices,
//! missing peer access, cycles and outputs that would have to live on two devices are refused
//! with a [`PlacementError`] that names the stages and devices.

use cusync_shared::placement::{EdgeDevices, Piece, Scope};
use std::fmt::Write as _;

/// How a stage on one logical device reaches memory on another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// The same logical device.
    Same,
    /// Two logical devices on one physical GPU (virtual-device mode): "peer" pointers are
    /// local pointers, but edges between them still use system scope.
    Local,
    /// Different GPUs, with peer access from the first to the second (NVLink or PCIe P2P).
    Peer,
    /// Different GPUs without peer access: no edge may cross this pair.
    None,
}

/// The machine a placement is planned for: which physical GPU each logical device runs on,
/// and which ordered pairs of GPUs have peer access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    ordinals: Vec<usize>,
    peer: Vec<(usize, usize)>,
}

impl Topology {
    /// Logical device `i` runs on GPU `ordinals[i]` (repeats: several logical devices on one
    /// GPU); `peer` lists the ordered pairs `(a, b)` of distinct GPUs where `a` can access
    /// `b`'s memory (`cuDeviceCanAccessPeer`, peer access enabled).
    pub fn new(ordinals: Vec<usize>, peer: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let mut peer: Vec<(usize, usize)> = peer.into_iter().filter(|(a, b)| a != b).collect();
        peer.sort_unstable();
        peer.dedup();
        Self { ordinals, peer }
    }

    /// `n` logical devices on GPU `ordinal`.
    pub fn virtual_on(ordinal: usize, n: usize) -> Self {
        Self::new(vec![ordinal; n], [])
    }

    /// Number of logical devices.
    pub fn len(&self) -> usize {
        self.ordinals.len()
    }

    /// Whether there is no logical device.
    pub fn is_empty(&self) -> bool {
        self.ordinals.is_empty()
    }

    /// The GPU logical device `device` runs on.
    pub fn ordinal(&self, device: usize) -> Option<usize> {
        self.ordinals.get(device).copied()
    }

    /// The GPU of every logical device.
    pub fn ordinals(&self) -> &[usize] {
        &self.ordinals
    }

    /// Distinct GPUs, in order of first use.
    pub fn physical(&self) -> Vec<usize> {
        let mut seen = Vec::new();
        for &o in &self.ordinals {
            if !seen.contains(&o) {
                seen.push(o);
            }
        }
        seen
    }

    /// Whether some GPU hosts more than one logical device.
    pub fn is_virtual(&self) -> bool {
        self.physical().len() < self.ordinals.len()
    }

    /// Whether GPU `from` has peer access to GPU `to`'s memory (distinct GPUs).
    pub fn has_peer(&self, from: usize, to: usize) -> bool {
        self.peer.binary_search(&(from, to)).is_ok()
    }

    /// How logical device `from` reaches logical device `to`'s memory (both in range).
    pub fn link(&self, from: usize, to: usize) -> Link {
        let (a, b) = (self.ordinals[from], self.ordinals[to]);
        if from == to {
            Link::Same
        } else if a == b {
            Link::Local
        } else if self.has_peer(a, b) {
            Link::Peer
        } else {
            Link::None
        }
    }
}

/// Why a placement was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The topology has no device.
    #[error("no device to place stages on")]
    NoDevices,
    /// A stage is bound to a logical device that does not exist.
    #[error("stage `{stage}` is bound to device {device}, but only {count} device(s) are open (0..{count})")]
    DeviceOutOfRange {
        /// The stage.
        stage: String,
        /// The device asked for.
        device: usize,
        /// Devices open.
        count: usize,
    },
    /// An edge names a stage index that does not exist.
    #[error("edge {edge} names stage {stage}, but the graph has {count} stage(s)")]
    UnknownStage {
        /// Index of the edge.
        edge: usize,
        /// The stage index.
        stage: usize,
        /// Stages in the graph.
        count: usize,
    },
    /// An edge from a stage to itself.
    #[error("stage `{stage}` cannot depend on itself")]
    SelfEdge {
        /// The stage.
        stage: String,
    },
    /// A cross-device edge between GPUs without peer access.
    #[error(
        "edge `{producer}` -> `{consumer}`: the producer on GPU {from} must write its output and post into GPU {to}'s memory, but GPU {from} has no peer access to GPU {to} (cuDeviceCanAccessPeer is 0); place both stages on one GPU or on GPUs of one NVLink domain"
    )]
    NoPeerAccess {
        /// Producer stage.
        producer: String,
        /// Consumer stage.
        consumer: String,
        /// The producer's GPU.
        from: usize,
        /// The consumer's GPU.
        to: usize,
    },
    /// The edges form a cycle.
    #[error("dependency cycle among stages {stages:?}")]
    Cycle {
        /// The stages on (or behind) the cycle.
        stages: Vec<String>,
    },
    /// A producer whose consumers are on different devices: its output would have to live on
    /// each of them.
    #[error("stage `{stage}` feeds consumers on devices {devices:?}; a producer's output lives on its consumers' device, so all of them must be on one device")]
    OutputOnSeveralDevices {
        /// The producer.
        stage: String,
        /// Its consumers' devices.
        devices: Vec<usize>,
    },
}

/// A stage to place: its name (for errors) and logical device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageBinding {
    /// Name used in errors and reports.
    pub name: String,
    /// Logical device the stage runs on.
    pub device: usize,
}

/// A placed edge: its stages, their devices, and how the producer reaches the consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacedEdge {
    /// Producer stage index.
    pub producer: usize,
    /// Consumer stage index.
    pub consumer: usize,
    /// The two stages' logical devices.
    pub devices: EdgeDevices,
    /// How the producer reaches the consumer's memory.
    pub link: Link,
}

impl PlacedEdge {
    /// The logical device that holds `piece`.
    pub fn device_of(&self, piece: Piece) -> usize {
        self.devices.device_of(piece) as usize
    }

    /// Scope of the edge's posts and waits.
    pub fn scope(&self) -> Scope {
        self.devices.scope()
    }
}

/// A checked placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    stages: Vec<StageBinding>,
    edges: Vec<PlacedEdge>,
    order: Vec<usize>,
    ordinals: Vec<usize>,
}

impl Placement {
    /// The stages and their devices.
    pub fn stages(&self) -> &[StageBinding] {
        &self.stages
    }

    /// The edges, in the order given.
    pub fn edges(&self) -> &[PlacedEdge] {
        &self.edges
    }

    /// Stage indices with every producer before its consumers.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The logical device stage `stage` runs on.
    pub fn device(&self, stage: usize) -> usize {
        self.stages[stage].device
    }

    /// Where stage `stage`'s output lives: its consumers' device, or its own when it has none
    /// (a sink's output stays where it was computed).
    pub fn output_device(&self, stage: usize) -> usize {
        self.edges
            .iter()
            .find(|e| e.producer == stage)
            .map_or(self.stages[stage].device, |e| e.device_of(Piece::Output))
    }

    /// Whether two of the edges' stages are on different logical devices.
    pub fn has_cross_device_edge(&self) -> bool {
        self.edges.iter().any(|e| e.devices.is_cross_device())
    }

    /// A table of the placement: per stage its device and GPU, per edge where each piece lives.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, st) in self.stages.iter().enumerate() {
            let _ = writeln!(
                s,
                "  stage {i} `{}`: device {} (GPU {}), output on device {}",
                st.name,
                st.device,
                self.ordinals[st.device],
                self.output_device(i)
            );
        }
        for e in &self.edges {
            let pieces: Vec<String> = Piece::ALL
                .iter()
                .map(|&p| format!("{} on {}", p.name(), e.device_of(p)))
                .collect();
            let _ = writeln!(
                s,
                "  edge `{}` -> `{}`: {:?} scope, {:?} link; {}",
                self.stages[e.producer].name,
                self.stages[e.consumer].name,
                e.scope(),
                e.link,
                pieces.join(", ")
            );
        }
        s
    }
}

/// Places `stages` joined by `edges` (`(producer, consumer)` stage indices) on `topology`:
/// checks every device, every edge's peer access (the producer writes into the consumer's
/// memory), that a producer's consumers share one device, and that the graph has no cycle.
pub fn place(
    topology: &Topology,
    stages: &[StageBinding],
    edges: &[(usize, usize)],
) -> Result<Placement, PlacementError> {
    if topology.is_empty() {
        return Err(PlacementError::NoDevices);
    }
    for s in stages {
        if s.device >= topology.len() {
            return Err(PlacementError::DeviceOutOfRange {
                stage: s.name.clone(),
                device: s.device,
                count: topology.len(),
            });
        }
    }
    let mut placed = Vec::with_capacity(edges.len());
    for (i, &(p, c)) in edges.iter().enumerate() {
        for stage in [p, c] {
            if stage >= stages.len() {
                return Err(PlacementError::UnknownStage {
                    edge: i,
                    stage,
                    count: stages.len(),
                });
            }
        }
        if p == c {
            return Err(PlacementError::SelfEdge {
                stage: stages[p].name.clone(),
            });
        }
        let (dp, dc) = (stages[p].device, stages[c].device);
        let link = topology.link(dp, dc);
        if link == Link::None {
            return Err(PlacementError::NoPeerAccess {
                producer: stages[p].name.clone(),
                consumer: stages[c].name.clone(),
                from: topology.ordinals[dp],
                to: topology.ordinals[dc],
            });
        }
        placed.push(PlacedEdge {
            producer: p,
            consumer: c,
            devices: EdgeDevices {
                producer: dp as u32,
                consumer: dc as u32,
            },
            link,
        });
    }
    for (i, s) in stages.iter().enumerate() {
        let mut devices: Vec<usize> = placed
            .iter()
            .filter(|e| e.producer == i)
            .map(|e| e.device_of(Piece::Output))
            .collect();
        devices.sort_unstable();
        devices.dedup();
        if devices.len() > 1 {
            return Err(PlacementError::OutputOnSeveralDevices {
                stage: s.name.clone(),
                devices,
            });
        }
    }
    let order = topological_order(stages, &placed)?;
    Ok(Placement {
        stages: stages.to_vec(),
        edges: placed,
        order,
        ordinals: topology.ordinals.clone(),
    })
}

fn topological_order(stages: &[StageBinding], edges: &[PlacedEdge]) -> Result<Vec<usize>, PlacementError> {
    let n = stages.len();
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.consumer] += 1;
    }
    let mut ready: Vec<usize> = (0..n).rev().filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for e in edges.iter().filter(|e| e.producer == i) {
            indegree[e.consumer] -= 1;
            if indegree[e.consumer] == 0 {
                ready.push(e.consumer);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    Err(PlacementError::Cycle {
        stages: (0..n)
            .filter(|&i| indegree[i] > 0)
            .map(|i| stages[i].name.clone())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(devices: &[usize]) -> Vec<StageBinding> {
        devices
            .iter()
            .enumerate()
            .map(|(i, &device)| StageBinding {
                name: format!("s{i}"),
                device,
            })
            .collect()
    }

    fn two_gpus_with_nvlink() -> Topology {
        Topology::new(vec![0, 1], [(0, 1), (1, 0)])
    }

    #[test]
    fn a_cross_device_edge_follows_the_papers_placement() {
        let p = place(&two_gpus_with_nvlink(), &stages(&[0, 1]), &[(0, 1)]).unwrap();
        let e = p.edges()[0];
        assert_eq!(e.link, Link::Peer);
        assert_eq!(e.scope(), Scope::Sys);
        assert_eq!(
            e.device_of(Piece::Output),
            1,
            "the producer's output lives on the consumer GPU"
        );
        assert_eq!(e.device_of(Piece::Workqueue), 1);
        assert_eq!(e.device_of(Piece::Semaphores), 1);
        assert_eq!(
            e.device_of(Piece::Scoreboard),
            0,
            "the scoreboard stays with the producer"
        );
        assert_eq!(e.device_of(Piece::DependencyArray), 0);
        assert_eq!(p.output_device(0), 1);
        assert_eq!(p.output_device(1), 1, "a sink's output stays on its device");
        assert_eq!(p.order(), &[0, 1]);
        assert!(p.has_cross_device_edge());
        let text = p.describe();
        assert!(
            text.contains("scoreboard on 0") && text.contains("workqueue on 1"),
            "{text}"
        );
    }

    #[test]
    fn same_device_edges_are_unchanged() {
        let p = place(&two_gpus_with_nvlink(), &stages(&[1, 1, 0]), &[(0, 1), (1, 2)]).unwrap();
        let (same, cross) = (p.edges()[0], p.edges()[1]);
        assert_eq!(same.link, Link::Same);
        assert_eq!(same.scope(), Scope::Gpu);
        for piece in Piece::ALL {
            assert_eq!(same.device_of(piece), 1);
        }
        assert_eq!(cross.scope(), Scope::Sys);
        assert_eq!(p.output_device(0), 1);
        assert_eq!(p.output_device(1), 0);
    }

    #[test]
    fn virtual_devices_on_one_gpu_take_the_system_scope_path() {
        let t = Topology::virtual_on(0, 2);
        assert!(t.is_virtual());
        assert_eq!(t.physical(), vec![0]);
        let p = place(&t, &stages(&[0, 1]), &[(0, 1)]).unwrap();
        assert_eq!(p.edges()[0].link, Link::Local);
        assert_eq!(p.edges()[0].scope(), Scope::Sys);
        assert_eq!(p.output_device(0), 1);
    }

    #[test]
    fn a_device_out_of_range_is_refused() {
        let e = place(&two_gpus_with_nvlink(), &stages(&[0, 2]), &[(0, 1)]).unwrap_err();
        assert_eq!(
            e,
            PlacementError::DeviceOutOfRange {
                stage: "s1".into(),
                device: 2,
                count: 2
            }
        );
        assert!(e.to_string().contains("bound to device 2"), "{e}");
        assert_eq!(
            place(&Topology::new(vec![], []), &stages(&[0]), &[]),
            Err(PlacementError::NoDevices)
        );
    }

    #[test]
    fn missing_peer_access_is_refused_in_the_direction_that_needs_it() {
        // GPU 0 can reach GPU 1, not the other way round.
        let t = Topology::new(vec![0, 1], [(0, 1)]);
        assert!(place(&t, &stages(&[0, 1]), &[(0, 1)]).is_ok());
        let e = place(&t, &stages(&[1, 0]), &[(0, 1)]).unwrap_err();
        assert!(
            matches!(e, PlacementError::NoPeerAccess { from: 1, to: 0, .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains("no peer access to GPU 0"), "{e}");
    }

    #[test]
    fn cycles_and_self_edges_are_refused() {
        let t = two_gpus_with_nvlink();
        let e = place(&t, &stages(&[0, 1, 0]), &[(0, 1), (1, 2), (2, 1)]).unwrap_err();
        assert_eq!(
            e,
            PlacementError::Cycle {
                stages: vec!["s1".into(), "s2".into()]
            }
        );
        assert!(matches!(
            place(&t, &stages(&[0]), &[(0, 0)]),
            Err(PlacementError::SelfEdge { .. })
        ));
        assert!(matches!(
            place(&t, &stages(&[0]), &[(0, 4)]),
            Err(PlacementError::UnknownStage { stage: 4, .. })
        ));
    }

    #[test]
    fn fan_out_to_two_devices_is_refused_and_to_one_is_allowed() {
        let t = Topology::new(vec![0, 1, 2], [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]);
        let e = place(&t, &stages(&[0, 1, 2]), &[(0, 1), (0, 2)]).unwrap_err();
        assert!(
            matches!(&e, PlacementError::OutputOnSeveralDevices { devices, .. } if devices == &vec![1, 2]),
            "{e:?}"
        );
        let p = place(&t, &stages(&[0, 1, 1]), &[(0, 1), (0, 2)]).unwrap();
        assert_eq!(p.output_device(0), 1);
    }

    #[test]
    fn links_between_logical_devices() {
        let t = Topology::new(vec![0, 0, 1, 2], [(0, 1), (1, 0)]);
        assert_eq!(t.link(0, 0), Link::Same);
        assert_eq!(t.link(0, 1), Link::Local);
        assert_eq!(t.link(1, 2), Link::Peer);
        assert_eq!(t.link(2, 0), Link::Peer);
        assert_eq!(t.link(2, 3), Link::None);
        assert!(t.has_peer(0, 1) && t.has_peer(1, 0) && !t.has_peer(1, 2) && !t.has_peer(0, 0));
        assert_eq!(t.physical(), vec![0, 1, 2]);
        assert!(t.is_virtual());
        assert!(!two_gpus_with_nvlink().is_virtual());
    }
}
