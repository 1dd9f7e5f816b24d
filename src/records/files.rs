//! Finding the input files of a data directory.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use super::Kind;
use crate::checksum::Expected;
use crate::error::{Error, Notice, Result};

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
    /// The sum its bytes must have (a store's records file): checked on the
    /// bytes read, before any is parsed. Only a Parquet file, read whole,
    /// is checked; `None` for an input of a data directory.
    pub sum: Option<Expected>,
}

impl InputFile {
    /// An error about this file as a whole ([`Error::BadFile`]), named as
    /// every message names an input file: by [`InputFile::name`], its path
    /// relative to the data directory.
    pub fn bad_file(&self, message: impl Into<String>) -> Error {
        Error::bad_file(&self.name, message)
    }

    /// `error` of a function that read this file by its path on disk
    /// (`decode::read`), named by [`InputFile::name`] instead.
    pub fn renamed(&self, error: Error) -> Error {
        match error {
            Error::Io { path, source } if path == self.path => Error::Io { path: self.name.clone().into(), source },
            Error::BadFile { path, message } if path == self.path => {
                Error::BadFile { path: self.name.clone().into(), message }
            }
            other => other,
        }
    }
}

/// The files of a data directory, in a fixed order: by kind, then by name.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Record files, sorted.
    pub files: Vec<InputFile>,
    /// Files in record folders that are not of a record format (named so
    /// that a caller can warn about them); hidden files are not listed.
    pub ignored: Vec<String>,
    /// Entries in record folders that are neither files nor folders (a
    /// FIFO, a socket, a device): never read, whatever their name, since
    /// reading one could block or never end; named to warn about them.
    pub not_regular: Vec<String>,
    /// Entries at the top of the data directory that are not part of its
    /// layout ([`LAYOUT`]): not read. Hidden entries and `README*` files
    /// are not listed.
    pub unknown: Vec<String>,
    /// How many of the record folders exist.
    pub folders: usize,
    /// Rows (numbered from 1) of some files that are not read, by file
    /// index: a store's stored versions that count nowhere (superseded or
    /// withdrawn), when its records files are read as records.
    pub skipped_rows: std::collections::BTreeMap<u32, std::collections::HashSet<u64>>,
}

/// What a data directory may hold at its top, beside the record folders
/// (`records.md`, `resources.md`).
pub const LAYOUT: [&str; 4] = ["accounts.csv", "endpoints.csv", "registrations.csv", "recordings"];

/// The files of `kind` among `files`, each with its position in `files`
/// (an inventory's order, which the ingest numbers its sources by).
pub fn of_kind(files: &[InputFile], kind: Kind) -> Vec<(u32, &InputFile)> {
    files.iter().enumerate().filter(|(_, f)| f.kind == kind).map(|(i, f)| (i as u32, f)).collect()
}

/// An entry at the top of a data directory listed elsewhere
/// ([`Inventory::from_listing`]; the Spark job's `listing.json` writes it).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct TopEntry {
    /// Its name.
    pub name: String,
    /// Whether it is a folder.
    #[serde(rename = "dir")]
    pub is_dir: bool,
}

/// A file of a data directory listed elsewhere ([`Inventory::from_listing`]).
#[derive(Clone, Debug)]
pub struct ListedFile {
    /// The kind folder it was found under.
    pub kind: Kind,
    /// Where it is read from.
    pub uri: String,
    /// Its path relative to the data directory, as messages name it.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

impl Inventory {
    /// Lists every record file under `data`; missing folders hold nothing.
    pub fn scan(data: &Path) -> Result<Inventory> {
        let meta = std::fs::metadata(data).map_err(|e| Error::io(data, e))?;
        if !meta.is_dir() {
            return Err(Error::io(data, "not a directory"));
        }
        let mut inventory = Inventory::default();
        for kind in Kind::FOLDERS {
            let folder = data.join(kind.name());
            if !folder.exists() {
                continue;
            }
            inventory.folders += usize::from(kind != Kind::Voids);
            let (mut found, mut not_regular) = (Vec::new(), Vec::new());
            walk_entries(&folder, &mut found, &mut not_regular)?;
            let name_of = |path: &Path| {
                let relative = path.strip_prefix(data).unwrap_or(path);
                relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
            };
            inventory.not_regular.extend(not_regular.iter().map(|path| name_of(path)));
            for path in found {
                let name = name_of(&path);
                let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                inventory.add(kind, path, name, &file_name, |path, name| {
                    std::fs::metadata(path).map(|m| m.len()).map_err(|e| Error::io(name, e))
                })?;
            }
        }
        inventory.sort();
        inventory.unknown = unknown_entries(data)?;
        Ok(inventory)
    }

    /// The inventory of a data directory listed elsewhere (by the Spark job,
    /// through Hadoop, for a URI): every file found under the kinds'
    /// folders, outside hidden folders, and the entries at its top, of
    /// which `folders` are record folders; chosen and sorted as
    /// [`Inventory::scan`] does, so that [`Inventory::notices`] says the
    /// same. (Entries that are not regular files are not listed.)
    pub fn from_listing(
        listing: impl IntoIterator<Item = ListedFile>,
        folders: usize,
        top: impl IntoIterator<Item = TopEntry>,
    ) -> Inventory {
        let mut inventory = Inventory { folders, unknown: unknown_of(top), ..Inventory::default() };
        for ListedFile { kind, uri, name, size } in listing {
            let file_name = name.rsplit('/').next().unwrap_or_default().to_owned();
            let Ok(()) = inventory.add(kind, PathBuf::from(uri), name, &file_name, |_, _| Ok::<_, Infallible>(size));
        }
        inventory.sort();
        inventory
    }

    /// Adds the file `path` (`name` in messages) if it is a record file of
    /// a known format; not hidden files; other files as ignored.
    /// `size` is asked only of a record file: its error is `add`'s.
    fn add<E>(
        &mut self,
        kind: Kind,
        path: PathBuf,
        name: String,
        file_name: &str,
        size: impl FnOnce(&Path, &str) -> std::result::Result<u64, E>,
    ) -> std::result::Result<(), E> {
        if file_name.starts_with('.') {
            return Ok(());
        }
        match Format::of(file_name) {
            Some(format) => {
                let size = size(&path, &name)?;
                self.files.push(InputFile { kind, path, name, format, size, sum: None });
            }
            None => self.ignored.push(name),
        }
        Ok(())
    }

    fn sort(&mut self) {
        self.files.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        self.ignored.sort();
        self.not_regular.sort();
    }

    /// What is surprising about the data directory `data` this inventory
    /// was taken of: no record folder at all (nothing to read), files in
    /// record folders of no record format, entries at its top that nothing
    /// reads. Paths are relative to the data directory.
    pub fn notices(&self, data: &Path) -> Vec<Notice> {
        let mut notices = Vec::new();
        let folders: Vec<String> = Kind::ALL.iter().map(|k| format!("{}/", k.name())).collect();
        if self.folders == 0 {
            let (last, rest) = folders.split_last().map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
            notices.push(Notice(format!(
                "{} has no {} or {last} folder: nothing to read",
                data.display(),
                rest.join(", ")
            )));
        }
        for name in &self.ignored {
            notices.push(Notice(format!("ignoring {name}: not a record file (.csv, .csv.gz, .csv.zst, .parquet)")));
        }
        for name in &self.not_regular {
            notices.push(Notice(format!(
                "ignoring {name}: not a regular file (a FIFO, socket or device); record files must be regular files"
            )));
        }
        for name in &self.unknown {
            notices.push(Notice(format!(
                "ignoring {name}: not part of a data directory ({}, {}, {}/)",
                folders.join(", "),
                LAYOUT[..3].join(", "),
                LAYOUT[3]
            )));
        }
        notices
    }
}

/// The entries at the top of `data` that are neither record folders nor
/// in [`LAYOUT`] (hidden ones and `README*` files aside), sorted; a
/// folder's name ends in `/`.
fn unknown_entries(data: &Path) -> Result<Vec<String>> {
    let mut top = Vec::new();
    for entry in std::fs::read_dir(data).map_err(|e| Error::io(data, e))? {
        let entry = entry.map_err(|e| Error::io(data, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = std::fs::metadata(entry.path()).map(|m| m.is_dir()).unwrap_or(false);
        top.push(TopEntry { name, is_dir });
    }
    Ok(unknown_of(top))
}

/// The entries of `top` that [`unknown_entries`] names, sorted.
fn unknown_of(top: impl IntoIterator<Item = TopEntry>) -> Vec<String> {
    let mut unknown: Vec<String> = top
        .into_iter()
        .filter(|TopEntry { name, .. }| {
            let known = LAYOUT.contains(&name.as_str()) || Kind::FOLDERS.iter().any(|k| k.name() == name);
            !known && !name.starts_with('.') && !name.to_ascii_uppercase().starts_with("README")
        })
        .map(|TopEntry { name, is_dir }| if is_dir { format!("{name}/") } else { name })
        .collect();
    unknown.sort();
    unknown
}

/// Every regular file below `folder`, recursively, skipping hidden folders.
pub fn walk(folder: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    walk_entries(folder, out, &mut Vec::new())
}

/// [`walk`], and every other entry that is not a folder (a FIFO, a
/// socket, a device) in `not_regular`, hidden ones aside.
fn walk_entries(folder: &Path, out: &mut Vec<PathBuf>, not_regular: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(folder, e))?;
        let path = entry.path();
        let file_type = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.file_type();
        if file_type.is_dir() {
            if !entry.file_name().to_string_lossy().starts_with('.') {
                walk_entries(&path, out, not_regular)?;
            }
        } else if file_type.is_file() {
            out.push(path);
        } else if !entry.file_name().to_string_lossy().starts_with('.') {
            not_regular.push(path);
        }
    }
    Ok(())
}
