//! `telemeter history`: the stored versions of one record of a store,
//! where each came from and which one counts (`store::history`), as an
//! aligned listing or one JSON object a version.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::records::Kind;
use crate::store::history::{self, Version};
use crate::store::Store;

/// Arguments of `history`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The store folder.
    #[arg(long, value_name = "STORE")]
    pub store: PathBuf,
    /// The record's kind: calls, messages, transcriptions or charges.
    #[arg(long, value_parser = parse_kind)]
    pub kind: Kind,
    /// The record's `record_id`.
    #[arg(long, value_name = "ID")]
    pub record_id: String,
    /// Output: an aligned listing, or one JSON object a version.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// How `history` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Each version's source and columns, aligned, for a terminal.
    Table,
    /// One JSON object a version: `ingest`, `source_file`, `source_line`,
    /// `revision`, `void`, `counts` and `record` (the columns as text).
    Jsonl,
}

fn parse_kind(name: &str) -> Result<Kind, String> {
    Kind::of_name(name).ok_or_else(|| format!("not a record kind: {name:?} (calls, messages, transcriptions, charges)"))
}

/// Runs `history`: exit 0 when the store holds the record, 1 when it
/// holds no version of it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = Store::open(&args.store).with_context(|| format!("cannot open the store {}", args.store.display()))?;
    let versions = history::history(&store, args.kind, &args.record_id)
        .with_context(|| format!("cannot read the history of {} {}", args.kind.name(), args.record_id))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format {
        Format::Table => table(&mut out, &args, store.manifest.generation, &versions)?,
        Format::Jsonl => {
            for version in &versions {
                serde_json::to_writer(&mut out, &json(version))?;
                writeln!(out)?;
            }
        }
    }
    out.flush()?;
    if versions.is_empty() {
        eprintln!(
            "{} record {}: not in the store (generation {})",
            args.kind.name(),
            args.record_id,
            store.manifest.generation
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn table(out: &mut impl Write, args: &Args, generation: u64, versions: &[Version]) -> std::io::Result<()> {
    if versions.is_empty() {
        return Ok(());
    }
    let plural = if versions.len() == 1 { "" } else { "s" };
    writeln!(
        out,
        "{} record {} in generation {generation}: {} stored version{plural}",
        args.kind.name(),
        args.record_id,
        versions.len()
    )?;
    for (n, version) in versions.iter().enumerate() {
        let counts = if version.counts { "counts" } else { "does not count" };
        let what = if version.void { "void" } else { "version" };
        writeln!(
            out,
            "\n{what} {} (revision {}, {counts}): ingest {}, from {} line {}",
            n + 1,
            version.revision,
            version.ingest,
            version.source,
            version.line
        )?;
        let width = version.fields.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, value) in &version.fields {
            let line = format!("  {name:width$}  {}", crate::error::printable(value));
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

fn json(version: &Version) -> serde_json::Value {
    let record: serde_json::Map<String, serde_json::Value> =
        version.fields.iter().map(|(name, value)| ((*name).to_owned(), value.clone().into())).collect();
    serde_json::json!({
        "ingest": version.ingest,
        "source_file": version.source,
        "source_line": version.line,
        "revision": version.revision,
        "void": version.void,
        "counts": version.counts,
        "record": record,
    })
}
