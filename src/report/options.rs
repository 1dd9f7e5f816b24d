//! What `telemeter report` is asked to do: the request ([`ReportRequest`]),
//! which files each account gets ([`Formats`]) and how its pages are laid
//! out ([`PageFiles`]), and the progress events a
//! run reports ([`Progress`]). The run (`report`) and the HTML writer
//! (`report::html`) both read these; neither imports the other for them.

use crate::summary::BatchRequest;

/// What to report: the parameters asked of every account, and what the
/// run records and writes besides.
#[derive(Clone, Debug)]
pub struct ReportRequest<'a> {
    /// The parameters, the accounts, "now" and how to treat bad rows: what
    /// [`build_many`](crate::summary::build_many) answers.
    pub batch: BatchRequest<'a>,
    /// The query string as given (recorded in the manifest and the pages).
    pub query: &'a str,
    /// Whether `now` was given explicitly (only then is it recorded: the
    /// resolved windows are recorded either way).
    pub now_given: bool,
    /// Which files each account gets.
    pub formats: Formats,
    /// How the JSON pages are laid out: a file per page, or one
    /// `pages.jsonl` per account.
    pub pages: PageFiles,
    /// For a report of a store: the generation of the previous report,
    /// after which the manifest lists each account's changed months.
    pub changes_since: Option<u64>,
}

/// How an account's JSON pages are written: `page-0001.json`, ... (the
/// default), or every page as one line of `pages.jsonl` (one file per
/// account however many pages: the bytes of `summary --all-pages`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageFiles {
    /// One file per page.
    #[default]
    Files,
    /// One `pages.jsonl` per account, one page per line.
    Jsonl,
}

impl PageFiles {
    /// The name of the one file of [`PageFiles::Jsonl`].
    pub const JSONL_FILE: &'static str = "pages.jsonl";

    /// The name `--pages` takes.
    pub fn name(self) -> &'static str {
        match self {
            PageFiles::Files => "files",
            PageFiles::Jsonl => "jsonl",
        }
    }
}

/// Which files each account's folder gets: the JSON pages, `usage.csv` and
/// `other_charges.csv`, `report.html`. `index.html` and `manifest.json`
/// are always written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Formats {
    /// `page-0001.json`, ...
    pub json: bool,
    /// `usage.csv` and `other_charges.csv`.
    pub csv: bool,
    /// `report.html`.
    pub html: bool,
}

impl Formats {
    /// Every file (the default).
    pub const ALL: Formats = Formats { json: true, csv: true, html: true };

    /// `json,csv,html` or any non-empty subset, in any order.
    pub fn parse(text: &str) -> std::result::Result<Formats, String> {
        let mut formats = Formats { json: false, csv: false, html: false };
        for name in text.split(',') {
            match name.trim() {
                "json" => formats.json = true,
                "csv" => formats.csv = true,
                "html" => formats.html = true,
                _ => {
                    return Err(format!(
                        "invalid --formats '{text}': expected a comma-separated list of json, csv and html"
                    ))
                }
            }
        }
        Ok(formats)
    }

    /// The names of the formats written, in the order json, csv, html.
    pub fn names(self) -> Vec<&'static str> {
        [(self.json, "json"), (self.csv, "csv"), (self.html, "html")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect()
    }
}

impl Default for Formats {
    fn default() -> Formats {
        Formats::ALL
    }
}

/// A step of the run, for progress display.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    /// The pass over the data starts: this many files and bytes.
    Reading {
        /// Record files.
        files: usize,
        /// Their total size.
        bytes: u64,
    },
    /// Input bytes read so far during the pass.
    Read {
        /// Bytes of files fully read.
        bytes: u64,
    },
    /// The pass is done; writing this many accounts starts.
    Writing {
        /// Rows read.
        rows_read: u64,
        /// Accounts to write.
        accounts: usize,
    },
    /// One more account written.
    AccountDone {
        /// Accounts written so far.
        done: usize,
        /// Accounts in all.
        total: usize,
    },
}
