//! `cusync trace`: analyse, convert or synthesize tile traces (no GPU needed).

use clap::Subcommand;

/// `cusync trace ...` (the work is in `cusync::trace::cli`).
#[derive(Subcommand)]
pub enum TraceCommand {
    /// Per-wave report of a trace (.json Chrome trace or .csv): waves, SM busy fraction, waits,
    /// tails, critical path; writes the SVG timeline beside the trace unless told otherwise.
    Analyze {
        /// The trace (.json or .csv).
        file: std::path::PathBuf,
        /// Write the SVG timeline here instead of beside the trace.
        #[arg(long, value_name = "OUT", conflicts_with = "no_svg")]
        svg: Option<std::path::PathBuf>,
        /// Write no SVG timeline.
        #[arg(long)]
        no_svg: bool,
        /// Buckets of the busy timeline in the report.
        #[arg(long, default_value_t = 20)]
        buckets: usize,
    },
    /// Rewrites a trace in the format of OUT's extension (.json, .csv or .svg).
    Convert {
        /// The trace (.json or .csv).
        input: std::path::PathBuf,
        /// Where to write it.
        output: std::path::PathBuf,
    },
    /// Writes JSON, CSV and SVG of two synthetic runs (stream vs row synchronization) into DIR.
    Demo {
        /// The directory (created if missing).
        dir: std::path::PathBuf,
    },
}

pub fn trace_command(command: TraceCommand) -> cusync::Result<()> {
    use cusync::trace::cli::{self, SvgTarget};
    let text = match command {
        TraceCommand::Analyze {
            file,
            svg,
            no_svg,
            buckets,
        } => {
            let target = match (svg, no_svg) {
                (_, true) => SvgTarget::Skip,
                (Some(out), false) => SvgTarget::At(out),
                (None, false) => SvgTarget::Beside,
            };
            cli::analyze_file(&file, &target, buckets)?
        }
        TraceCommand::Convert { input, output } => cli::convert(&input, &output)?,
        TraceCommand::Demo { dir } => cli::demo(&dir)?,
    };
    print!("{text}");
    Ok(())
}
