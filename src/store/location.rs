//! Where `--data` and `--store` point: a local path, a `file://` URI (the
//! same path), or a URI of another filesystem (`s3a://`, `hdfs://`, ...),
//! which only the Spark job reads, through Hadoop's `FileSystem`.
//!
//! URIs are taken as Hadoop takes them: the text after the scheme is the
//! path as written (no percent-decoding).

use std::ffi::OsStr;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// A data directory: here, or at a URI the Spark job reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataLocation {
    /// A path on this machine (a `file://` URI given to a command that
    /// reads it here is turned into its path).
    Local(PathBuf),
    /// `scheme://...`, handed to Spark as written.
    Uri(Uri),
}

/// A URI with its scheme (`s3a`, `hdfs`, `file`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uri {
    /// The whole URI, as given.
    pub text: String,
    /// Its scheme, lower-case.
    pub scheme: String,
}

impl Uri {
    /// `text` when it starts with `scheme://` (RFC 3986 scheme characters),
    /// else `None`.
    pub fn parse(text: &OsStr) -> Option<Uri> {
        let text = text.to_str()?;
        let (scheme, _) = text.split_once("://")?;
        let mut chars = scheme.chars();
        let first = chars.next()?;
        let valid = first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        valid.then(|| Uri { text: text.to_owned(), scheme: scheme.to_ascii_lowercase() })
    }

    /// The local path of a `file://` URI (`file:///p`, `file://localhost/p`),
    /// or `None` for any other scheme. A `file://` URI naming another host
    /// is an error.
    pub fn file_path(&self) -> Result<Option<PathBuf>> {
        if self.scheme != "file" {
            return Ok(None);
        }
        let rest = &self.text["file://".len()..];
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        if !path.starts_with('/') {
            return Err(Error::Usage(format!(
                "'{}' names a file on another host; a file:// URI is file:///absolute/path",
                self.text
            )));
        }
        Ok(Some(PathBuf::from(path)))
    }
}

impl DataLocation {
    /// `--data` of `ingest --engine spark`: any URI stays a URI (`file://`
    /// too: Spark reads it, on every executor, through Hadoop).
    pub fn for_spark(text: &OsStr) -> DataLocation {
        match Uri::parse(text) {
            Some(uri) => DataLocation::Uri(uri),
            None => DataLocation::Local(PathBuf::from(text)),
        }
    }
}

/// `--data` of a command that reads the data directory itself (`summary`,
/// `report`, `serve`, the local `ingest`): a path, or a `file://` URI;
/// another scheme is an error that says which command reads it.
pub fn local_data(text: &OsStr) -> Result<PathBuf> {
    local_path(text, |uri| {
        Error::Usage(format!(
            "'{}' is a {}:// location: this command reads a directory on this machine (a path or a \
                 file:// URI); data on another filesystem is read by Spark: `telemeter ingest --engine spark \
                 --data {} --store STORE`, then answer from the store (docs/guide.md, 'Running on Spark')",
            uri.text, uri.scheme, uri.text
        ))
    })
}

/// `--store` of every command: a path, or a `file://` URI. A store on
/// another filesystem is refused: its one commit point is an atomic rename
/// of `manifest.json` over the previous one, and readers open its files
/// directly, which object stores (no atomic rename) and HDFS (not a local
/// filesystem) cannot give without a mount (docs/scale.md).
pub fn store_path(text: &OsStr) -> Result<PathBuf> {
    local_path(text, |uri| {
        Error::Usage(format!(
            "'{}' is a {}:// location: a store is a directory on this machine (a path or a file:// URI). \
                 Its one commit point is an atomic rename of manifest.json, and summary, report and serve \
                 read its files directly; {} gives neither here. Put the store on a POSIX filesystem mounted at \
                 the same path here and on Spark's driver and executors (such as NFS; an object store's FUSE \
                 mount has no atomic rename, and HDFS mounts need checking): the data may stay at a {}:// URI \
                 (docs/scale.md, 'Data and store on a cluster')",
            uri.text, uri.scheme, uri.scheme, uri.scheme
        ))
    })
}

/// `text` as a path on this machine: a path, or a `file://` URI's path;
/// a URI of another scheme is the error `refused` makes of it.
fn local_path(text: &OsStr, refused: impl FnOnce(&Uri) -> Error) -> Result<PathBuf> {
    match Uri::parse(text) {
        None => Ok(PathBuf::from(text)),
        Some(uri) => uri.file_path()?.ok_or_else(|| refused(&uri)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(text: &str) -> &OsStr {
        OsStr::new(text)
    }

    #[test]
    fn uris_are_told_from_paths() {
        let uri = Uri::parse(os("s3a://bucket/data")).expect("a URI");
        assert_eq!((uri.scheme.as_str(), uri.text.as_str()), ("s3a", "s3a://bucket/data"));
        assert_eq!(Uri::parse(os("HDFS://nn:8020/d")).map(|u| u.scheme), Some("hdfs".to_owned()));
        for path in ["/tmp/data", "data", "./a://b", "1x://y", "://y", "my dir://x"] {
            assert_eq!(Uri::parse(os(path)), None, "{path}");
        }
    }

    #[test]
    fn file_uris_are_their_paths_and_other_schemes_are_refused_with_the_reason() {
        for (text, path) in [("file:///tmp/s", "/tmp/s"), ("file://localhost/tmp/s", "/tmp/s"), ("/tmp/s", "/tmp/s")] {
            assert_eq!(store_path(os(text)).expect(text), PathBuf::from(path));
            assert_eq!(local_data(os(text)).expect(text), PathBuf::from(path));
        }
        let error = store_path(os("s3a://bucket/store")).expect_err("s3a store").to_string();
        assert!(error.contains("s3a:// location") && error.contains("atomic rename"), "{error}");
        let error = local_data(os("hdfs://nn/data")).expect_err("hdfs data").to_string();
        assert!(error.contains("hdfs:// location") && error.contains("--engine spark"), "{error}");
        let error = store_path(os("file://otherhost/tmp/s")).expect_err("remote file URI").to_string();
        assert!(error.contains("another host"), "{error}");
        assert_eq!(
            DataLocation::for_spark(os("file:///tmp/d")),
            DataLocation::Uri(Uri { text: "file:///tmp/d".into(), scheme: "file".into() })
        );
        assert_eq!(DataLocation::for_spark(os("/tmp/d")), DataLocation::Local("/tmp/d".into()));
    }
}
