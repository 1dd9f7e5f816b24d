//! Finding the input files of a data directory.

use std::path::{Path, PathBuf};

use super::Kind;
use crate::error::{Error, Result};

/// How a file is encoded, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `*.csv`
    Csv,
    /// `*.csv.gz`
    CsvGz,
    /// `*.csv.zst`
    CsvZst,
    /// `*.parquet`
    Parquet,
}

impl Format {
    /// The format of a file name, compared case-insensitively.
    pub fn of(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".csv") {
            Some(Format::Csv)
        } else if lower.ends_with(".csv.gz") {
            Some(Format::CsvGz)
        } else if lower.ends_with(".csv.zst") {
            Some(Format::CsvZst)
        } else if lower.ends_with(".parquet") {
            Some(Format::Parquet)
        } else {
            None
        }
    }
}

/// One input file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFile {
    /// Which folder it came from.
    pub kind: Kind,
    /// Its path on disk.
    pub path: PathBuf,
    /// Its path relative to the data directory, `/`-separated: the name used
    /// in messages.
    pub name: String,
    /// Its encoding.
    pub format: Format,
    /// Its size in bytes.
    pub size: u64,
}

/// The files of a data directory, in a fixed order: by kind, then by name.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Record files, sorted.
    pub files: Vec<InputFile>,
    /// Files in record folders that are not of a record format (named so
    /// that a caller can warn about them); hidden files are not listed.
    pub ignored: Vec<String>,
}

impl Inventory {
    /// Lists every record file under `data`; missing folders hold nothing.
    pub fn scan(data: &Path) -> Result<Inventory> {
        let meta = std::fs::metadata(data).map_err(|e| Error::io(data, e))?;
        if !meta.is_dir() {
            return Err(Error::io(data, "not a directory"));
        }
        let mut inventory = Inventory::default();
        for kind in Kind::ALL {
            let folder = data.join(kind.name());
            if !folder.exists() {
                continue;
            }
            let mut found = Vec::new();
            walk(&folder, &mut found)?;
            for path in found {
                let relative = path.strip_prefix(data).unwrap_or(&path);
                let name = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                if file_name.starts_with('.') {
                    continue;
                }
                match Format::of(&file_name) {
                    Some(format) => {
                        let size = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
                        inventory.files.push(InputFile { kind, path, name, format, size });
                    }
                    None => inventory.ignored.push(name),
                }
            }
        }
        inventory.files.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        inventory.ignored.sort();
        Ok(inventory)
    }
}

/// Every regular file below `folder`, recursively, skipping hidden folders.
pub fn walk(folder: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(folder, e))?;
        let path = entry.path();
        let file_type = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.file_type();
        if file_type.is_dir() {
            if !entry.file_name().to_string_lossy().starts_with('.') {
                walk(&path, out)?;
            }
        } else if file_type.is_file() {
            out.push(path);
        }
    }
    Ok(())
}
