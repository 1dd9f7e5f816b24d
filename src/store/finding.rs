//! What `store verify` finds wrong with a file, and what `store repair`
//! rebuilds from: a file the manifest lists that is missing, unreadable or
//! not its recorded sum. Its own module so that verify and rebuild both
//! use it without importing each other.

use super::FileSum;

/// What is wrong with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The manifest lists it; it is not there.
    Missing,
    /// It cannot be read (the operating system's reason).
    Unreadable(String),
    /// Its length or hash differs from its sum.
    Damaged {
        /// The sum the manifest records.
        expected: FileSum,
        /// The sum of the bytes found.
        found: FileSum,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing => f.write_str("missing"),
            Problem::Unreadable(why) => write!(f, "unreadable ({why})"),
            Problem::Damaged { expected, found } => write!(f, "damaged (expected {expected}, found {found})"),
        }
    }
}

/// One file that does not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the store.
    pub name: String,
    /// What is wrong.
    pub problem: Problem,
}
