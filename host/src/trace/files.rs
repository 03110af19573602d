//! Traces on disk: the format follows the file extension (`.json` Chrome trace, `.csv` CSV,
//! `.svg` timeline, written only). Errors name the file.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

use super::chrome::ChromeLayout;
use super::model::Trace;
use super::svg::SvgOptions;

/// The file formats a trace is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Chrome trace JSON (`.json`), per-stage layout.
    ChromeJson,
    /// CSV (`.csv`).
    Csv,
    /// SVG timeline (`.svg`); write-only.
    Svg,
}

impl Format {
    /// The format named by `path`'s extension (case-insensitive).
    pub fn of(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" => Some(Self::ChromeJson),
            "csv" => Some(Self::Csv),
            "svg" => Some(Self::Svg),
            _ => None,
        }
    }
}

impl Trace {
    /// Reads a `.json` or `.csv` trace (other extensions: JSON if the text starts with `{`,
    /// else CSV).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidArgument(format!("cannot read trace {}: {e}", path.display())))?;
        let json = match Format::of(path) {
            Some(Format::ChromeJson) => true,
            Some(Format::Csv) => false,
            Some(Format::Svg) => {
                return Err(Error::InvalidArgument(format!(
                    "{}: an SVG timeline cannot be read back; give the .json or .csv trace",
                    path.display()
                )))
            }
            None => text.trim_start().starts_with('{'),
        };
        let parsed = if json {
            Self::from_chrome_json(&text)
        } else {
            Self::from_csv(&text)
        };
        parsed.map_err(|e| in_file(e, path))
    }

    /// Writes the trace in the format of `path`'s extension (`.json`, `.csv` or `.svg`).
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = match Format::of(path) {
            Some(Format::ChromeJson) => self.to_chrome_json(ChromeLayout::PerStage),
            Some(Format::Csv) => self.to_csv(),
            Some(Format::Svg) => self.to_svg(&SvgOptions::default())?,
            None => {
                return Err(Error::InvalidArgument(format!(
                    "{}: unknown trace format; use .json, .csv or .svg",
                    path.display()
                )))
            }
        };
        write(path, &text)
    }

    /// Writes `dir/stem.json`, `dir/stem.csv` and `dir/stem.svg` (creating `dir`); returns
    /// the paths.
    pub fn save_all(&self, dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::InvalidArgument(format!("cannot create directory {}: {e}", dir.display())))?;
        ["json", "csv", "svg"]
            .iter()
            .map(|ext| {
                let path = dir.join(format!("{stem}.{ext}"));
                self.save(&path).map(|()| path)
            })
            .collect()
    }
}

/// Writes `text` to `path`, naming the file in the error.
pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::InvalidArgument(format!("cannot write {}: {e}", path.display())))
}

/// Prefixes an invalid-argument message with the file it is about.
fn in_file(e: Error, path: &Path) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{}: {m}", path.display())),
        other => other,
    }
}
