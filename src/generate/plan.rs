//! The [`Plan`] of a data set: its accounts and the draw of every row, a
//! pure function of `(seed, kind, index)` (see the module above).

use chrono::Datelike;
use rand::Rng;
use rand_pcg::Pcg64Mcg;

use super::tables::*;
use super::{FilePlan, Spec};
use crate::error::{Error, Result};
use crate::records::Kind;

/// The accounts of a data set and the tables rows are drawn from.
#[derive(Clone, Debug)]
pub struct Plan {
    pub(super) spec: Spec,
    pub(super) accounts: Vec<AccountPlan>,
    /// Account size per kind.
    pub(super) account_tables: [Table; 4],
    /// Hour of the window: `days * 24` slots.
    pub(super) slots: Table,
    /// `YYYY-MM-DD` of each day.
    pub(super) dates: Vec<[u8; 10]>,
    /// Unix seconds of the window's first midnight.
    pub(super) start_secs: i64,
}

#[derive(Clone, Debug)]
pub(super) struct AccountPlan {
    pub(super) auth_id: String,
    pub(super) currency: &'static str,
    pub(super) timezone: &'static str,
    pub(super) home: usize,
    pub(super) subaccounts: Vec<String>,
    /// Share of usage on subaccounts, out of 2^32.
    pub(super) subaccount_share: u64,
    pub(super) subaccount_table: Table,
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

    /// The row of `kind` at `index`: a pure function of the seed, the kind
    /// and the index.
    pub(super) fn row(&self, kind: Kind, index: u64) -> Row {
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
            Kind::Charges | Kind::Voids => {
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

    pub(super) fn instant_millis(&self, row: &Row) -> i64 {
        (self.start_secs + row.slot as i64 * 3600 + row.second_of_hour as i64) * 1000 + row.millis as i64
    }
}

/// One generated row, before formatting.
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub(super) id: [u8; 36],
    pub(super) account: u32,
    /// 0 = parent level, else 1 + index into the account's subaccounts.
    pub(super) subaccount: u32,
    pub(super) slot: u32,
    pub(super) second_of_hour: u32,
    pub(super) millis: u32,
    pub(super) product: &'static str,
    pub(super) type_: &'static str,
    pub(super) direction: &'static str,
    pub(super) country: Option<[u8; 2]>,
    pub(super) units: u64,
    /// Calls: billed seconds; transcriptions: tenths of a second.
    pub(super) duration: u64,
    /// In 1e-5 units of the account's currency.
    pub(super) amount: u64,
    /// In 1e-5 units.
    pub(super) surcharge: u64,
    /// Hangup cause, error code, or a charge's description.
    pub(super) code: &'static str,
    /// Transcriptions: the (ignored) `language` column.
    pub(super) extra: &'static str,
}

/// Call or transcription length in seconds: a heavy-tailed mix.
pub(super) fn duration(r: u64) -> u64 {
    let (low, high) = DURATIONS[pick(&DURATION_TABLE, r as u32)];
    low + (r >> 32) % (high - low)
}

pub(super) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A well-mixed 128-bit generator state for `(seed, stream, index)`.
pub(super) fn mix128(seed: u64, stream: u64, index: u64) -> u128 {
    let a = splitmix64(seed ^ splitmix64(stream));
    let b = splitmix64(a ^ index);
    let c = splitmix64(b ^ 0x5851_F42D_4C95_7F2D);
    (b as u128) << 64 | c as u128
}

/// An id of `prefix` and 18 upper-case letters and digits, not in `taken`.
pub(super) fn unique_id(rng: &mut Pcg64Mcg, prefix: &[u8], taken: &mut std::collections::BTreeSet<String>) -> String {
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
pub(super) fn uuid(high: u64, low: u64, out: &mut [u8; 36]) {
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
