//! The library's errors, grouped by who must act.
//!
//! - [`Error::BadRequest`]: the caller asked for something the API refuses
//!   (a 400); the message names the parameter, the value and what is allowed.
//! - [`Error::Usage`]: a command was given a bad option or argument (not an
//!   API request: a 400 has its own variant); the caller fixes the call.
//! - [`Error::BadRecord`], [`Error::BadFile`] and [`Error::Conflict`]: the
//!   data breaks the records contract (one row; a file as a whole, such as
//!   its header; two rows with one id); whoever produced the data must act.
//!   The message names file, line (or row), column, value where there is one.
//! - [`Error::Limit`]: the input is past a capacity limit of the engine (a
//!   store's file count, a column's range); the operator must act (split
//!   the input, start a new store).
//! - [`Error::Changed`]: the input changed while it was being read; running
//!   again is the remedy.
//! - [`Error::Io`]: a file could not be read or written (or is not what it
//!   claims); the operating system's error is kept as the source.
//! - [`Error::External`]: a program or service telemeter runs on failed
//!   (the Spark job, the OS random source); its own log says why.
//! - [`Error::Internal`]: a broken invariant: a bug in telemeter.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// A place in an input file: a CSV line (1-based, the header is line 1) or
/// a Parquet row (1-based).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The file, relative to the data directory where there is one.
    pub file: String,
    /// The line or row number.
    pub line: u64,
    /// Whether `line` counts Parquet rows rather than CSV lines.
    pub is_row: bool,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = printable(&self.file);
        if self.is_row {
            write!(f, "{file}: row {}", self.line)
        } else {
            write!(f, "{file}:{}", self.line)
        }
    }
}

/// `text` with every control character escaped (`\t`, `\r`, `\n`, else
/// `\u{..}`), for messages and `rejected.csv`: a value read from input is
/// shown, never echoed raw. Escaping twice changes nothing.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Something surprising about a run that is not an error (an account no
/// one knows, a query key that is not a parameter, a window with no data,
/// a file that is not a record file): the commands say it on stderr
/// (`warning: ...`, silenced by `--quiet`); it never changes an output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", printable(.0))]
pub struct Notice(pub String);

/// A request the API answers with 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadRequest {
    /// The query parameter at fault.
    pub parameter: String,
    /// The full message: parameter, value and what is allowed.
    pub message: String,
}

impl BadRequest {
    /// A 400 for `parameter` with `message`, its control characters
    /// escaped ([`printable`]): messages quote request values, which a
    /// terminal must not take for commands.
    pub fn new(parameter: impl Into<String>, message: impl Into<String>) -> BadRequest {
        let message = message.into();
        let message = match printable(&message) {
            std::borrow::Cow::Borrowed(_) => message,
            std::borrow::Cow::Owned(escaped) => escaped,
        };
        BadRequest { parameter: parameter.into(), message }
    }
}

/// A row that breaks the records contract. Its message shows the column,
/// value and reason with control characters escaped ([`printable`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: column '{}': '{}' {}", printable(.column), printable(.value), printable(.reason))]
pub struct BadRecord {
    /// Where the row is.
    pub location: Location,
    /// The offending column (or `-` for the row as a whole).
    pub column: String,
    /// The offending value, as read.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request the API refuses (HTTP 400, exit code 2).
    #[error(transparent)]
    BadRequest(#[from] BadRequest),
    /// A bad option or argument given to a command (say, an ingest id that
    /// is not a plain name): the message names the option, the value and
    /// what is allowed.
    #[error("{0}")]
    Usage(String),
    /// A row that breaks the contract.
    #[error(transparent)]
    BadRecord(#[from] Box<BadRecord>),
    /// A file that breaks the contract as a whole, where no one row and
    /// value is at fault: a header without a required column, a column of
    /// the wrong type, two rows of one account that disagree.
    #[error("{path}: {message}")]
    BadFile {
        /// The file, as named in messages.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Two rows with one `record_id` and different content.
    #[error("conflicting duplicate {kind} record_id '{record_id}': {first} and {second} differ")]
    Conflict {
        /// The record kind (`calls`, `messages`, ...).
        kind: &'static str,
        /// The shared id.
        record_id: String,
        /// The first place, in file order.
        first: Location,
        /// The other place.
        second: Location,
    },
    /// Input past a capacity limit of the engine (input files of a store,
    /// the range of a stored column); the message says which and by how much.
    #[error("{0}")]
    Limit(String),
    /// The input changed while it was being read (files added, removed or
    /// resized): nothing is wrong with it, run again.
    #[error("{0}")]
    Changed(String),
    /// A file or folder that cannot be read or written, or is not what it
    /// claims. It prints as the path; the cause is the [`source`](std::error::Error::source)
    /// (printed after it by a chain printer: `{:#}` of `anyhow`, or [`Error::chain`]).
    #[error("{path}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong: the operating system's error, or one of
        /// [`io::ErrorKind::Other`] with our message.
        #[source]
        source: io::Error,
    },
    /// A program or service telemeter runs on failed: the Spark job, the
    /// operating system's random source. Nothing is wrong with the input
    /// or with telemeter; the message says what failed and where its log is.
    #[error("{0}")]
    External(String),
    /// A broken invariant (a sum that cannot overflow did, counts that must
    /// reconcile do not): a bug in telemeter, never the input's fault.
    #[error("internal error: {0} (this is a bug in telemeter)")]
    Internal(String),
}

impl Error {
    /// An I/O error on `path`: an [`io::Error`] is kept as it is (with its
    /// kind); any other error or message becomes one of kind
    /// [`io::ErrorKind::Other`] that prints as it did.
    pub fn io(path: impl Into<PathBuf>, error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        let source = match error.into().downcast::<io::Error>() {
            Ok(error) => *error,
            Err(other) => io::Error::other(other),
        };
        Error::Io { path: path.into(), source }
    }

    /// A file that changed while it was read (truncated, grown or
    /// rewritten): `what` says how. The one message of every reader that
    /// reads a file whole or streams it.
    pub fn changed_while_read(path: impl Into<PathBuf>, what: impl std::fmt::Display) -> Error {
        Error::io(
            path,
            format!("changed while being read ({what}): read it again once the file is complete and no longer written"),
        )
    }

    /// A file that breaks the contract as a whole ([`Error::BadFile`]).
    pub fn bad_file(path: impl Into<PathBuf>, message: impl Into<String>) -> Error {
        Error::BadFile { path: path.into(), message: message.into() }
    }

    /// The message with its causes, joined by `: ` as `anyhow` prints
    /// `{:#}`: the whole text, for a log line or a test that has no chain
    /// printer.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}

impl From<BadRecord> for Error {
    fn from(error: BadRecord) -> Error {
        Error::BadRecord(Box::new(error))
    }
}

/// The library's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(printable("plain 'é' text"), Cow::Borrowed(_)));
        let escaped = printable("a\u{7}b\r\n\t\u{1b}[31m\u{7f}\u{9b}");
        assert_eq!(escaped, "a\\u{7}b\\r\\n\\t\\u{1b}[31m\\u{7f}\\u{9b}");
        assert_eq!(printable(&escaped), escaped);
    }

    #[test]
    fn control_characters_are_escaped_in_messages() {
        let bad = BadRecord {
            location: Location { file: "calls/a.csv".to_owned(), line: 3, is_row: false },
            column: "hangup_cause".to_owned(),
            value: "40\u{0}0\u{85}\t\r\n\u{e9}".to_owned(),
            reason: "contains a control character".to_owned(),
        };
        assert_eq!(
            bad.to_string(),
            "calls/a.csv:3: column 'hangup_cause': '40\\u{0}0\\u{85}\\t\\r\\n\u{e9}' contains a control character"
        );
    }

    #[test]
    fn io_keeps_the_operating_system_error_as_its_source() {
        let missing = std::fs::read("/nonexistent/telemeter/file").unwrap_err();
        let error = Error::io("/nonexistent/telemeter/file", missing);
        let source = std::error::Error::source(&error).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(source.map(io::Error::kind), Some(io::ErrorKind::NotFound));
        assert_eq!(error.to_string(), "/nonexistent/telemeter/file");
        assert!(error.chain().starts_with("/nonexistent/telemeter/file: No such file"), "{}", error.chain());
    }

    #[test]
    fn io_with_a_message_prints_as_before() {
        let error = Error::io("data", "not a directory");
        assert_eq!(error.chain(), "data: not a directory");
        let source = std::error::Error::source(&error).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(source.map(io::Error::kind), Some(io::ErrorKind::Other));
        assert_eq!(
            Error::bad_file("x.csv", "missing required column 'a'").chain(),
            "x.csv: missing required column 'a'"
        );
    }

    #[test]
    fn internal_says_it_is_a_bug_and_the_rest_do_not() {
        assert!(Error::Internal("sum overflow".into()).to_string().contains("bug in telemeter"));
        for error in [Error::Limit("a store holds at most 3 input files".into()), Error::Usage("bad id".into())] {
            assert!(!error.to_string().contains("internal"), "{error}");
        }
    }
}
