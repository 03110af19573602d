//! Benchmark knobs of path-2 persistent graphs, read from the environment when a graph is
//! built: the ablations of dependencies-met launches ([`ABLATE_ENV`]) and the post warp's
//! suspend-time hint ([`POST_WAIT_ENV`]).

use cusync_shared::persistent::{
    FLAG_ABLATE_NO_FENCE, FLAG_ABLATE_NO_PDL, FLAG_ABLATE_NO_POSTS, FLAG_ABLATE_NO_PREFETCH,
};

use super::spec::PersistentOptions;
use super::work::Family;
use crate::{Error, Result};

/// Whether a graph of `family` under `options` takes benchmark ablations: dependencies-met
/// path-2 graphs only (any other graph's consumers would starve without posts).
pub(crate) fn takes_ablations(options: &PersistentOptions, family: Family) -> bool {
    options.no_dependencies && family.wg_tile().is_some()
}

/// The environment variable naming benchmark ablations of the path-2 megakernel's
/// dependencies-met launches.
pub const ABLATE_ENV: &str = "CUSYNC_ABLATE";

/// The ablations by name: what [`ABLATE_ENV`] takes.
const ABLATIONS: [(&str, u32); 4] = [
    ("no-posts", FLAG_ABLATE_NO_POSTS),
    ("no-prefetch", FLAG_ABLATE_NO_PREFETCH),
    ("no-fence", FLAG_ABLATE_NO_FENCE),
    ("no-pdl", FLAG_ABLATE_NO_PDL),
];

/// The ablation flags [`ABLATE_ENV`] names (a comma list of [`ABLATIONS`]' names; unset or
/// empty: none). Only dependencies-met path-2 graphs read it, since an unposted tile would
/// starve its consumers: it takes the protocol's per-tile parts out one at a time, to measure
/// each.
pub(crate) fn ablation_from_env() -> Result<u32> {
    let Ok(list) = std::env::var(ABLATE_ENV) else {
        return Ok(0);
    };
    let flags = parse_ablation(&list)?;
    if flags != 0 {
        eprintln!("cusync: {ABLATE_ENV}={list}: dependencies-met megakernel launches run ablated (a benchmark only)");
    }
    Ok(flags)
}

/// Parses an [`ABLATE_ENV`] value.
pub(crate) fn parse_ablation(list: &str) -> Result<u32> {
    let mut flags = 0;
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some(&(_, flag)) = ABLATIONS.iter().find(|(name, _)| *name == item) else {
            let names: Vec<&str> = ABLATIONS.iter().map(|(name, _)| *name).collect();
            return Err(Error::InvalidArgument(format!(
                "{ABLATE_ENV}: unknown ablation `{item}` ({})",
                names.join(", ")
            )));
        };
        flags |= flag;
    }
    Ok(flags)
}

/// The environment variable setting the path-2 post warp's suspend-time hint in nanoseconds
/// (`PersistentDesc::post_wait_ns`; [`DEFAULT_POST_WAIT_NS`] when unset).
pub const POST_WAIT_ENV: &str = "CUSYNC_POST_WAIT_NS";

/// The post warp's default suspend-time hint: 0, the hardware's own `try_wait` limit.
pub const DEFAULT_POST_WAIT_NS: u32 = 0;

/// The largest hint [`POST_WAIT_ENV`] takes (1 ms; the warp still wakes when a tile arrives,
/// and its bounded wait checks the time after every `try_wait`).
pub const MAX_POST_WAIT_NS: u32 = 1_000_000;

/// The post warp's hint from [`POST_WAIT_ENV`], else [`DEFAULT_POST_WAIT_NS`].
pub(crate) fn post_wait_from_env() -> Result<u32> {
    match std::env::var(POST_WAIT_ENV) {
        Ok(v) => parse_post_wait(&v),
        Err(_) => Ok(DEFAULT_POST_WAIT_NS),
    }
}

/// Parses a [`POST_WAIT_ENV`] value: nanoseconds, 0 to [`MAX_POST_WAIT_NS`] (empty: the
/// default).
pub(crate) fn parse_post_wait(v: &str) -> Result<u32> {
    if v.trim().is_empty() {
        return Ok(DEFAULT_POST_WAIT_NS);
    }
    match v.trim().parse::<u32>() {
        Ok(ns) if ns <= MAX_POST_WAIT_NS => Ok(ns),
        _ => Err(Error::InvalidArgument(format!(
            "{POST_WAIT_ENV}={v}: a suspend-time hint in nanoseconds, 0 to {MAX_POST_WAIT_NS}"
        ))),
    }
}
