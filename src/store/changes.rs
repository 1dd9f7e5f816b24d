//! The store's ledger of changes: what each ingest changed in each
//! account's months (`corrections.md`, "Restatements"), and `telemeter
//! changes`, their sum over the ingests after a generation.
//!
//! The steps:
//!
//! - at publish, each account's merge (`ingest/merge.rs`) sums the rows of
//!   this ingest (its groups in memory and its partial files, never the
//!   published rollups it merges them with) by month in the account's
//!   time zone and product: a [`Ledger`] (`DayMonths` finds a slot's
//!   month, one zone lookup a day);
//! - the ingest writes the ledger as `changes/<ingest>.csv` ([`to_csv`]),
//!   listed in its [`IngestLog`] with the generation it published, and
//!   summed like every store file;
//! - [`since`] reads the ledgers of the ingests after a generation, each
//!   checked against its sum, and adds them up.
//!
//! A late record counts as added in its month, like any new record.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{Datelike, TimeZone};
use chrono_tz::Tz;

use super::{IngestLog, Manifest, Store};
use crate::aggregate::Totals;
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::Product;

/// A month of an account's time zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    /// The year.
    pub year: i32,
    /// 1 to 12.
    pub month: u32,
}

impl std::fmt::Display for Month {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

impl Month {
    /// The month of `YYYY-MM`.
    fn parse(text: &str) -> Option<Month> {
        let (year, month) = text.split_once('-')?;
        let (year, month) = (year.parse().ok()?, month.parse().ok()?);
        (1..=12).contains(&month).then_some(Month { year, month })
    }
}

/// One account's month and product: where a change is booked.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChangeKey {
    /// The parent account.
    pub auth_id: String,
    /// The month in the account's time zone.
    pub month: Month,
    /// The product (`other` for charges).
    pub product: Product,
}

/// The change an ingest made to one account's month and product: the
/// records it added, restated and withdrew, and the exact deltas of their
/// sums (negative where they fell).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Records new to the store.
    pub records_added: u64,
    /// Records whose stored version a later revision replaced.
    pub records_restated: u64,
    /// Records a void withdrew.
    pub records_withdrawn: u64,
    /// Units.
    pub units: i128,
    /// Duration in nanoseconds.
    pub duration: i128,
    /// Amount in nano-units.
    pub amount: i128,
    /// Surcharge in nano-units.
    pub surcharge: i128,
}

impl Change {
    /// The change of records added with these sums.
    pub fn added(totals: &Totals) -> Result<Change> {
        Ok(Change {
            records_added: totals.records,
            records_restated: 0,
            records_withdrawn: 0,
            units: i128::try_from(totals.units).map_err(|_| overflow())?,
            duration: totals.duration,
            amount: totals.amount,
            surcharge: totals.surcharge,
        })
    }

    /// `self + other`, or `None` on overflow.
    pub(super) fn checked_add(&self, other: &Change) -> Option<Change> {
        Some(Change {
            records_added: self.records_added.checked_add(other.records_added)?,
            records_restated: self.records_restated.checked_add(other.records_restated)?,
            records_withdrawn: self.records_withdrawn.checked_add(other.records_withdrawn)?,
            units: self.units.checked_add(other.units)?,
            duration: self.duration.checked_add(other.duration)?,
            amount: self.amount.checked_add(other.amount)?,
            surcharge: self.surcharge.checked_add(other.surcharge)?,
        })
    }

    /// Whether any record count is not zero (a month is listed then).
    fn counts_any(&self) -> bool {
        self.records_added > 0 || self.records_restated > 0 || self.records_withdrawn > 0
    }
}

/// Changes by account, month and product, in that order.
pub type Ledger = BTreeMap<ChangeKey, Change>;

/// Adds `change` at `key`; an overflow is an error.
pub fn add(ledger: &mut Ledger, key: ChangeKey, change: &Change) -> Result<()> {
    let slot = ledger.entry(key).or_default();
    *slot = slot.checked_add(change).ok_or_else(overflow)?;
    Ok(())
}

/// A change to one account's month that the merge does not see: a
/// version that stopped counting, or a new version that replaced a stored
/// one. `finish` books it in the ledger in the account's zone.
#[derive(Clone, Debug)]
pub(in crate::store) struct Booking {
    pub(in crate::store) auth_id: String,
    pub(in crate::store) secs: i64,
    pub(in crate::store) product: Product,
    /// Records added (negative: a row of this ingest the merge counted as
    /// added, which does not count).
    pub(in crate::store) added: i64,
    pub(in crate::store) restated: u64,
    pub(in crate::store) withdrawn: u64,
    /// Sums that left the month.
    pub(in crate::store) left: Totals,
    /// For a new version that replaced a stored one: the stored one's
    /// account, time and product (its month counts the record as restated
    /// once when it is this one's).
    pub(in crate::store) replaced: Option<(String, i64, Product)>,
}

/// Books `bookings` (the changes the rollup merge does not see:
/// corrections) in `ledger`, each in its account's month in its zone of
/// `zones`; then drops the months left with no record counted.
pub(super) fn book(
    ledger: &mut Ledger,
    bookings: &[Booking],
    zones: &crate::records::accounts::Accounts,
) -> Result<()> {
    let key = |auth_id: &str, secs: i64, product: Product| -> Result<ChangeKey> {
        let zone = zones.get(auth_id).and_then(|a| a.timezone).unwrap_or(chrono_tz::UTC);
        Ok(ChangeKey { auth_id: auth_id.to_owned(), month: month_at(zone, secs)?, product })
    };
    let fell = || Error::Internal("a month's records added fell below zero".to_owned());
    for b in bookings {
        let at = key(&b.auth_id, b.secs, b.product)?;
        let same = match &b.replaced {
            Some((auth_id, secs, product)) => key(auth_id, *secs, *product)? == at,
            None => false,
        };
        let slot = ledger.entry(at).or_default();
        slot.records_added = match b.added {
            added if added >= 0 => slot.records_added.checked_add(added as u64).ok_or_else(overflow)?,
            added => slot.records_added.checked_sub(added.unsigned_abs()).ok_or_else(fell)?,
        };
        slot.records_restated += if same { 0 } else { b.restated };
        slot.records_withdrawn += b.withdrawn;
        let units = i128::try_from(b.left.units).map_err(|_| overflow())?;
        slot.units = slot.units.checked_sub(units).ok_or_else(overflow)?;
        slot.duration = slot.duration.checked_sub(b.left.duration).ok_or_else(overflow)?;
        slot.amount = slot.amount.checked_sub(b.left.amount).ok_or_else(overflow)?;
        slot.surcharge = slot.surcharge.checked_sub(b.left.surcharge).ok_or_else(overflow)?;
    }
    ledger.retain(|_, change| change.counts_any());
    Ok(())
}

/// The error of a ledger sum that does not fit.
pub(super) fn overflow() -> Error {
    Error::Internal("change ledger sum overflow".to_owned())
}

/// The month of each 15-minute slot of one UTC day in one time zone: one
/// zone lookup at each end of the day, and one a slot only on a day a
/// month ends in.
pub(super) struct DayMonths {
    zone: Tz,
    day: i64,
    /// The day's month, or each slot's on a day a month ends in.
    months: Vec<Month>,
}

impl DayMonths {
    /// For `zone`; no day yet.
    pub(super) fn new(zone: Tz) -> DayMonths {
        DayMonths { zone, day: i64::MIN, months: Vec::new() }
    }

    /// The month of the slot starting at `slot` (seconds), in the day that
    /// starts at `day` (UTC midnight, seconds).
    pub(super) fn month(&mut self, day: i64, slot: i64) -> Result<Month> {
        if day != self.day {
            let zone = self.zone;
            let (first, last) = (month_at(zone, day)?, month_at(zone, day + 86_399)?);
            self.months.clear();
            if first == last {
                self.months.push(first);
            } else {
                for i in 0..86_400 / crate::store::SLOT_SECONDS {
                    self.months.push(month_at(zone, day + i * crate::store::SLOT_SECONDS)?);
                }
            }
            self.day = day;
        }
        let index = usize::try_from((slot - day) / crate::store::SLOT_SECONDS).ok();
        let month = match self.months.as_slice() {
            [month] => Some(*month),
            months => index.and_then(|index| months.get(index).copied()),
        };
        month.ok_or_else(|| Error::Internal(format!("rollup slot {slot} is not in the day from {day}")))
    }
}

/// The month of the instant `secs` in `zone`.
fn month_at(zone: Tz, secs: i64) -> Result<Month> {
    match zone.timestamp_opt(secs, 0).single() {
        Some(local) => Ok(Month { year: local.year(), month: local.month() }),
        None => Err(Error::Internal(format!("rollup slot {secs} has no time in {}", zone.name()))),
    }
}

/// The header of a ledger file and of `changes --format csv`.
pub const CSV_HEADER: [&str; 10] = [
    "auth_id",
    "month",
    "product",
    "records_added",
    "records_restated",
    "records_withdrawn",
    "units",
    "duration_seconds",
    "amount",
    "surcharge",
];

/// One row of a ledger as text, in [`CSV_HEADER`]'s order: amounts and
/// durations exact decimals.
pub fn row(key: &ChangeKey, change: &Change) -> [String; 10] {
    [
        key.auth_id.clone(),
        key.month.to_string(),
        key.product.as_str().to_owned(),
        change.records_added.to_string(),
        change.records_restated.to_string(),
        change.records_withdrawn.to_string(),
        change.units.to_string(),
        Amount::from_nanos(change.duration).to_string(),
        Amount::from_nanos(change.amount).to_string(),
        Amount::from_nanos(change.surcharge).to_string(),
    ]
}

/// The bytes of a ledger file: [`CSV_HEADER`] and a row per account,
/// month and product, in that order.
pub fn to_csv(ledger: &Ledger) -> Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let failed = |e: csv::Error| Error::Internal(format!("writing the change ledger: {e}"));
    writer.write_record(CSV_HEADER).map_err(failed)?;
    for (key, change) in ledger {
        writer.write_record(row(key, change)).map_err(failed)?;
    }
    writer.into_inner().map_err(|e| Error::Internal(format!("writing the change ledger: {e}")))
}

/// A ledger file's rows, added into `ledger`; a row that does not read
/// back is an error naming the file and line.
fn read_into(path: &Path, bytes: &[u8], ledger: &mut Ledger) -> Result<()> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    for (n, record) in reader.records().enumerate() {
        let line = n + 2;
        let bad = |what: &str| Error::io(path, format!("line {line}: not a change ledger row: {what}"));
        let record = record.map_err(|e| bad(&e.to_string()))?;
        let field = |i: usize| record.get(i).ok_or_else(|| bad("too few fields"));
        let month = Month::parse(field(1)?).ok_or_else(|| bad("month"))?;
        let product = Product::parse(field(2)?).ok_or_else(|| bad("product"))?;
        let count = |i: usize| field(i)?.parse::<u64>().map_err(|_| bad(CSV_HEADER[i]));
        let nanos = |i: usize| signed_nanos(field(i)?).ok_or_else(|| bad(CSV_HEADER[i]));
        let change = Change {
            records_added: count(3)?,
            records_restated: count(4)?,
            records_withdrawn: count(5)?,
            units: field(6)?.parse().map_err(|_| bad("units"))?,
            duration: nanos(7)?,
            amount: nanos(8)?,
            surcharge: nanos(9)?,
        };
        add(ledger, ChangeKey { auth_id: field(0)?.to_owned(), month, product }, &change)?;
    }
    Ok(())
}

/// A signed decimal as [`Amount`]'s `Display` writes it, in nanos.
fn signed_nanos(text: &str) -> Option<i128> {
    match text.strip_prefix('-') {
        Some(magnitude) => Amount::parse_total(magnitude.as_bytes()).ok().map(|a| -a.nanos()),
        None => Amount::parse_total(text.as_bytes()).ok().map(Amount::nanos),
    }
}

/// The ingests of `manifest` that published generations after
/// `generation`, or why they cannot be told.
///
/// An ingest of an older telemeter logged no generation (and kept no
/// ledger). Such ingests all come before the first that logged one, say
/// at generation `g`, so each published a generation below `g`: they are
/// not after `generation` when `generation >= g - 1`. Otherwise they may
/// be, and summing without them would leave changes out.
fn ingests_after(manifest: &Manifest, generation: u64) -> std::result::Result<Vec<&IngestLog>, String> {
    if generation > manifest.generation {
        return Err(format!("generation {generation} is past the store's current generation {}", manifest.generation));
    }
    let first_logged = manifest.ingests.iter().find_map(|ingest| ingest.generation);
    // Nothing is after the current generation.
    let unlogged_before = generation == manifest.generation || first_logged.is_some_and(|g| generation + 1 >= g);
    let mut after = Vec::new();
    for ingest in &manifest.ingests {
        match ingest.generation {
            Some(g) if g > generation => after.push(ingest),
            Some(_) => {}
            None if unlogged_before => {}
            None => {
                return Err(format!(
                    "ingest {} was published by an older telemeter, which kept no ledger of changes: changes can \
                     be summed only from the generation before the first ingest that kept one{}",
                    ingest.id,
                    first_logged.map_or(String::new(), |g| format!(" (--since {})", g - 1))
                ));
            }
        }
    }
    Ok(after)
}

/// The sum of the changes of every ingest after `generation`, for
/// `account` only when one is given: the months where any record count
/// is not zero.
pub fn since(store: &Store, generation: u64, account: Option<&str>) -> Result<Ledger> {
    let mut ledger = Ledger::new();
    for ingest in ingests_after(&store.manifest, generation).map_err(|why| Error::io(&store.dir, why))? {
        let Some(name) = &ingest.changes else { continue };
        let listed = store.manifest.file(&store.dir, name)?;
        let path = listed.path();
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        listed.check(&bytes)?;
        read_into(&path, &bytes, &mut ledger)?;
    }
    ledger.retain(|key, change| change.counts_any() && account.is_none_or(|a| a == key.auth_id));
    Ok(ledger)
}

/// The generation of `store` a report was built from, read from its
/// `manifest.json` (`"store": {"generation": N, "ingest": ID}`). A report
/// whose ingest this store never published was made from another store:
/// its generation numbers mean nothing here.
pub fn report_generation(manifest: &Path, store: &Manifest) -> Result<u64> {
    let bytes = std::fs::read(manifest).map_err(|e| Error::io(manifest, e))?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| Error::io(manifest, format!("not a report manifest: {e}")))?;
    let entry = json.get("store");
    let generation =
        entry.and_then(|store| store.get("generation")).and_then(serde_json::Value::as_u64).ok_or_else(|| {
            Error::io(manifest, "names no store generation: it is a report of raw files, or of an older telemeter")
        })?;
    if let Some(ingest) = entry.and_then(|store| store.get("ingest")).and_then(serde_json::Value::as_str) {
        if !store.ingests.iter().any(|logged| logged.id == ingest) {
            return Err(Error::io(
                manifest,
                format!(
                    "was made from another store: its generation {generation} is that of ingest {ingest}, which \
                     this store never published"
                ),
            ));
        }
    }
    Ok(generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(id: &str, generation: Option<u64>) -> IngestLog {
        IngestLog { id: id.to_owned(), generation, ..IngestLog::default() }
    }

    /// Ingests of an older telemeter (no generation logged) come first:
    /// they are before any generation from the one before the first
    /// logged ingest on, and an error before it.
    #[test]
    fn ingests_after_a_generation_skip_older_ones_only_when_they_are_before_it() {
        // Generations 1 and 2 by an older telemeter, 3 an `accounts
        // set-token`, 4 and 6 ingests that logged theirs.
        let manifest = Manifest {
            generation: 6,
            ingests: vec![log("a", None), log("b", None), log("c", Some(4)), log("d", Some(6))],
            ..Manifest::default()
        };
        let ids = |generation: u64| {
            ingests_after(&manifest, generation).map(|after| after.iter().map(|i| i.id.as_str()).collect::<Vec<_>>())
        };
        assert_eq!(ids(3), Ok(vec!["c", "d"]));
        assert_eq!(ids(4), Ok(vec!["d"]));
        assert_eq!(ids(6), Ok(vec![]));
        for generation in [0, 2] {
            let why = ids(generation).expect_err("older ingests may be after it");
            assert!(why.starts_with("ingest a was published by an older telemeter"), "{why}");
            assert!(why.ends_with("(--since 3)"), "{why}");
        }
        assert!(ids(7).expect_err("past").contains("past the store's current generation 6"));
        // A store of older ingests only: nothing after its generation.
        let older = Manifest { generation: 2, ingests: vec![log("a", None), log("b", None)], ..Manifest::default() };
        assert_eq!(ingests_after(&older, 2), Ok(vec![]));
        assert!(ingests_after(&older, 1).is_err());
    }

    /// A slot's month in a zone: 1 November 03:30Z is October in New York
    /// (EDT), and November from 04:00Z; in UTC every slot of the day is
    /// November.
    #[test]
    fn a_slot_is_in_its_month_of_the_zone() {
        let day = chrono::Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).single().expect("a day").timestamp();
        let mut new_york = DayMonths::new(chrono_tz::America::New_York);
        let mut utc = DayMonths::new(chrono_tz::UTC);
        let (october, november) = (Month { year: 2026, month: 10 }, Month { year: 2026, month: 11 });
        for (offset, month) in
            [(0, october), (3 * 3600 + 2700, october), (4 * 3600, november), (86_400 - 900, november)]
        {
            assert_eq!(new_york.month(day, day + offset).expect("a month"), month, "{offset}");
            assert_eq!(utc.month(day, day + offset).expect("a month"), november, "{offset}");
        }
        assert_eq!(november.to_string(), "2026-11");
        assert_eq!(Month::parse("2026-11"), Some(november));
        assert_eq!(Month::parse("2026-13"), None);
        assert_eq!(signed_nanos("-1.5"), Some(-1_500_000_000));
        assert_eq!(signed_nanos("0.000000001"), Some(1));
    }
}
