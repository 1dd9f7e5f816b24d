//! The analyst's path of docs/analysts.md: the two examples in
//! `tools/analyst/` (spend per country and currency in a month, across all
//! accounts) read the store's Parquet with DuckDB and with polars, pinned
//! (`tools/analyst/requirements.txt`), and their answers are held against
//! the usage rows `report --store` writes for the same month.
//!
//! The store has two generations, several records files per kind, and a
//! records file no manifest lists (an ingest that did not publish): the
//! examples must read only the published generation.
//!
//! The packages are found in `.venv-analyst` at the repository root
//! (`.ci/run` installs them). Without them the test says it is skipped,
//! except under `CI=true`, where missing packages are a failure.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common;

/// Nano-units of a decimal text ("0.245", "0.245000000", "3").
fn nanos(text: &str) -> i128 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    assert!(fraction.len() <= 9, "{text}: more than 9 decimals");
    let digits = format!("{whole}{fraction:0<9}");
    digits.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

type Spend = BTreeMap<(String, String), i128>;

/// What an example printed: (country, currency) -> spend.
fn example(python: &Path, script: &str, store: &Path, month: &str) -> Spend {
    let out = Command::new(python)
        .arg(common::root().join("tools/analyst").join(script))
        .args([store.to_str().expect("UTF-8"), month])
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("country,currency,spend"), "{script}: {stdout}");
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), 3, "{script}: {line}");
            ((fields[0].to_owned(), fields[1].to_owned()), nanos(fields[2]))
        })
        .collect()
}

/// The same sums from `report --store`'s usage.csv files: total_amount of
/// every row with a country, by country and the file's currency column.
fn from_report(store: &Path, out: &Path, month_query: &str) -> Spend {
    let s = |p: &Path| p.to_str().expect("UTF-8").to_owned();
    common::telemeter(&[
        "report",
        "--quiet",
        "--store",
        &s(store),
        "--out",
        &s(out),
        "--formats",
        "csv",
        "--query",
        month_query,
        "--now",
        "2026-12-02T00:00:00Z",
    ])
    .ok();
    let mut spend = Spend::new();
    for account in std::fs::read_dir(out).expect("report folder").flatten() {
        let usage = account.path().join("usage.csv");
        let Ok(mut reader) = csv::Reader::from_path(&usage) else { continue };
        let header = reader.headers().expect("a header").clone();
        let at = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name}"));
        let (country, currency, amount) = (at("country"), at("currency"), at("total_amount"));
        for row in reader.records() {
            let fields = row.expect("a usage.csv row");
            if !fields[country].is_empty() {
                let key = (fields[country].to_owned(), fields[currency].to_owned());
                *spend.entry(key).or_default() += nanos(&fields[amount]);
            }
        }
    }
    spend
}

#[test]
fn duckdb_and_polars_examples_give_the_reports_spend_per_country() {
    let Some(python) = common::venv_python("analyst", "duckdb, polars", "tools/analyst/requirements.txt") else {
        return;
    };
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let s = |p: &Path| p.to_str().expect("UTF-8").to_owned();
    common::telemeter(&["ingest", "--quiet", "--data", &s(&common::sample_data()), "--store", &s(&store)]).ok();
    // A second generation: a late call of the second (EUR) account in a
    // country of its own, and one on the first day of the next month.
    let late = dir.path().join("late");
    common::write(
        &late,
        "calls/late.csv",
        format!(
            "{}\
             late-1,MA002PCHQ444XLFXQN5B,,2026-11-30T23:59:59.999999999Z,voice,pstn,outbound,JP,60,0.123456789,0.001,4000\n\
             late-2,MA002PCHQ444XLFXQN5B,,2026-12-01T00:00:00Z,voice,pstn,outbound,JP,60,7,0.001,4000\n",
            common::CALLS_HEADER
        ),
    );
    common::write(&late, "accounts.csv", std::fs::read(common::sample_data().join("accounts.csv")).expect("accounts"));
    common::telemeter(&["ingest", "--quiet", "--data", &s(&late), "--store", &s(&store)]).ok();
    // A correcting delivery: revisions and a void, whose stored older
    // versions stop counting (the corrections file names them).
    common::telemeter(&[
        "ingest",
        "--quiet",
        "--data",
        &s(&common::root().join("sample_corrections")),
        "--store",
        &s(&store),
    ])
    .ok();
    // An unpublished ingest's records file: the same calls again, under a
    // name no manifest lists.
    let calls = store.join("records/calls");
    let published = std::fs::read_dir(&calls).expect("records").flatten().next().expect("a calls file").path();
    std::fs::copy(&published, calls.join("29991231T000000000Z-1-00000.parquet")).expect("orphan");

    let expected = from_report(&store, &dir.path().join("report"), "from_date=2026-11-01&to_date=2026-12-01");
    assert!(expected.len() > 3, "{expected:?}");
    assert!(expected.keys().any(|(_, currency)| currency == "EUR"), "{expected:?}");
    assert_eq!(expected.get(&("JP".to_owned(), "EUR".to_owned())), Some(&123_456_789));
    for script in ["spend_per_country_duckdb.py", "spend_per_country_polars.py"] {
        assert_eq!(example(&python, script, &store, "2026-11"), expected, "{script}");
    }
}
