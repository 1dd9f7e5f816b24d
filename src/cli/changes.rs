//! `telemeter changes`: what moved in a store's accounts since a
//! generation or a report (`store::changes`), per account, month (in the
//! account's zone) and product; a table, CSV or JSON lines.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::store::changes::{self, Ledger, CSV_HEADER};
use crate::store::Store;

/// Arguments of `changes`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["since", "since_report"])))]
pub struct Args {
    /// The store folder.
    #[arg(long, value_name = "STORE")]
    pub store: PathBuf,
    /// Sum the changes of the ingests after this generation (0: every
    /// ingest).
    #[arg(long, value_name = "GENERATION")]
    pub since: Option<u64>,
    /// Sum the changes of the ingests after the generation a report was
    /// built from (its `manifest.json`).
    #[arg(long, value_name = "MANIFEST")]
    pub since_report: Option<PathBuf>,
    /// Only this account.
    #[arg(long, value_name = "ID")]
    pub account: Option<String>,
    /// Output: an aligned table, CSV (`auth_id,month,product`, the counts
    /// and the sums),
    /// or one JSON object a row (record counts as numbers, units and sums
    /// as exact decimal text).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// How `changes` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns, for a terminal.
    Table,
    /// `auth_id,month,product,records_added,...`, a row per line.
    Csv,
    /// One JSON object a row, the CSV's columns as keys.
    Jsonl,
}

/// Runs `changes`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = Store::open(&args.store).with_context(|| format!("cannot open the store {}", args.store.display()))?;
    let since = match (&args.since_report, args.since) {
        (Some(manifest), _) => changes::report_generation(manifest, &store.manifest)?,
        (None, since) => since.unwrap_or(0),
    };
    let ledger = changes::since(&store, since, args.account.as_deref())
        .with_context(|| format!("cannot sum the changes since generation {since}"))?;
    // An id no one knows (a typo) is said, not answered with an empty ledger alone.
    if let Some(account) = &args.account {
        let known = store.manifest.rollups.contains_key(account) || store.accounts()?.get(account).is_some();
        if !known {
            super::warn(&format!(
                "account {} is not in the store's accounts.csv and has no records there",
                crate::error::printable(account)
            ));
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.format {
        Format::Table => table(&mut out, &ledger, since, store.manifest.generation)?,
        Format::Csv => {
            let mut writer = csv::Writer::from_writer(&mut out);
            writer.write_record(CSV_HEADER)?;
            for (key, change) in &ledger {
                writer.write_record(changes::row(key, change))?;
            }
            writer.flush()?;
        }
        Format::Jsonl => {
            for (key, change) in &ledger {
                // Record counts as numbers; units and the sums as exact
                // decimal text, as in the CSV.
                let object: serde_json::Map<String, serde_json::Value> = CSV_HEADER
                    .iter()
                    .zip(changes::row(key, change))
                    .map(|(name, value)| {
                        let value = match name.starts_with("records_") {
                            true => value.parse::<u64>().map_or(value.clone().into(), serde_json::Value::from),
                            false => value.into(),
                        };
                        ((*name).to_owned(), value)
                    })
                    .collect();
                serde_json::to_writer(&mut out, &object)?;
                writeln!(out)?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn table(out: &mut impl Write, ledger: &Ledger, since: u64, now: u64) -> std::io::Result<()> {
    let plural = if ledger.len() == 1 { "" } else { "s" };
    writeln!(out, "changes after generation {since}, up to generation {now}: {} row{plural}", ledger.len())?;
    if ledger.is_empty() {
        return Ok(());
    }
    let rows: Vec<[String; 10]> = ledger.iter().map(|(key, change)| changes::row(key, change)).collect();
    let widths: Vec<usize> = (0..CSV_HEADER.len())
        .map(|i| rows.iter().map(|row| row[i].len()).chain([CSV_HEADER[i].len()]).max().unwrap_or(0))
        .collect();
    // Text left, numbers right.
    let line = |cells: &[&str]| -> String {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            match i < 3 {
                true => text.push_str(&format!("{cell:<width$}")),
                false => text.push_str(&format!("{cell:>width$}")),
            }
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{}", line(&CSV_HEADER))?;
    for row in &rows {
        let shown: Vec<String> = row.iter().map(|cell| crate::error::printable(cell).into_owned()).collect();
        let cells: Vec<&str> = shown.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}
