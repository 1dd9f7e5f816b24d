//! The library's errors, grouped by who must act.
//!
//! - [`Error::BadRequest`]: the caller asked for something the API refuses
//!   (a 400); the message names the parameter, the value and what is allowed.
//! - [`Error::BadRecord`] and [`Error::Conflict`]: the data breaks the
//!   records contract; the message names file, line (or row), column, value.
//! - [`Error::Io`]: a file could not be read or written.
//! - [`Error::Internal`]: a fault of ours (an overflow, a broken invariant).

use std::borrow::Cow;
use std::fmt;
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
    /// A 400 for `parameter` with `message`.
    pub fn new(parameter: impl Into<String>, message: impl Into<String>) -> BadRequest {
        BadRequest { parameter: parameter.into(), message: message.into() }
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
    /// A row that breaks the contract.
    #[error(transparent)]
    BadRecord(#[from] Box<BadRecord>),
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
    /// A file that cannot be read or written, or is not what it claims.
    #[error("{path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A fault of ours, or a limit of the engine.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, error: impl fmt::Display) -> Error {
        Error::Io { path: path.into(), message: error.to_string() }
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
}
