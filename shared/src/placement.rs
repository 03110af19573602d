//! Multi-GPU CTA-pipelining (CTA-pipelining paper, section III-A): where each piece of a
//! producer -> consumer edge lives when the two stages run on different devices, and the memory
//! scope of the edge's protocol operations.
//!
//! The rule is the paper's, one line per piece ([`Piece::side`]):
//!
//! | piece | lives on | why |
//! | --- | --- | --- |
//! | the producer's output tiles | consumer | the producer's stores are fire-and-forget across NVLink; the consumer reads every element K/tile times, locally |
//! | stream-mode semaphores | consumer | the consumer polls them; the producer's post is one remote add |
//! | workqueue | consumer | the consumer polls it; the producer's push is a few remote writes |
//! | scoreboard | producer | only producer CTAs decrement it |
//! | dependency array | producer | only producer CTAs read it |
//!
//! An edge whose stages are on one device keeps everything there. An edge between two devices
//! orders its posts at system scope ([`Scope::Sys`]: `fence.sc.sys`, `red.release.sys`,
//! `ld.acquire.sys`), because the reader is on another GPU. Devices here are *logical* ids:
//! two logical devices may be the same physical GPU (the host's virtual-device mode), and
//! their edges still take the system-scope path, so every code path runs on one GPU.

/// Memory scope of an edge's posts and waits (`EdgeDesc::scope` holds [`Scope::encode`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every reader is on this GPU: `fence.acq_rel.gpu`, `red.release.gpu`, `ld.acquire.gpu`.
    #[default]
    Gpu = 0,
    /// A reader is on another GPU: `fence.sc.sys`, `red.release.sys`, `ld.acquire.sys`.
    Sys = 1,
}

impl Scope {
    /// The scope of an edge from a producer on logical device `producer` to a consumer on
    /// logical device `consumer`.
    pub const fn between(producer: u32, consumer: u32) -> Self {
        if producer == consumer {
            Scope::Gpu
        } else {
            Scope::Sys
        }
    }

    /// The `u32` the device reads.
    pub const fn encode(self) -> u32 {
        self as u32
    }

    /// The scope of an encoded value; `None` for a value no host wrote.
    pub const fn decode(v: u32) -> Option<Self> {
        match v {
            0 => Some(Scope::Gpu),
            1 => Some(Scope::Sys),
            _ => None,
        }
    }

    /// Whether posts and waits use system scope.
    pub const fn is_sys(self) -> bool {
        matches!(self, Scope::Sys)
    }
}

/// One of the two stages of an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The stage that writes the data and posts.
    Producer,
    /// The stage that waits and reads the data.
    Consumer,
}

/// A piece of an edge's data or protocol state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Piece {
    /// The producer's output tiles (the consumer's dependent operand).
    Output,
    /// Stream mode: the semaphores the producer posts and the consumer waits on.
    Semaphores,
    /// Persistent mode: the consumer tiles' counters of missing producer tiles.
    Scoreboard,
    /// Persistent mode: per producer tile, the consumer tiles it feeds (CSR).
    DependencyArray,
    /// Persistent mode: the consumer stage's queue of ready tiles.
    Workqueue,
}

impl Piece {
    /// Every piece, in declaration order.
    pub const ALL: [Piece; 5] = [
        Piece::Output,
        Piece::Semaphores,
        Piece::Scoreboard,
        Piece::DependencyArray,
        Piece::Workqueue,
    ];

    /// The stage whose device holds the piece (the paper's placement; reasons in the module
    /// docs): what a stage polls or reads repeatedly lives with it, what only the producer
    /// touches stays with the producer.
    pub const fn side(self) -> Side {
        match self {
            Piece::Output | Piece::Semaphores | Piece::Workqueue => Side::Consumer,
            Piece::Scoreboard | Piece::DependencyArray => Side::Producer,
        }
    }

    /// Name for reports ("output", "semaphores", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Piece::Output => "output",
            Piece::Semaphores => "semaphores",
            Piece::Scoreboard => "scoreboard",
            Piece::DependencyArray => "dependency array",
            Piece::Workqueue => "workqueue",
        }
    }
}

/// An edge's two logical devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EdgeDevices {
    /// Logical device of the producer stage.
    pub producer: u32,
    /// Logical device of the consumer stage.
    pub consumer: u32,
}

impl EdgeDevices {
    /// The logical device that holds `piece`.
    pub const fn device_of(self, piece: Piece) -> u32 {
        match piece.side() {
            Side::Producer => self.producer,
            Side::Consumer => self.consumer,
        }
    }

    /// Whether the stages are on different logical devices.
    pub const fn is_cross_device(self) -> bool {
        self.producer != self.consumer
    }

    /// The scope of the edge's posts and waits.
    pub const fn scope(self) -> Scope {
        Scope::between(self.producer, self.consumer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_placement() {
        let e = EdgeDevices {
            producer: 0,
            consumer: 1,
        };
        assert_eq!(e.device_of(Piece::Output), 1);
        assert_eq!(e.device_of(Piece::Workqueue), 1);
        assert_eq!(e.device_of(Piece::Semaphores), 1);
        assert_eq!(e.device_of(Piece::Scoreboard), 0);
        assert_eq!(e.device_of(Piece::DependencyArray), 0);
        assert_eq!(e.scope(), Scope::Sys);
        assert!(e.is_cross_device());
    }

    #[test]
    fn a_same_device_edge_keeps_everything_local_at_gpu_scope() {
        let e = EdgeDevices {
            producer: 3,
            consumer: 3,
        };
        for p in Piece::ALL {
            assert_eq!(e.device_of(p), 3, "{}", p.name());
        }
        assert_eq!(e.scope(), Scope::Gpu);
        assert!(!e.is_cross_device());
    }

    #[test]
    fn scopes_round_trip() {
        for s in [Scope::Gpu, Scope::Sys] {
            assert_eq!(Scope::decode(s.encode()), Some(s));
        }
        assert_eq!(Scope::decode(7), None);
        assert_eq!(Scope::default().encode(), 0, "a zeroed EdgeDesc must mean GPU scope");
    }
}
