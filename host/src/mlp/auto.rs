//! Policy::Auto for the MLP with an optional short measured trial (`cusync run mlp --policy
//! auto --trial`). Its answer is an [`MlpPlan`]: a policy with a tile order, or StreamSync
//! where no policy gains over it, so Auto never runs the MLP slower than the plain kernels
//! back to back that it measured.
//!
//! Without a trial, [`choose`] returns the wave model's plan ([`MlpPlan::from_prediction`]: its
//! best policy where the model predicts a gain of [`crate::sim::report::RECOMMEND_MARGIN`] over
//! StreamSync, else StreamSync). With one, StreamSync and every policy the model considers
//! (those that fit the grids) in each tile order the sweep tries ([`trial_plans`]) run side
//! by side: one untimed launch of each, then `samples` rounds that time every candidate once
//! after an untimed launch of it. A policy is taken over StreamSync only where its median is
//! smaller and it beat StreamSync in enough of the rounds ([`rounds_to_win`]: a one-sided sign
//! test at 5%, every round with fewer than five), so a pick inside the run-to-run noise stays
//! StreamSync; of the policies that qualify, the smallest median wins.
//! The result is cached under a [`TrialKey`] (device, SM count, the embedded PTX, the MLP's
//! sizes and tile): in memory for the rest of the process, and, when a file is given, in a
//! small JSON file ([`default_cache_file`]: `target/cache/cusync-auto-policy.json`), so a later
//! process on the same machine and build skips the trial. A missing, unreadable, corrupt or
//! older-format file is treated as empty (and rewritten), never as an error.

use super::compare::{distinct_orders, SEARCH_ORDERS};
use super::plan::MlpPlan;
use super::{auto_policy, Mlp, MlpShape};
use crate::error::{Error, Result};
use crate::microbench::Stats;
use crate::runtime::{Context, DeviceInfo};
use crate::sim::PairPrediction;
use crate::stream::WaitKernelPolicy;
use cusync_shared::policy::PolicyKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Version of the cache file's format; a file of another version is ignored. Version 1 held a
/// policy alone (row-major order, never StreamSync); version 2 holds an [`MlpPlan`]; version 3
/// also the rounds each policy beat StreamSync in (its plans were decided by the paired rule,
/// so a version-2 pick, decided by medians alone, is measured again).
pub const CACHE_VERSION: u32 = 3;

/// Significance of the paired rule: a policy replaces StreamSync only where beating it in that
/// many rounds or more would happen with at most this probability if neither were faster.
pub const TRIAL_SIGNIFICANCE: f64 = 0.05;

/// Rounds of `rounds` paired rounds a policy must beat StreamSync in to be taken over it: the
/// smallest `k` with `P(X >= k) <= TRIAL_SIGNIFICANCE` for `X ~ Binomial(rounds, 1/2)` (a
/// one-sided sign test), or every round where no `k` is that unlikely (fewer than five rounds).
/// Five rounds: all five (p = 1/32); eleven: nine (p = 67/2048).
pub fn rounds_to_win(rounds: usize) -> usize {
    (1..=rounds)
        .find(|&k| crate::microbench::sign_tail_at_least(k, rounds) <= TRIAL_SIGNIFICANCE)
        .unwrap_or(rounds.max(1))
}

/// What a trial's result depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrialKey {
    /// Device name.
    pub device: String,
    /// SMs of the device.
    pub sm_count: u32,
    /// The PTX's target and a hash of its text (a rebuilt kernel measures again).
    pub ptx: String,
    /// Rows of X.
    pub batch: usize,
    /// Columns of X and of the output.
    pub hidden: usize,
    /// Columns of the intermediate.
    pub ffn: usize,
    /// Tile configuration of both GeMMs.
    pub tile: String,
}

/// FNV-1a of `text`: a stable fingerprint (unlike `std`'s hasher, the same in every build).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl TrialKey {
    /// The key of `shape` with `tile` on the device `info` describes, running the embedded PTX.
    pub fn new(info: &DeviceInfo, shape: MlpShape, tile: super::MlpKernel) -> Self {
        Self {
            device: info.name.clone(),
            sm_count: info.sm_count,
            ptx: format!("{}:{:016x}", crate::kernels::PTX_ARCH, fnv1a(crate::kernels::PTX)),
            batch: shape.batch,
            hidden: shape.hidden,
            ffn: shape.ffn,
            tile: tile.name(),
        }
    }
}

/// What a trial measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// The plan taken, as [`MlpPlan::parse`] reads it ("streamsync", "rowsync/col",
    /// "strided:4/band2").
    pub plan: String,
    /// Every candidate (same spelling) with its median device time, µs.
    pub candidates: Vec<(String, f64)>,
    /// Timed samples per candidate.
    pub samples: usize,
    /// Every candidate but StreamSync (same spelling) with the rounds it was faster than
    /// StreamSync in (each round times every candidate once, side by side). Empty where the
    /// trial had no StreamSync.
    #[serde(default)]
    pub rounds_won: Vec<(String, usize)>,
    /// Rounds a policy had to win to be taken over StreamSync ([`rounds_to_win`]).
    #[serde(default)]
    pub rounds_needed: usize,
}

/// A policy as [`super::parse_policy`] reads it back.
pub fn policy_spelling(p: PolicyKind) -> String {
    match p {
        PolicyKind::StridedSync { stride } => format!("strided:{stride}"),
        other => other.name().to_ascii_lowercase(),
    }
}

impl TrialResult {
    /// The result of each candidate's timed samples (µs; sample `i` of every candidate from
    /// round `i`). With StreamSync among them, a policy is eligible where its median is smaller
    /// than StreamSync's and it was faster in at least [`rounds_to_win`] of the rounds; the
    /// eligible one with the smallest median is taken (the first listed on a tie), else
    /// StreamSync. Without StreamSync, the smallest median wins. Non-finite samples are
    /// dropped (a candidate with none has a NaN median and never wins). `None` without a
    /// finite measurement.
    pub fn from_samples(samples: &[(MlpPlan, Vec<f64>)], rounds: usize) -> Option<Self> {
        let median = |t: &[f64]| {
            let mut v: Vec<f64> = t.iter().copied().filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                f64::NAN
            } else {
                Stats::of(&mut v).median
            }
        };
        let medians: Vec<(MlpPlan, f64)> = samples.iter().map(|(p, t)| (*p, median(t))).collect();
        let fastest = |eligible: &dyn Fn(usize) -> bool| {
            medians
                .iter()
                .enumerate()
                .filter(|&(i, (_, us))| us.is_finite() && eligible(i))
                .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(i, _)| i)
        };
        let any = fastest(&|_| true)?;
        let stream_sync = samples.iter().position(|(p, _)| *p == MlpPlan::StreamSync);
        let needed = rounds_to_win(samples.iter().map(|(_, t)| t.len()).min().unwrap_or(0));
        let (pick, rounds_won) = match stream_sync.filter(|&s| medians[s].1.is_finite()) {
            None => (any, Vec::new()),
            Some(s) => {
                let reference = &samples[s].1;
                let won: Vec<usize> = samples
                    .iter()
                    .map(|(_, t)| t.iter().zip(reference).filter(|(a, b)| a < b).count())
                    .collect();
                // StreamSync is eligible (finite), so `fastest` finds a plan.
                let pick = fastest(&|i| i == s || (won[i] >= needed && medians[i].1 < medians[s].1)).unwrap_or(s);
                let rounds_won = samples
                    .iter()
                    .zip(&won)
                    .enumerate()
                    .filter(|&(i, _)| i != s)
                    .map(|(_, ((p, _), &w))| (p.spelling(), w))
                    .collect();
                (pick, rounds_won)
            }
        };
        Some(Self {
            plan: medians[pick].0.spelling(),
            candidates: medians.iter().map(|&(p, us)| (p.spelling(), us)).collect(),
            samples: rounds,
            rounds_won,
            rounds_needed: needed,
        })
    }

    /// The winning plan.
    pub fn plan(&self) -> Result<MlpPlan> {
        MlpPlan::parse(&self.plan)
    }

    /// The rounds `spelling` beat StreamSync in, where the trial counted them.
    pub fn rounds_won_by(&self, spelling: &str) -> Option<usize> {
        self.rounds_won.iter().find(|(p, _)| p == spelling).map(|&(_, w)| w)
    }
}

#[derive(Serialize, Deserialize)]
struct CacheEntry {
    key: TrialKey,
    result: TrialResult,
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    entries: Vec<CacheEntry>,
}

/// A cache file's version alone: read first, so a file of another format is told apart from a
/// corrupt one.
#[derive(Deserialize)]
struct CacheVersion {
    version: u32,
}

/// Trial results in a JSON file (read when opened, rewritten on every insert).
#[derive(Debug, Default)]
pub struct TrialCache {
    path: Option<PathBuf>,
    entries: BTreeMap<TrialKey, TrialResult>,
    warning: Option<String>,
}

impl TrialCache {
    /// A cache that lives only in this value.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The cache in `path`: its entries when the file exists and parses (entries whose policy
    /// does not parse are dropped), else empty, with [`TrialCache::warning`] saying why when
    /// the file exists but could not be used.
    pub fn open(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let mut cache = Self {
            path: Some(path.clone()),
            ..Self::default()
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return cache,
            Err(e) => {
                cache.warning = Some(format!("cannot read {}: {e}; measuring again", path.display()));
                return cache;
            }
        };
        let file = match serde_json::from_str::<CacheVersion>(&text) {
            Ok(v) if v.version != CACHE_VERSION => {
                cache.warning = Some(format!(
                    "{} has format version {}, not {CACHE_VERSION}; measuring again",
                    path.display(),
                    v.version
                ));
                return cache;
            }
            _ => serde_json::from_str::<CacheFile>(&text),
        };
        match file {
            Ok(file) => {
                cache.entries = file
                    .entries
                    .into_iter()
                    .filter(|e| e.result.plan().is_ok())
                    .map(|e| (e.key, e.result))
                    .collect();
            }
            Err(e) => {
                cache.warning = Some(format!(
                    "{} is not a trial cache ({e}); measuring again",
                    path.display()
                ))
            }
        }
        cache
    }

    /// Why an existing file could not be used, if it could not.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The cached result for `key`.
    pub fn get(&self, key: &TrialKey) -> Option<&TrialResult> {
        self.entries.get(key)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Stores `result` under `key` and rewrites the file (directories created; written to a
    /// temporary file first and renamed, so a reader never sees half a file).
    pub fn insert(&mut self, key: TrialKey, result: TrialResult) -> Result<()> {
        self.entries.insert(key, result);
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = CacheFile {
            version: CACHE_VERSION,
            entries: self
                .entries
                .iter()
                .map(|(k, r)| CacheEntry {
                    key: k.clone(),
                    result: r.clone(),
                })
                .collect(),
        };
        let io = |e: std::io::Error| Error::InvalidArgument(format!("cannot write {}: {e}", path.display()));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| Error::InvalidArgument(format!("cannot encode the trial cache: {e}")))?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// The process-wide cache (memory only).
fn process_cache() -> &'static Mutex<BTreeMap<TrialKey, TrialResult>> {
    static CACHE: OnceLock<Mutex<BTreeMap<TrialKey, TrialResult>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Forgets `key` in this process's memory (tests, or to force a new trial).
pub fn forget(key: &TrialKey) {
    if let Ok(mut c) = process_cache().lock() {
        c.remove(key);
    }
}

/// Where a policy decision came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The wave model alone (no trial asked for).
    Model,
    /// A trial measured now.
    Trial,
    /// A trial measured earlier in this process.
    CachedInProcess,
    /// A trial read from the cache file.
    CachedInFile,
}

/// The trial result for `key`: from this process's memory, else from the cache `file` (when
/// given), else `measure()`d now and stored in both. `measure` runs only in the last case.
pub fn resolve(
    key: &TrialKey,
    file: Option<&Path>,
    measure: impl FnOnce() -> Result<TrialResult>,
) -> Result<(TrialResult, Decision, Option<String>)> {
    let lock = || {
        process_cache()
            .lock()
            .map_err(|_| Error::InvalidArgument("the trial cache lock is poisoned".into()))
    };
    if let Some(r) = lock()?.get(key) {
        return Ok((r.clone(), Decision::CachedInProcess, None));
    }
    let mut disk = file.map(TrialCache::open);
    let warning = disk.as_ref().and_then(|d| d.warning().map(String::from));
    if let Some(r) = disk.as_ref().and_then(|d| d.get(key)) {
        lock()?.insert(key.clone(), r.clone());
        return Ok((r.clone(), Decision::CachedInFile, warning));
    }
    let result = measure()?;
    result.plan()?;
    lock()?.insert(key.clone(), result.clone());
    if let Some(d) = disk.as_mut() {
        d.insert(key.clone(), result.clone())?;
    }
    Ok((result, Decision::Trial, warning))
}

/// The default cache file: `$CUSYNC_CACHE_DIR/cusync-auto-policy.json`, else
/// `target/cache/cusync-auto-policy.json` under the current directory (the repository root
/// when run through cargo).
pub fn default_cache_file() -> PathBuf {
    let dir = std::env::var_os("CUSYNC_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target").join("cache"));
    dir.join("cusync-auto-policy.json")
}

/// How [`choose`] decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoOptions {
    /// Measure the candidates (else the wave model decides alone).
    pub trial: bool,
    /// Timed samples per candidate in a trial (after one warm-up).
    pub samples: usize,
    /// The cache file for trials (`None`: this process's memory only).
    pub cache_file: Option<PathBuf>,
}

impl Default for AutoOptions {
    fn default() -> Self {
        Self {
            trial: false,
            samples: 5,
            cache_file: Some(default_cache_file()),
        }
    }
}

/// Policy::Auto's answer.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The plan to run: StreamSync, or a policy with a tile order.
    pub plan: MlpPlan,
    /// Where it came from.
    pub decision: Decision,
    /// The wave model's prediction (always computed: it names the candidates).
    pub prediction: PairPrediction,
    /// The trial's measurements, when a trial decided.
    pub trial: Option<TrialResult>,
    /// Why the cache file could not be used, when it could not.
    pub warning: Option<String>,
}

/// The plans a trial times on `mlp`: [`trial_plans_for`] its producer grid's row tiles and
/// kernel family.
pub fn trial_plans(mlp: &Mlp, policies: &[PolicyKind]) -> Vec<MlpPlan> {
    trial_plans_for(policies, mlp.grids().0.x, mlp.tile().is_skinny())
}

/// The plans a trial times: StreamSync first (it wins a tie: no protocol code), then each of
/// `policies` in each tile order of [`SEARCH_ORDERS`] that walks a producer grid of `row_tiles`
/// row tiles (on skinny stages or not) differently ([`distinct_orders`]).
pub fn trial_plans_for(policies: &[PolicyKind], row_tiles: u32, skinny: bool) -> Vec<MlpPlan> {
    let orders = distinct_orders(&SEARCH_ORDERS, row_tiles, skinny);
    let mut plans = vec![MlpPlan::StreamSync];
    for &policy in policies {
        plans.extend(orders.iter().map(|&order| MlpPlan::Synced { policy, order }));
    }
    plans
}

/// One candidate of a trial, ready to launch.
enum Candidate<'cx> {
    StreamSync,
    /// Boxed: a graph is large beside StreamSync's nothing.
    Graph(Box<crate::stream::StreamGraph<'cx>>),
}

impl Candidate<'_> {
    /// Device µs of one launch on `mlp`.
    fn run_us(&mut self, mlp: &mut Mlp) -> Result<f64> {
        let ms = match self {
            Candidate::StreamSync => mlp.run_stream_sync()?,
            Candidate::Graph(g) => mlp.run_graph(g)?.elapsed_ms,
        };
        Ok(ms as f64 * 1e3)
    }
}

/// Each plan's timed samples (device µs, one per round) on `mlp` (a synchronized plan's graph launched as
/// [`WaitKernelPolicy::preferred`] says: programmatically on sm_90a, else with the wait kernel
/// per optimization W), side by side: one untimed launch of every plan, then `samples`
/// rounds in which every plan runs once untimed and once timed, so all of them see the same
/// clocks and each timed launch finds its own code and operands warm.
pub fn measure_candidates(mlp: &mut Mlp, plans: &[MlpPlan], samples: usize) -> Result<Vec<(MlpPlan, Vec<f64>)>> {
    let mut candidates = plans
        .iter()
        .map(|&plan| {
            Ok(match plan {
                MlpPlan::StreamSync => Candidate::StreamSync,
                MlpPlan::Synced { policy, order } => {
                    let launch = WaitKernelPolicy::preferred(mlp.context());
                    Candidate::Graph(Box::new(mlp.graph_ordered(policy, launch, order)?))
                }
            })
        })
        .collect::<Result<Vec<_>>>()?;
    for c in candidates.iter_mut() {
        c.run_us(mlp)?;
    }
    let mut times = vec![Vec::with_capacity(samples.max(1)); plans.len()];
    for _ in 0..samples.max(1) {
        for (c, t) in candidates.iter_mut().zip(times.iter_mut()) {
            c.run_us(mlp)?;
            t.push(c.run_us(mlp)?);
        }
    }
    Ok(plans.iter().copied().zip(times).collect())
}

/// Policy::Auto for `shape` on `cx` (tile: `tile`, or the heuristic's choice): the wave
/// model's plan, or, with `opts.trial`, the fastest candidate of a short trial, cached (see the
/// module docs).
pub fn choose(cx: &Context, shape: MlpShape, tile: Option<super::MlpKernel>, opts: &AutoOptions) -> Result<AutoChoice> {
    let mut mlp = Mlp::new(cx, shape, tile, 1)?;
    let (_, prediction) = auto_policy(
        shape,
        mlp.tile(),
        mlp.split_ks(),
        cx.info().sm_count,
        mlp.blocks_per_sm()?,
    )?;
    if !opts.trial {
        return Ok(AutoChoice {
            plan: MlpPlan::from_prediction(&prediction, crate::sim::report::RECOMMEND_MARGIN),
            decision: Decision::Model,
            prediction,
            trial: None,
            warning: None,
        });
    }
    let policies: Vec<PolicyKind> = prediction.policies.iter().map(|o| o.policy).collect();
    let plans = trial_plans(&mlp, &policies);
    let key = TrialKey::new(cx.info(), shape, mlp.tile());
    let (result, decision, warning) = resolve(&key, opts.cache_file.as_deref(), || {
        let samples = measure_candidates(&mut mlp, &plans, opts.samples)?;
        TrialResult::from_samples(&samples, opts.samples)
            .ok_or_else(|| Error::InvalidArgument("the trial measured no candidate".into()))
    })?;
    Ok(AutoChoice {
        plan: result.plan()?,
        decision,
        prediction,
        trial: Some(result),
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(test: &str) -> TrialKey {
        TrialKey {
            device: format!("test device ({test}, pid {})", std::process::id()),
            sm_count: 132,
            ptx: "sm_90a:0".into(),
            batch: 256,
            hidden: 12288,
            ffn: 6144,
            tile: "128x128".into(),
        }
    }

    fn synced(policy: PolicyKind) -> MlpPlan {
        MlpPlan::Synced {
            policy,
            order: super::super::MlpOrder::ColumnMajor,
        }
    }

    fn result(plan: MlpPlan) -> TrialResult {
        TrialResult::from_samples(&[(plan, vec![10.0; 3])], 3).unwrap()
    }

    fn temp_file(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cusync-auto-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("nested").join("cache.json")
    }

    #[test]
    fn the_smallest_median_that_beat_stream_sync_in_enough_rounds_wins_and_spellings_round_trip() {
        let samples = [
            (MlpPlan::StreamSync, vec![110.0, 111.0, 109.0, 110.0, 112.0]),
            (synced(PolicyKind::TileSync), vec![120.0; 5]),
            (synced(PolicyKind::RowSync), vec![100.0, 101.0, 99.0, 100.0, 102.0]),
            (synced(PolicyKind::StridedSync { stride: 4 }), vec![f64::NAN; 5]),
        ];
        let r = TrialResult::from_samples(&samples, 5).unwrap();
        assert_eq!(r.plan, "rowsync/col");
        assert_eq!(r.plan().unwrap(), synced(PolicyKind::RowSync));
        assert_eq!(r.candidates[0], ("streamsync".to_string(), 110.0));
        assert_eq!(r.candidates[2], ("rowsync/col".to_string(), 100.0));
        assert_eq!(r.candidates[3].0, "strided:4/col");
        assert!(r.candidates[3].1.is_nan());
        assert_eq!(r.samples, 5);
        assert_eq!(r.rounds_needed, 5);
        assert_eq!(r.rounds_won_by("rowsync/col"), Some(5));
        assert_eq!(r.rounds_won_by("tilesync/col"), Some(0));
        assert_eq!(r.rounds_won_by("streamsync"), None);
        for p in [
            PolicyKind::TileSync,
            PolicyKind::RowSync,
            PolicyKind::StridedSync { stride: 3 },
        ] {
            assert_eq!(super::super::parse_policy(&policy_spelling(p)).unwrap(), p);
        }
        // StreamSync wins where every policy is slower, and a tie (listed first).
        let slower = [
            (MlpPlan::StreamSync, vec![100.0]),
            (synced(PolicyKind::RowSync), vec![100.5]),
        ];
        assert_eq!(TrialResult::from_samples(&slower, 1).unwrap().plan, "streamsync");
        let tie = [
            (MlpPlan::StreamSync, vec![5.0]),
            (synced(PolicyKind::TileSync), vec![5.0]),
        ];
        assert_eq!(
            TrialResult::from_samples(&tie, 1).unwrap().plan().unwrap(),
            MlpPlan::StreamSync
        );
        // Nothing finite is no result.
        assert!(TrialResult::from_samples(&[(MlpPlan::StreamSync, vec![f64::NAN])], 1).is_none());
        assert!(TrialResult::from_samples(&[], 1).is_none());
        // Without StreamSync the smallest median wins, and no rounds are counted.
        let policies = [
            (synced(PolicyKind::TileSync), vec![9.0, 9.0]),
            (synced(PolicyKind::RowSync), vec![8.0, 10.0, 8.5]),
        ];
        let r = TrialResult::from_samples(&policies, 3).unwrap();
        assert_eq!((r.plan.as_str(), r.rounds_won.len()), ("rowsync/col", 0));
    }

    #[test]
    fn a_smaller_median_inside_the_noise_leaves_stream_sync() {
        // Session 38's B = 1 trial: RowSync's median 1.6% under StreamSync's, but it was
        // faster in three rounds of five: within the noise, so StreamSync stays.
        let samples = [
            (MlpPlan::StreamSync, vec![86.2, 84.0, 86.9, 85.0, 86.4]),
            (synced(PolicyKind::RowSync), vec![84.8, 84.5, 85.0, 86.0, 84.7]),
            (synced(PolicyKind::TileSync), vec![85.1, 85.6, 85.3, 85.4, 85.2]),
        ];
        let r = TrialResult::from_samples(&samples, 5).unwrap();
        assert!(r.candidates[1].1 < r.candidates[0].1, "{:?}", r.candidates);
        assert_eq!(r.rounds_won_by("rowsync/col"), Some(3));
        assert_eq!(r.rounds_won_by("tilesync/col"), Some(3));
        assert_eq!(r.plan, "streamsync");
        // Faster in every round: the policy with the smaller median of those is taken, even
        // where another had a smaller median but lost a round.
        let samples = [
            (MlpPlan::StreamSync, vec![90.0, 91.0, 90.5, 90.2, 90.8]),
            (synced(PolicyKind::RowSync), vec![80.0, 80.0, 95.0, 80.0, 80.0]),
            (synced(PolicyKind::TileSync), vec![89.0, 89.5, 89.2, 89.1, 89.9]),
        ];
        let r = TrialResult::from_samples(&samples, 5).unwrap();
        assert_eq!(
            (r.rounds_won_by("rowsync/col"), r.rounds_won_by("tilesync/col")),
            (Some(4), Some(5))
        );
        assert_eq!(r.plan, "tilesync/col");
    }

    #[test]
    fn rounds_to_win_is_a_one_sided_sign_test_at_five_percent() {
        // Fewer than five rounds: every round (no smaller count is that unlikely).
        assert_eq!([0, 1, 2, 3, 4].map(rounds_to_win), [1, 1, 2, 3, 4]);
        // Five: all (1/32); six: all (1/64; five of six is 7/64); eleven: nine (67/2048).
        assert_eq!([5, 6, 7, 11, 20].map(rounds_to_win), [5, 6, 7, 9, 15]);
        for n in 5..40 {
            let k = rounds_to_win(n);
            let tail = |k: usize| -> f64 {
                (k..=n)
                    .map(|j| (0..j).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64))
                    .sum::<f64>()
                    / 2f64.powi(n as i32)
            };
            assert!(
                tail(k) <= TRIAL_SIGNIFICANCE && tail(k - 1) > TRIAL_SIGNIFICANCE,
                "n = {n}, k = {k}"
            );
        }
    }

    #[test]
    fn a_trial_times_stream_sync_then_each_policy_in_each_distinct_order() {
        let policies = [PolicyKind::TileSync, PolicyKind::RowSync];
        let spell = |plans: Vec<MlpPlan>| plans.iter().map(|p| p.spelling()).collect::<Vec<_>>();
        assert_eq!(
            spell(trial_plans_for(&policies, 8, false)),
            [
                "streamsync",
                "tilesync/row",
                "tilesync/col",
                "tilesync/band2",
                "tilesync/band4",
                "rowsync/row",
                "rowsync/col",
                "rowsync/band2",
                "rowsync/band4"
            ]
        );
        // Two row tiles: the bands are column-major; one row or skinny stages: one walk.
        assert_eq!(trial_plans_for(&policies, 2, false).len(), 1 + 2 * 2);
        assert_eq!(
            spell(trial_plans_for(&policies, 1, false)),
            ["streamsync", "tilesync/row", "rowsync/row"]
        );
        assert_eq!(trial_plans_for(&policies, 8, true).len(), 3);
        // No policy fits: StreamSync alone.
        assert_eq!(trial_plans_for(&[], 8, false), [MlpPlan::StreamSync]);
    }

    #[test]
    fn a_trial_runs_once_per_process_and_key() {
        let k = key("process");
        let runs = Cell::new(0);
        let measure = || {
            runs.set(runs.get() + 1);
            Ok(result(synced(PolicyKind::TileSync)))
        };
        let (r, d, _) = resolve(&k, None, measure).unwrap();
        assert_eq!((r.plan().unwrap(), d), (synced(PolicyKind::TileSync), Decision::Trial));
        let (r, d, _) = resolve(&k, None, measure).unwrap();
        assert_eq!(
            (r.plan().unwrap(), d),
            (synced(PolicyKind::TileSync), Decision::CachedInProcess)
        );
        assert_eq!(runs.get(), 1);
        // Another key (another batch) measures again.
        let mut other = k.clone();
        other.batch = 512;
        assert_eq!(resolve(&other, None, measure).unwrap().1, Decision::Trial);
        assert_eq!(runs.get(), 2);
        // A failed measurement is returned and caches nothing.
        forget(&k);
        let failing = || Err(Error::InvalidArgument("no GPU".into()));
        assert!(resolve(&k, None, failing).is_err());
        assert_eq!(resolve(&k, None, measure).unwrap().1, Decision::Trial);
        forget(&k);
        forget(&other);
    }

    #[test]
    fn the_file_cache_survives_the_process_and_keeps_other_entries() {
        let path = temp_file("file");
        let k = key("file");
        let runs = Cell::new(0);
        let measure = |p: PolicyKind| {
            let runs = &runs;
            move || {
                runs.set(runs.get() + 1);
                Ok(result(synced(p)))
            }
        };
        assert_eq!(
            resolve(&k, Some(&path), measure(PolicyKind::RowSync)).unwrap().1,
            Decision::Trial
        );
        assert!(path.exists(), "the cache file and its directories are created");
        // A "new process": the memory is empty, the file answers without measuring.
        forget(&k);
        let (r, d, w) = resolve(&k, Some(&path), measure(PolicyKind::TileSync)).unwrap();
        assert_eq!(
            (r.plan().unwrap(), d, w),
            (synced(PolicyKind::RowSync), Decision::CachedInFile, None)
        );
        assert_eq!(runs.get(), 1);
        // A second key is added beside the first.
        let mut k2 = k.clone();
        k2.tile = "64x64".into();
        resolve(&k2, Some(&path), measure(PolicyKind::TileSync)).unwrap();
        let cache = TrialCache::open(&path);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&k).unwrap().plan, "rowsync/col");
        assert_eq!(cache.get(&k2).unwrap().plan, "tilesync/col");
        assert_eq!(cache.path(), Some(path.as_path()));
        // Another device's key is not answered from this file.
        let mut k3 = k.clone();
        k3.device.push_str(" (other)");
        assert!(cache.get(&k3).is_none());
        for key in [&k, &k2, &k3] {
            forget(key);
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_measured_over_not_an_error() {
        let path = temp_file("corrupt");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let k = key("corrupt");
        // Version 1's file (a policy alone) is an older format, measured over like a foreign one.
        let version1 = r#"{"version": 1, "entries": [{"key": {"device": "d", "sm_count": 132,
            "ptx": "sm_90a:0", "batch": 256, "hidden": 12288, "ffn": 6144, "tile": "128x128"},
            "result": {"policy": "rowsync", "candidates": [["rowsync", 1.0]], "samples": 1}}]}"#;
        let version2 = version1
            .replace(r#""version": 1"#, r#""version": 2"#)
            .replace(r#""policy": "rowsync""#, r#""plan": "rowsync/col""#);
        for (bad, why) in [
            ("{ not json", "is not a trial cache"),
            (r#"{"version": 99, "entries": []}"#, "format version 99, not 3"),
            (version1, "format version 1, not 3"),
            // Version 2's picks were decided by medians alone: measured again.
            (&version2, "format version 2, not 3"),
        ] {
            forget(&k);
            std::fs::write(&path, bad).unwrap();
            let cache = TrialCache::open(&path);
            assert!(cache.is_empty());
            let warning = cache.warning().unwrap();
            assert!(
                warning.contains("measuring again") && warning.contains(why),
                "{warning}"
            );
            let (r, d, w) = resolve(&k, Some(&path), || Ok(result(synced(PolicyKind::TileSync)))).unwrap();
            assert_eq!((r.plan, d), ("tilesync/col".to_string(), Decision::Trial));
            assert!(w.is_some());
            // Rewritten: the next process reads it.
            assert_eq!(TrialCache::open(&path).get(&k).unwrap().plan, "tilesync/col");
        }
        // An entry whose plan does not parse is dropped when read.
        let mut cache = TrialCache::open(&path);
        let mut bogus = result(synced(PolicyKind::RowSync));
        bogus.plan = "fastest".into();
        let mut k2 = k.clone();
        k2.batch = 1;
        cache.insert(k2.clone(), bogus).unwrap();
        let reread = TrialCache::open(&path);
        assert!(reread.get(&k2).is_none());
        assert!(reread.get(&k).is_some());
        // A missing file is simply empty, with no warning.
        let missing = TrialCache::open(path.with_file_name("absent.json"));
        assert!(missing.is_empty() && missing.warning().is_none());
        forget(&k);
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn keys_name_the_device_build_shape_and_tile() {
        let info = DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            major: 9,
            minor: 0,
            sm_count: 132,
            max_smem_per_block_optin: 232448,
            smem_per_sm: 233472,
            l2_bytes: 50 << 20,
            total_mem: 1 << 30,
        };
        let a = TrialKey::new(
            &info,
            MlpShape::gpt3(256),
            crate::ops::gemm::TileConfig::T128x128.into(),
        );
        assert_eq!(a.device, "NVIDIA H200");
        assert!(a.ptx.starts_with(crate::kernels::PTX_ARCH), "{}", a.ptx);
        assert_eq!((a.batch, a.hidden, a.ffn), (256, 12288, 6144));
        let b = TrialKey::new(&info, MlpShape::gpt3(256), crate::ops::gemm::TileConfig::T64x64.into());
        assert_ne!(a, b);
        assert_eq!(
            a,
            TrialKey::new(
                &info,
                MlpShape::gpt3(256),
                crate::ops::gemm::TileConfig::T128x128.into()
            )
        );
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(default_cache_file().file_name().unwrap(), "cusync-auto-policy.json");
    }
}
