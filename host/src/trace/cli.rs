//! What the `cusync trace` subcommands do; each returns the text to print.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::Result;

use super::analysis::{analyze, AnalysisOptions};
use super::files::write;
use super::model::Trace;
use super::svg::{render, SvgOptions};
use super::synthetic::{SyntheticSync, SyntheticTwoStage};

/// Where `cusync trace analyze` writes the SVG timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SvgTarget {
    /// Beside the trace: the trace's path with extension `.svg`. A failure to write it is a
    /// warning in the output, not an error.
    Beside,
    /// At this path; a failure to write it is an error.
    At(PathBuf),
    /// Nowhere.
    Skip,
}

/// `cusync trace analyze FILE [--svg OUT | --no-svg]`: the report of a `.json` or `.csv`
/// trace, and its SVG timeline.
pub fn analyze_file(file: &Path, svg: &SvgTarget, buckets: usize) -> Result<String> {
    let trace = Trace::load(file)?;
    let analysis = analyze(&trace, &AnalysisOptions { buckets })?;
    let mut out = analysis.report();
    let path = match svg {
        SvgTarget::Skip => return Ok(out),
        SvgTarget::Beside => file.with_extension("svg"),
        SvgTarget::At(p) => p.clone(),
    };
    let options = SvgOptions::default();
    let fine = analyze(
        &trace,
        &AnalysisOptions {
            buckets: options.buckets,
        },
    )?;
    match (write(&path, &render(&trace, &fine, &options)), svg) {
        (Ok(()), _) => {
            let _ = writeln!(out, "\nwrote the timeline to {}", path.display());
        }
        (Err(e), SvgTarget::Beside) => {
            let _ = writeln!(
                out,
                "\nwarning: no timeline written ({e}); give --svg OUT to choose a place"
            );
        }
        (Err(e), _) => return Err(e),
    }
    Ok(out)
}

/// `cusync trace convert IN OUT`: rewrites a trace in the format of `OUT`'s extension
/// (`.json`, `.csv` or `.svg`).
pub fn convert(input: &Path, output: &Path) -> Result<String> {
    let trace = Trace::load(input)?;
    trace.save(output)?;
    Ok(format!("wrote {} ({} tiles)\n", output.display(), trace.events.len()))
}

/// The two synthetic runs of `cusync trace demo`: the same producer/consumer pair under
/// stream synchronization and under row synchronization.
pub fn demo_traces() -> [(&'static str, Trace); 2] {
    let base = SyntheticTwoStage::default();
    let stream = SyntheticTwoStage {
        label: "synthetic producer -> consumer, stream synchronization".into(),
        sync: SyntheticSync::Stream,
        ..base.clone()
    };
    let row = SyntheticTwoStage {
        label: "synthetic producer -> consumer, row synchronization (CuSync)".into(),
        ..base
    };
    [
        ("demo-streamsync", Trace::synthetic_two_stage(&stream)),
        ("demo-rowsync", Trace::synthetic_two_stage(&row)),
    ]
}

/// `cusync trace demo DIR`: writes JSON, CSV and SVG of [`demo_traces`] into `dir`.
pub fn demo(dir: &Path) -> Result<String> {
    let mut out = String::from(
        "Synthetic traces (no GPU involved): 16 SMs, 24 producer tiles of ~10 us, then 24 consumer tiles of ~8 us\n\
         reading whole producer rows; once with stream synchronization, once with row synchronization.\n",
    );
    for (stem, trace) in demo_traces() {
        let paths = trace.save_all(dir, stem)?;
        let a = trace.analyze()?;
        let _ = writeln!(
            out,
            "\n{}: span {:.2} us, SMs busy {:.1}%, tail {:.2} us, dispatch rounds up to {}",
            a.label,
            a.span_ns as f64 / 1000.0,
            a.busy_fraction * 100.0,
            a.tails.first().map_or(0.0, |t| t.tail_ns as f64 / 1000.0),
            a.rounds.max
        );
        for p in paths {
            let _ = writeln!(out, "  wrote {}", p.display());
        }
    }
    let _ = writeln!(
        out,
        "\nOpen the .json in https://ui.perfetto.dev, the .svg in a browser; `cusync trace analyze FILE` reports on either trace."
    );
    Ok(out)
}
