//! Synthetic data sets in the records contract, for benchmarks, demos and
//! tests at scale.
//!
//! A [`Spec`] (row counts, accounts, window, seed, format) becomes a [`Plan`]:
//! the accounts with their ids, currencies, time zones, home countries and
//! subaccounts, and the sampling tables (account sizes, hour-of-window
//! traffic, product, type, country, direction, code mixes). Every row is
//! then a pure function of `(seed, kind, index)`: it draws from its own
//! generator seeded by that triple. That is what makes the output identical
//! on any number of threads, and what makes duplicates cheap: a re-delivered
//! row is the row of an earlier index written again, byte for byte.
//!
//! Each output file holds a contiguous range of row indices plus its share
//! of re-delivered rows (runs of earlier rows, possibly from another file),
//! placed by the file's own seeded generator. Files are written in parallel,
//! each into a large buffer with hand-rolled number formatting (no per-row
//! allocation), then compressed when asked.
//!
//! What the data looks like (decisions the contract leaves open):
//! - account sizes follow Zipf (weight `1/rank`) with a per-kind factor, so
//!   a few big accounts carry most traffic and a long tail has little;
//! - traffic per hour of the window follows a weekly shape (quiet
//!   weekends), a 15 % growth trend and a daily curve peaking in the UTC
//!   afternoon, with a little day-to-day noise;
//! - about 70 % of an account's traffic goes to its home country; SIP calls
//!   have no country; rates depend on country, direction and product;
//! - hangup causes and message error codes come from the shipped tables
//!   (`src/labels/*.csv`) plus a few codes those tables do not know;
//! - charges have no subaccount; `Number Charges` accrue at midnight UTC.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate};
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::records::Kind;

/// How record files are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Plain `*.csv`.
    Csv,
    /// `*.csv.gz` (fast gzip level).
    CsvGz,
    /// `*.csv.zst` (zstd level 1).
    CsvZst,
    /// `*.parquet` with typed columns (timestamps, DECIMAL(38,9), Int64).
    Parquet,
}

impl OutputFormat {
    /// Parses `csv`, `csv.gz`, `csv.zst` or `parquet`.
    pub fn parse(text: &str) -> Option<OutputFormat> {
        match text {
            "csv" => Some(OutputFormat::Csv),
            "csv.gz" | "gz" => Some(OutputFormat::CsvGz),
            "csv.zst" | "zst" => Some(OutputFormat::CsvZst),
            "parquet" => Some(OutputFormat::Parquet),
            _ => None,
        }
    }

    /// The file name extension, without the leading dot.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Csv => "csv",
            OutputFormat::CsvGz => "csv.gz",
            OutputFormat::CsvZst => "csv.zst",
            OutputFormat::Parquet => "parquet",
        }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Rows per kind, in [`Kind::ALL`] order, duplicates included.
    pub rows: [u64; 4],
    /// Parent accounts.
    pub accounts: u32,
    /// Subaccounts of each account.
    pub subaccounts: u32,
    /// First day of the window (UTC).
    pub start: NaiveDate,
    /// Days in the window.
    pub days: u32,
    /// Seed: the same seed gives the same bytes.
    pub seed: u64,
    /// File encoding.
    pub format: OutputFormat,
    /// Files per kind.
    pub files: u32,
    /// Share of each kind's rows that re-deliver an earlier row, in `[0, 0.5]`.
    pub duplicates: f64,
}

impl Spec {
    /// Checks the spec's ranges; the message says what is allowed.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.accounts == 0 && self.rows.iter().any(|&n| n > 0) {
            return Err("--accounts must be at least 1 when any rows are asked for".to_owned());
        }
        if self.accounts > 1_000_000 {
            return Err(format!("--accounts {} is more than 1000000", self.accounts));
        }
        if self.subaccounts > 10_000 {
            return Err(format!("--subaccounts {} is more than 10000", self.subaccounts));
        }
        if self.days == 0 || self.days > 3660 {
            return Err(format!("--days {} is not between 1 and 3660", self.days));
        }
        if self.files == 0 || self.files > 10_000 {
            return Err(format!("--files {} is not between 1 and 10000", self.files));
        }
        if !(0.0..=0.5).contains(&self.duplicates) {
            return Err(format!("--duplicates {} is not between 0 and 0.5", self.duplicates));
        }
        if self.start.year() < 1971 || self.start.year() > 9000 {
            return Err(format!("--start {} is not a year between 1971 and 9000", self.start));
        }
        Ok(())
    }

    /// Duplicate rows of a kind with `rows` rows: never all of them.
    fn duplicate_rows(&self, rows: u64) -> u64 {
        let wanted = (rows as f64 * self.duplicates).round() as u64;
        wanted.min(rows.saturating_sub(1))
    }
}

/// One file to write: which rows it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePlan {
    /// The record kind.
    pub kind: Kind,
    /// Index among the kind's files.
    pub index: u32,
    /// Path relative to the output directory, `/`-separated.
    pub name: String,
    /// First unique row index.
    pub first: u64,
    /// Unique rows.
    pub unique: u64,
    /// Re-delivered rows mixed in.
    pub duplicates: u64,
    /// Unique rows of the whole kind (duplicates repeat one of them).
    pub kind_unique: u64,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Files written, `accounts.csv` excluded, with their sizes in bytes.
    pub files: Vec<(String, u64)>,
    /// Rows written per kind, in [`Kind::ALL`] order.
    pub rows: [u64; 4],
    /// Of which re-delivered duplicates.
    pub duplicates: [u64; 4],
}

impl Written {
    /// Bytes written, `accounts.csv` excluded.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
}

/// Writes the data set of `spec` under `out` (which must exist), files in
/// parallel.
pub fn generate(spec: &Spec, out: &Path) -> Result<Written> {
    let plan = Plan::new(spec)?;
    let accounts_path = out.join("accounts.csv");
    std::fs::write(&accounts_path, plan.accounts_csv()).map_err(|e| Error::io(&accounts_path, e))?;
    let files = plan.files();
    for kind in Kind::ALL {
        if files.iter().any(|f| f.kind == kind) {
            let folder = out.join(kind.name());
            std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        }
    }
    let sizes: Vec<Result<u64>> = files
        .par_iter()
        .map(|file| {
            let path: PathBuf = out.join(&file.name);
            let handle = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            plan.write_file(file, handle).map_err(|e| Error::io(&path, e))?;
            Ok(std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len())
        })
        .collect();
    let mut written = Written::default();
    for (file, size) in files.iter().zip(sizes) {
        let k = file.kind as usize;
        written.rows[k] += file.unique + file.duplicates;
        written.duplicates[k] += file.duplicates;
        written.files.push((file.name.clone(), size?));
    }
    Ok(written)
}

/// The accounts of a data set and the tables rows are drawn from.
#[derive(Clone, Debug)]
pub struct Plan {
    spec: Spec,
    accounts: Vec<AccountPlan>,
    /// Account size per kind.
    account_tables: [Table; 4],
    /// Hour of the window: `days * 24` slots.
    slots: Table,
    /// `YYYY-MM-DD` of each day.
    dates: Vec<[u8; 10]>,
    /// Unix seconds of the window's first midnight.
    start_secs: i64,
}

#[derive(Clone, Debug)]
struct AccountPlan {
    auth_id: String,
    currency: &'static str,
    timezone: &'static str,
    home: usize,
    subaccounts: Vec<String>,
    /// Share of usage on subaccounts, out of 2^32.
    subaccount_share: u64,
    subaccount_table: Table,
}

impl Plan {
    /// Draws the accounts and builds the tables of `spec`.
    pub fn new(spec: &Spec) -> Result<Plan> {
        spec.check().map_err(Error::Usage)?;
        let mut rng = Pcg64Mcg::new(mix128(spec.seed, 0xACC0_0A7E, 0));
        let mut ids = std::collections::BTreeSet::new();
        let mut accounts = Vec::with_capacity(spec.accounts as usize);
        for i in 0..spec.accounts {
            let auth_id = unique_id(&mut rng, b"MA", &mut ids);
            let (currency, timezone, home) = if i == 0 {
                ("USD", "", 0)
            } else {
                let profile = &PROFILES[pick(&PROFILE_TABLE, rng.next_u32())];
                let zones = profile.timezones;
                (profile.currency, zones[(rng.next_u32() as usize) % zones.len()], profile.home)
            };
            let subaccounts: Vec<String> =
                (0..spec.subaccounts).map(|_| unique_id(&mut rng, b"SA", &mut ids)).collect();
            let weights: Vec<u64> = (0..subaccounts.len() as u64).map(|r| 1_000_000 / (r + 1)).collect();
            let share_percent = 15 + rng.next_u32() as u64 % 50;
            accounts.push(AccountPlan {
                auth_id,
                currency,
                timezone,
                home,
                subaccounts,
                subaccount_share: (share_percent << 32) / 100,
                subaccount_table: Table::new(&weights),
            });
        }
        let account_tables = [0, 1, 2, 3].map(|kind| {
            let weights: Vec<u64> = (0..spec.accounts as u64)
                .map(|rank| {
                    // Zipf by rank, times a per-kind factor of 0.5 to 1.5;
                    // charges grow with the square root of size.
                    let factor = 500 + rng.next_u32() as u64 % 1000;
                    let base = if kind == 3 { 1_000_000 / (rank + 1).isqrt() } else { 1_000_000 / (rank + 1) };
                    base * factor
                })
                .collect();
            Table::new(&weights)
        });
        let first_day = spec.start.num_days_from_ce() as i64 - 719_163;
        let mut dates = Vec::with_capacity(spec.days as usize);
        let mut slot_weights = Vec::with_capacity(spec.days as usize * 24);
        for day in 0..spec.days as i64 {
            let date = spec.start + chrono::Days::new(day as u64);
            let mut text = [0u8; 10];
            text.copy_from_slice(date.format("%Y-%m-%d").to_string().as_bytes());
            dates.push(text);
            let weekday = WEEKDAY_PERMILLE[date.weekday().num_days_from_monday() as usize];
            let trend = 1000 + 150 * day as u64 / spec.days as u64;
            let noise = 950 + rng.next_u32() as u64 % 100;
            for hour in HOUR_PERMILLE {
                slot_weights.push(weekday * trend * noise / 1000 * hour);
            }
        }
        Ok(Plan {
            spec: spec.clone(),
            accounts,
            account_tables,
            slots: Table::new(&slot_weights),
            dates,
            start_secs: first_day * 86_400,
        })
    }

    /// The account ids, biggest (by calls) first.
    pub fn account_ids(&self) -> Vec<&str> {
        self.accounts.iter().map(|a| a.auth_id.as_str()).collect()
    }

    /// The bytes of `accounts.csv`.
    pub fn accounts_csv(&self) -> Vec<u8> {
        let mut out = b"auth_id,currency,timezone\n".to_vec();
        for account in &self.accounts {
            out.extend_from_slice(account.auth_id.as_bytes());
            out.push(b',');
            out.extend_from_slice(account.currency.as_bytes());
            out.push(b',');
            out.extend_from_slice(account.timezone.as_bytes());
            out.push(b'\n');
        }
        out
    }

    /// Every file of the data set, by kind then index.
    pub fn files(&self) -> Vec<FilePlan> {
        let spec = &self.spec;
        let mut files = Vec::new();
        for kind in Kind::ALL {
            let rows = spec.rows[kind as usize];
            if rows == 0 {
                continue;
            }
            let duplicates = spec.duplicate_rows(rows);
            let unique = rows - duplicates;
            let n = spec.files as u64;
            let share = |total: u64, i: u64| (total as u128 * i as u128 / n as u128) as u64;
            for i in 0..n {
                files.push(FilePlan {
                    kind,
                    index: i as u32,
                    name: format!("{}/part-{i:03}.{}", kind.name(), spec.format.extension()),
                    first: share(unique, i),
                    unique: share(unique, i + 1) - share(unique, i),
                    duplicates: share(duplicates, i + 1) - share(duplicates, i),
                    kind_unique: unique,
                });
            }
        }
        files
    }

    /// Writes one file in the spec's format.
    pub fn write_file<W: Write>(&self, file: &FilePlan, out: W) -> std::io::Result<()> {
        match self.spec.format {
            OutputFormat::Csv => self.write_csv(file, out),
            OutputFormat::CsvGz => {
                let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
                self.write_csv(file, &mut encoder)?;
                encoder.finish()?;
                Ok(())
            }
            OutputFormat::CsvZst => {
                let mut encoder = zstd::stream::Encoder::new(out, 1)?;
                self.write_csv(file, &mut encoder)?;
                encoder.finish()?;
                Ok(())
            }
            OutputFormat::Parquet => self.write_parquet(file, out),
        }
    }

    /// The bytes of one file (for tests and benchmarks).
    pub fn file_bytes(&self, file: &FilePlan) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_file(file, &mut out)?;
        Ok(out)
    }

    /// Row indices of a file in output order: its own rows with re-delivered
    /// runs of earlier rows mixed in.
    fn order(&self, file: &FilePlan, mut each: impl FnMut(u64) -> std::io::Result<()>) -> std::io::Result<()> {
        let mut rng = Pcg64Mcg::new(mix128(self.spec.seed, file.kind as u64 + 11, file.index as u64));
        let (mut own_left, mut dup_left) = (file.unique, file.duplicates);
        let mut next_own = file.first;
        let (mut run_next, mut run_left) = (0u64, 0u64);
        while own_left + dup_left > 0 {
            let take_dup = dup_left > 0 && rng.next_u64() % (own_left + dup_left) < dup_left;
            if take_dup {
                if run_left == 0 {
                    let r = rng.next_u64();
                    run_next = (r >> 8) % file.kind_unique;
                    run_left = 1 + (r & 0x1f);
                }
                each(run_next)?;
                run_next = (run_next + 1) % file.kind_unique;
                run_left -= 1;
                dup_left -= 1;
            } else {
                each(next_own)?;
                next_own += 1;
                own_left -= 1;
            }
        }
        Ok(())
    }

    fn write_csv<W: Write>(&self, file: &FilePlan, mut out: W) -> std::io::Result<()> {
        const FLUSH_AT: usize = 4 << 20;
        let mut buf = Vec::with_capacity(FLUSH_AT + 4096);
        buf.extend_from_slice(header(file.kind).as_bytes());
        buf.push(b'\n');
        self.order(file, |index| {
            let row = self.row(file.kind, index);
            self.push_csv(file.kind, &row, &mut buf);
            if buf.len() >= FLUSH_AT {
                out.write_all(&buf)?;
                buf.clear();
            }
            Ok(())
        })?;
        out.write_all(&buf)?;
        out.flush()
    }

    /// The row of `kind` at `index`: a pure function of the seed, the kind
    /// and the index.
    fn row(&self, kind: Kind, index: u64) -> Row {
        let mut rng = Pcg64Mcg::new(mix128(self.spec.seed, kind as u64 + 1, index));
        let mut id = [0u8; 36];
        uuid(rng.next_u64(), rng.next_u64(), &mut id);
        let r = rng.next_u64();
        let account = pick(&self.account_tables[kind as usize], r as u32);
        let plan = &self.accounts[account];
        let subaccount = if kind != Kind::Charges
            && !plan.subaccounts.is_empty()
            && ((r >> 32) & 0xffff_ffff) < plan.subaccount_share
        {
            1 + pick(&plan.subaccount_table, rng.next_u32()) as u32
        } else {
            0
        };
        let r = rng.next_u64();
        let slot = pick(&self.slots, r as u32) as u32;
        let second_of_hour = ((((r >> 32) & 0xffff_ffff) * 3600) >> 32) as u32;
        let mut row = Row {
            id,
            account: account as u32,
            subaccount,
            slot,
            second_of_hour,
            millis: 0,
            product: "",
            type_: "",
            direction: "",
            country: None,
            units: 1,
            duration: 0,
            amount: 0,
            surcharge: 0,
            code: "",
            extra: "",
        };
        let r = rng.next_u64();
        let home = plan.home;
        let country_of = |r: u64| -> usize {
            if (r & 0xffff) < 0xb333 {
                home
            } else {
                pick(&COUNTRY_TABLE, (r >> 16) as u32)
            }
        };
        match kind {
            Kind::Calls => {
                let (product, type_, per_minute) = CALL_TYPES[pick(&CALL_TYPE_TABLE, r as u32)];
                row.product = product;
                row.type_ = type_;
                let outbound = ((r >> 32) & 0xffff) < 0x9eb8; // 62 %
                row.direction = if outbound { "outbound" } else { "inbound" };
                let country = (type_ != "sip").then(|| country_of(rng.next_u64()));
                row.country = country.map(|c| COUNTRIES[c].0);
                let r2 = rng.next_u64();
                let (code, answered) = HANGUP_CAUSES[pick(&HANGUP_TABLE, r2 as u32)];
                row.code = code;
                if answered {
                    let seconds = duration(rng.next_u64());
                    let billed = if per_minute { seconds.div_ceil(60) * 60 } else { seconds };
                    let rate = match country {
                        Some(c) if outbound => COUNTRIES[c].2,
                        Some(c) => COUNTRIES[c].2 * 85 / 100,
                        None => 300,
                    };
                    row.duration = billed;
                    row.amount = (rate * billed + 30) / 60;
                    let percent = SURCHARGE_PERCENT[((r2 >> 32) % 10) as usize];
                    row.surcharge = row.amount * percent / 100;
                }
            }
            Kind::Messages => {
                let mms = (r & 0xffff) < 0x1eb8; // 12 %
                row.type_ = if mms { "mms" } else { "sms" };
                let outbound = ((r >> 16) & 0xffff) < 0xc7ae; // 78 %
                row.direction = if outbound { "outbound" } else { "inbound" };
                let c = country_of(rng.next_u64());
                row.country = Some(COUNTRIES[c].0);
                let r2 = rng.next_u64();
                row.units = if mms { 1 } else { SEGMENTS[pick(&SEGMENT_TABLE, r2 as u32)] };
                let per_segment = match (mms, outbound) {
                    (false, true) => COUNTRIES[c].3,
                    (true, true) => COUNTRIES[c].3 * 3,
                    (false, false) => 0,
                    (true, false) => 500,
                };
                row.amount = per_segment * row.units;
                if outbound && !mms && (COUNTRIES[c].0 == *b"US" || COUNTRIES[c].0 == *b"CA") {
                    row.surcharge = (250 * row.units).min(row.amount);
                }
                row.code = ERROR_CODES[pick(&ERROR_CODE_TABLE, (r2 >> 32) as u32)];
                row.millis = ((r >> 32) % 1000) as u32;
            }
            Kind::Transcriptions => {
                let enhanced = (r & 0xffff) < 0x2666; // 15 %
                row.type_ = if enhanced { "enhanced" } else { "standard" };
                row.extra = LANGUAGES[pick(&LANGUAGE_TABLE, (r >> 16) as u32)];
                let tenths = duration(rng.next_u64()) * 10 + (r >> 48) % 10;
                let per_minute = if enhanced { 8000 } else { 5000 };
                row.duration = tenths;
                row.amount = (tenths * per_minute + 300) / 600;
            }
            Kind::Charges => {
                let (description, price, max_units) = CHARGES[pick(&CHARGE_TABLE, r as u32)];
                row.code = description;
                row.units = 1 + (r >> 32) % max_units;
                row.amount = price * row.units;
                if description == "Number Charges" {
                    let day = (rng.next_u64() % self.spec.days as u64) as u32;
                    row.slot = day * 24;
                    row.second_of_hour = 0;
                }
            }
        }
        row
    }

    fn push_csv(&self, kind: Kind, row: &Row, buf: &mut Vec<u8>) {
        let account = &self.accounts[row.account as usize];
        let subaccount =
            if row.subaccount == 0 { "" } else { account.subaccounts[row.subaccount as usize - 1].as_str() };
        buf.extend_from_slice(&row.id);
        buf.push(b',');
        match kind {
            Kind::Calls => {
                // record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,
                // billed_seconds,amount,surcharge,hangup_cause
                push_text(buf, &account.auth_id);
                push_text(buf, subaccount);
                self.push_timestamp(buf, row, b'T', b"Z");
                push_text(buf, row.product);
                push_text(buf, row.type_);
                push_text(buf, row.direction);
                push_country(buf, row.country);
                push_u64(buf, row.duration);
                buf.push(b',');
                push_fixed5(buf, row.amount);
                buf.push(b',');
                push_fixed5(buf, row.surcharge);
                buf.push(b',');
                buf.extend_from_slice(row.code.as_bytes());
            }
            Kind::Messages => {
                // record_id,timestamp,auth_id,subaccount_auth,direction,type,country,segments,
                // amount,surcharge,error_code
                self.push_timestamp(buf, row, b'T', b"Z");
                push_text(buf, &account.auth_id);
                push_text(buf, subaccount);
                push_text(buf, row.direction);
                push_text(buf, row.type_);
                push_country(buf, row.country);
                push_u64(buf, row.units);
                buf.push(b',');
                push_fixed5(buf, row.amount);
                buf.push(b',');
                push_fixed5(buf, row.surcharge);
                buf.push(b',');
                buf.extend_from_slice(row.code.as_bytes());
            }
            Kind::Transcriptions => {
                // record_id,auth_id,subaccount_auth,timestamp,type,language,duration_seconds,amount
                push_text(buf, &account.auth_id);
                push_text(buf, subaccount);
                self.push_timestamp(buf, row, b' ', b"+00:00");
                push_text(buf, row.type_);
                push_text(buf, row.extra);
                push_u64(buf, row.duration / 10);
                buf.push(b'.');
                buf.push(b'0' + (row.duration % 10) as u8);
                buf.push(b',');
                push_fixed5(buf, row.amount);
            }
            Kind::Charges => {
                // record_id,auth_id,timestamp,description,units,amount
                push_text(buf, &account.auth_id);
                self.push_timestamp(buf, row, b'T', b"Z");
                if row.code.contains(',') {
                    buf.push(b'"');
                    buf.extend_from_slice(row.code.as_bytes());
                    buf.extend_from_slice(b"\",");
                } else {
                    push_text(buf, row.code);
                }
                push_u64(buf, row.units);
                buf.push(b',');
                push_fixed5(buf, row.amount);
            }
        }
        buf.push(b'\n');
    }

    /// `YYYY-MM-DD?HH:MM:SS[.mmm]SUFFIX,`
    fn push_timestamp(&self, buf: &mut Vec<u8>, row: &Row, separator: u8, suffix: &[u8]) {
        let (day, hour) = (row.slot / 24, row.slot % 24);
        buf.extend_from_slice(&self.dates[day as usize]);
        let (minute, second) = (row.second_of_hour / 60, row.second_of_hour % 60);
        let digits = [
            separator,
            b'0' + (hour / 10) as u8,
            b'0' + (hour % 10) as u8,
            b':',
            b'0' + (minute / 10) as u8,
            b'0' + (minute % 10) as u8,
            b':',
            b'0' + (second / 10) as u8,
            b'0' + (second % 10) as u8,
        ];
        buf.extend_from_slice(&digits);
        if row.millis > 0 {
            let m = row.millis;
            buf.extend_from_slice(&[b'.', b'0' + (m / 100) as u8, b'0' + (m / 10 % 10) as u8, b'0' + (m % 10) as u8]);
        }
        buf.extend_from_slice(suffix);
        buf.push(b',');
    }

    fn instant_millis(&self, row: &Row) -> i64 {
        (self.start_secs + row.slot as i64 * 3600 + row.second_of_hour as i64) * 1000 + row.millis as i64
    }

    fn write_parquet<W: Write>(&self, file: &FilePlan, out: W) -> std::io::Result<()> {
        use polars::prelude::{
            Column, DataFrame, Int128Chunked, Int64Chunked, IntoColumn, IntoSeries, NamedFrom, ParquetWriter, Series,
            TimeUnit, TimeZone,
        };
        let kind = file.kind;
        let mut rows = Vec::with_capacity((file.unique + file.duplicates) as usize);
        self.order(file, |index| {
            rows.push(self.row(kind, index));
            Ok(())
        })?;
        let text = |name: &str, f: &dyn Fn(&Row) -> String| -> Column {
            Series::new(name.into(), rows.iter().map(f).collect::<Vec<String>>()).into_column()
        };
        let account = |row: &Row| self.accounts[row.account as usize].auth_id.clone();
        let subaccount = |row: &Row| match row.subaccount {
            0 => String::new(),
            s => self.accounts[row.account as usize].subaccounts[s as usize - 1].clone(),
        };
        let decimal = |name: &str, f: &dyn Fn(&Row) -> i128| -> std::io::Result<Column> {
            let values: Vec<i128> = rows.iter().map(f).collect();
            Int128Chunked::from_vec(name.into(), values)
                .into_decimal(38, 9)
                .map(|d| d.into_series().into_column())
                .map_err(std::io::Error::other)
        };
        let timestamp =
            Int64Chunked::from_vec("timestamp".into(), rows.iter().map(|r| self.instant_millis(r)).collect())
                .into_datetime(TimeUnit::Milliseconds, Some(TimeZone::UTC))
                .into_series()
                .into_column();
        let count = |name: &str, f: &dyn Fn(&Row) -> i64| -> Column {
            Int64Chunked::from_vec(name.into(), rows.iter().map(f).collect()).into_series().into_column()
        };
        let fixed5 = |v: u64| v as i128 * 10_000;
        let mut columns =
            vec![text("record_id", &|r| String::from_utf8_lossy(&r.id).into_owned()), text("auth_id", &account)];
        if kind != Kind::Charges {
            columns.push(text("subaccount_auth", &subaccount));
        }
        columns.push(timestamp);
        match kind {
            Kind::Calls => {
                columns.push(text("product", &|r| r.product.to_owned()));
                columns.push(text("type", &|r| r.type_.to_owned()));
                columns.push(text("direction", &|r| r.direction.to_owned()));
                columns.push(text("country", &|r| country_text(r.country)));
                columns.push(decimal("billed_seconds", &|r| r.duration as i128 * 1_000_000_000)?);
                columns.push(decimal("amount", &|r| fixed5(r.amount))?);
                columns.push(decimal("surcharge", &|r| fixed5(r.surcharge))?);
                columns.push(text("hangup_cause", &|r| r.code.to_owned()));
            }
            Kind::Messages => {
                columns.push(text("type", &|r| r.type_.to_owned()));
                columns.push(text("direction", &|r| r.direction.to_owned()));
                columns.push(text("country", &|r| country_text(r.country)));
                columns.push(count("segments", &|r| r.units as i64));
                columns.push(decimal("amount", &|r| fixed5(r.amount))?);
                columns.push(decimal("surcharge", &|r| fixed5(r.surcharge))?);
                columns.push(text("error_code", &|r| r.code.to_owned()));
            }
            Kind::Transcriptions => {
                columns.push(text("type", &|r| r.type_.to_owned()));
                columns.push(text("language", &|r| r.extra.to_owned()));
                columns.push(decimal("duration_seconds", &|r| r.duration as i128 * 100_000_000)?);
                columns.push(decimal("amount", &|r| fixed5(r.amount))?);
            }
            Kind::Charges => {
                columns.push(text("description", &|r| r.code.to_owned()));
                columns.push(count("units", &|r| r.units as i64));
                columns.push(decimal("amount", &|r| fixed5(r.amount))?);
            }
        }
        let height = rows.len();
        let mut frame = DataFrame::new(height, columns).map_err(std::io::Error::other)?;
        ParquetWriter::new(out).finish(&mut frame).map_err(std::io::Error::other)?;
        Ok(())
    }
}

/// One generated row, before formatting.
#[derive(Clone, Debug)]
struct Row {
    id: [u8; 36],
    account: u32,
    /// 0 = parent level, else 1 + index into the account's subaccounts.
    subaccount: u32,
    slot: u32,
    second_of_hour: u32,
    millis: u32,
    product: &'static str,
    type_: &'static str,
    direction: &'static str,
    country: Option<[u8; 2]>,
    units: u64,
    /// Calls: billed seconds; transcriptions: tenths of a second.
    duration: u64,
    /// In 1e-5 units of the account's currency.
    amount: u64,
    /// In 1e-5 units.
    surcharge: u64,
    /// Hangup cause, error code, or a charge's description.
    code: &'static str,
    /// Transcriptions: the (ignored) `language` column.
    extra: &'static str,
}

/// The header of each kind. Messages use another column order and
/// transcriptions carry an extra column, as real exports do.
fn header(kind: Kind) -> &'static str {
    match kind {
        Kind::Calls => "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause",
        Kind::Messages => "record_id,timestamp,auth_id,subaccount_auth,direction,type,country,segments,amount,surcharge,error_code",
        Kind::Transcriptions => "record_id,auth_id,subaccount_auth,timestamp,type,language,duration_seconds,amount",
        Kind::Charges => "record_id,auth_id,timestamp,description,units,amount",
    }
}

/// Cumulative thresholds out of 2^32: index `i` is picked for draws in
/// `[cum[i-1], cum[i])`.
#[derive(Clone, Debug)]
struct Table {
    cum: Vec<u64>,
}

impl Table {
    fn new(weights: &[u64]) -> Table {
        let total: u128 = weights.iter().map(|&w| w as u128).sum::<u128>().max(1);
        let mut running: u128 = 0;
        let cum = weights
            .iter()
            .map(|&w| {
                running += w as u128;
                ((running << 32) / total) as u64
            })
            .collect();
        Table { cum }
    }
}

fn pick(table: &Table, draw: u32) -> usize {
    let index = table.cum.partition_point(|&c| c <= draw as u64);
    index.min(table.cum.len().saturating_sub(1))
}

/// Call or transcription length in seconds: a heavy-tailed mix.
fn duration(r: u64) -> u64 {
    let (low, high) = DURATIONS[pick(&DURATION_TABLE, r as u32)];
    low + (r >> 32) % (high - low)
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A well-mixed 128-bit generator state for `(seed, stream, index)`.
fn mix128(seed: u64, stream: u64, index: u64) -> u128 {
    let a = splitmix64(seed ^ splitmix64(stream));
    let b = splitmix64(a ^ index);
    let c = splitmix64(b ^ 0x5851_F42D_4C95_7F2D);
    (b as u128) << 64 | c as u128
}

/// An id of `prefix` and 18 upper-case letters and digits, not in `taken`.
fn unique_id(rng: &mut Pcg64Mcg, prefix: &[u8], taken: &mut std::collections::BTreeSet<String>) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    loop {
        let mut id = prefix.to_vec();
        for _ in 0..18 {
            id.push(ALPHABET[(rng.next_u32() % ALPHABET.len() as u32) as usize]);
        }
        let id = String::from_utf8_lossy(&id).into_owned();
        if taken.insert(id.clone()) {
            return id;
        }
    }
}

/// A version-4-shaped UUID, lower-case hex.
fn uuid(high: u64, low: u64, out: &mut [u8; 36]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let high = (high & !0xf000) | 0x4000;
    let low = (low & !(0xc << 60)) | (0x8 << 60);
    let value = (high as u128) << 64 | low as u128;
    let mut at = 0;
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            out[at] = b'-';
            at += 1;
        }
        out[at] = HEX[((value >> (124 - 4 * i)) & 0xf) as usize];
        at += 1;
    }
}

fn push_text(buf: &mut Vec<u8>, text: &str) {
    buf.extend_from_slice(text.as_bytes());
    buf.push(b',');
}

fn push_country(buf: &mut Vec<u8>, country: Option<[u8; 2]>) {
    if let Some(code) = country {
        buf.extend_from_slice(&code);
    }
    buf.push(b',');
}

fn country_text(country: Option<[u8; 2]>) -> String {
    country.map(|c| String::from_utf8_lossy(&c).into_owned()).unwrap_or_default()
}

fn push_u64(buf: &mut Vec<u8>, value: u64) {
    let mut digits = itoa::Buffer::new();
    buf.extend_from_slice(digits.format(value).as_bytes());
}

/// `value` in 1e-5 units as a decimal with five places: `0.01700`.
fn push_fixed5(buf: &mut Vec<u8>, value: u64) {
    push_u64(buf, value / 100_000);
    let frac = value % 100_000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 10_000) as u8,
        b'0' + (frac / 1_000 % 10) as u8,
        b'0' + (frac / 100 % 10) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

// ---- The mixes. Weights are relative integers. ----

/// Monday to Sunday.
const WEEKDAY_PERMILLE: [u64; 7] = [1000, 1020, 1030, 1000, 950, 550, 450];

/// Hours 00 to 23 UTC: quiet nights, a European morning, an American
/// afternoon.
const HOUR_PERMILLE: [u64; 24] = [
    300, 250, 200, 180, 180, 220, 300, 450, 600, 700, 750, 800, 900, 1000, 1000, 1000, 980, 950, 900, 850, 750, 600,
    450, 350,
];

/// Account profiles: currency, home country (index into [`COUNTRIES`]) and
/// time zones (empty = the report default, UTC).
struct Profile {
    currency: &'static str,
    home: usize,
    timezones: &'static [&'static str],
}

const PROFILES: [Profile; 7] = [
    Profile { currency: "USD", home: 0, timezones: &["", "", "America/New_York", "America/Los_Angeles"] },
    Profile { currency: "USD", home: 1, timezones: &["America/Toronto"] },
    Profile { currency: "EUR", home: 4, timezones: &["Europe/Berlin", ""] },
    Profile { currency: "EUR", home: 5, timezones: &["Europe/Paris"] },
    Profile { currency: "GBP", home: 2, timezones: &["Europe/London", ""] },
    Profile { currency: "INR", home: 3, timezones: &["Asia/Kolkata"] },
    Profile { currency: "USD", home: 19, timezones: &["Asia/Kathmandu"] },
];

const PROFILE_WEIGHTS: [u64; 7] = [620, 60, 80, 40, 90, 80, 30];

/// Country, weight, voice outbound rate per minute and SMS outbound rate
/// per segment (both in 1e-5).
const COUNTRIES: [([u8; 2], u64, u64, u64); 28] = [
    (*b"US", 520, 1000, 500),
    (*b"CA", 70, 1000, 500),
    (*b"GB", 60, 1500, 4000),
    (*b"IN", 60, 2500, 2500),
    (*b"DE", 30, 2000, 8000),
    (*b"FR", 25, 2000, 7000),
    (*b"AU", 25, 2500, 5000),
    (*b"BR", 20, 3000, 3500),
    (*b"MX", 20, 2000, 3500),
    (*b"PH", 15, 9000, 2000),
    (*b"JP", 12, 4000, 7000),
    (*b"ES", 12, 2000, 7000),
    (*b"IT", 12, 2000, 7000),
    (*b"NL", 10, 2000, 9000),
    (*b"SG", 10, 2000, 4000),
    (*b"ZA", 10, 5000, 2500),
    (*b"NG", 8, 9000, 3000),
    (*b"KE", 6, 8000, 2500),
    (*b"AE", 8, 9000, 3500),
    (*b"NP", 3, 9000, 6000),
    (*b"PK", 5, 7000, 5000),
    (*b"ID", 8, 7000, 3500),
    (*b"CN", 5, 3000, 3000),
    (*b"HK", 5, 2000, 4000),
    (*b"IE", 5, 2000, 6000),
    (*b"SE", 5, 2000, 6000),
    (*b"PL", 5, 2000, 3500),
    (*b"CO", 6, 3000, 2000),
];

/// Product, type, billed by the minute. (SIP calls have no country.)
const CALL_TYPES: [(&str, &str, bool); 5] = [
    ("voice", "pstn", true),
    ("voice", "app", false),
    ("voice", "sip", false),
    ("zentrunk", "pstn", true),
    ("zentrunk", "sip", false),
];
const CALL_TYPE_WEIGHTS: [u64; 5] = [600, 180, 70, 120, 30];

/// Hangup cause and whether the call was answered (billed). Codes outside
/// the shipped table (`4999`, `3060`, `NORMAL_CLEARING`) and empty ones
/// occur too.
const HANGUP_CAUSES: [(&str, bool); 27] = [
    ("4000", true),
    ("4010", true),
    ("4020", true),
    ("4030", true),
    ("6000", true),
    ("6020", true),
    ("3000", false),
    ("3010", false),
    ("1000", false),
    ("3020", false),
    ("3110", false),
    ("2000", false),
    ("2010", false),
    ("2020", false),
    ("5000", false),
    ("5010", false),
    ("5020", false),
    ("3090", false),
    ("6010", false),
    ("3080", false),
    ("7011", false),
    ("3050", false),
    ("0", false),
    ("4999", true),
    ("NORMAL_CLEARING", true),
    ("", false),
    ("3060", false),
];
const HANGUP_WEIGHTS: [u64; 27] =
    [560, 60, 20, 4, 5, 3, 95, 55, 50, 20, 10, 25, 10, 8, 8, 5, 4, 8, 20, 5, 6, 6, 5, 3, 4, 6, 3];

const DURATIONS: [(u64, u64); 8] =
    [(1, 10), (10, 30), (30, 60), (60, 120), (120, 300), (300, 600), (600, 1800), (1800, 3600)];
const DURATION_WEIGHTS: [u64; 8] = [80, 120, 180, 220, 220, 100, 60, 20];

const SURCHARGE_PERCENT: [u64; 10] = [0, 0, 0, 0, 0, 0, 0, 5, 5, 12];

const SEGMENTS: [u64; 6] = [1, 2, 3, 4, 5, 6];
const SEGMENT_WEIGHTS: [u64; 6] = [740, 180, 50, 15, 8, 7];

/// Message error codes: empty = delivered. `31`, `9999` and `UNDELIVERED`
/// are not in the shipped table.
const ERROR_CODES: [&str; 15] =
    ["", "30", "50", "80", "90", "200", "420", "1000", "20", "450", "900", "10", "31", "9999", "UNDELIVERED"];
const ERROR_CODE_WEIGHTS: [u64; 15] = [930, 8, 12, 12, 6, 8, 4, 5, 4, 2, 1, 2, 2, 2, 2];

const LANGUAGES: [&str; 6] = ["en-US", "en-GB", "es-ES", "hi-IN", "fr-FR", "de-DE"];
const LANGUAGE_WEIGHTS: [u64; 6] = [700, 80, 80, 60, 40, 40];

/// Description, price per unit (1e-5), most units per row.
const CHARGES: [(&str, u64, u64); 6] = [
    ("Number Charges", 80_000, 25),
    ("CNAM Lookup", 400, 2000),
    ("Carrier Lookup", 300, 1000),
    ("Other Charges", 10_000, 5),
    ("10DLC Campaign Fee", 150_000, 2),
    ("Port-In Fee, Expedited", 500_000, 3),
];
const CHARGE_WEIGHTS: [u64; 6] = [450, 200, 150, 100, 60, 40];

static PROFILE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&PROFILE_WEIGHTS));
static COUNTRY_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&COUNTRIES.map(|c| c.1)));
static CALL_TYPE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&CALL_TYPE_WEIGHTS));
static HANGUP_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&HANGUP_WEIGHTS));
static DURATION_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&DURATION_WEIGHTS));
static SEGMENT_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&SEGMENT_WEIGHTS));
static ERROR_CODE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&ERROR_CODE_WEIGHTS));
static LANGUAGE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&LANGUAGE_WEIGHTS));
static CHARGE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&CHARGE_WEIGHTS));

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            rows: [2000, 1000, 300, 50],
            accounts: 7,
            subaccounts: 3,
            start: NaiveDate::from_ymd_opt(2026, 8, 1).unwrap_or_default(),
            days: 10,
            seed: 7,
            format: OutputFormat::Csv,
            files: 3,
            duplicates: 0.02,
        }
    }

    #[test]
    fn tables_pick_by_weight_and_never_pick_zero_weights() {
        let table = Table::new(&[1, 0, 3]);
        assert_eq!(pick(&table, 0), 0);
        assert_eq!(pick(&table, (1 << 30) - 1), 0);
        assert_eq!(pick(&table, 1 << 30), 2);
        assert_eq!(pick(&table, u32::MAX), 2);
    }

    #[test]
    fn files_split_rows_and_duplicates_exactly() {
        let plan = Plan::new(&spec()).unwrap();
        let files = plan.files();
        assert_eq!(files.len(), 12);
        for kind in Kind::ALL {
            let of_kind: Vec<&FilePlan> = files.iter().filter(|f| f.kind == kind).collect();
            let rows: u64 = of_kind.iter().map(|f| f.unique + f.duplicates).sum();
            assert_eq!(rows, spec().rows[kind as usize]);
            let duplicates: u64 = of_kind.iter().map(|f| f.duplicates).sum();
            assert_eq!(duplicates, (spec().rows[kind as usize] as f64 * 0.02).round() as u64);
        }
    }

    #[test]
    fn a_row_depends_only_on_seed_kind_and_index() {
        let plan = Plan::new(&spec()).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 17), &mut a);
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 17), &mut b);
        assert_eq!(a, b);
        let mut c = Vec::new();
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 18), &mut c);
        assert_ne!(a, c);
    }

    #[test]
    fn fixed_point_and_uuid_formats() {
        let mut buf = Vec::new();
        push_fixed5(&mut buf, 1_700);
        buf.push(b' ');
        push_fixed5(&mut buf, 1_234_567);
        assert_eq!(buf, b"0.01700 12.34567");
        let mut id = [0u8; 36];
        uuid(u64::MAX, 0, &mut id);
        assert_eq!(&id, b"ffffffff-ffff-4fff-8000-000000000000");
    }
}
