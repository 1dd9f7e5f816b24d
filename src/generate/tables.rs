//! The sampling tables: weighted [`Table`]s and the mixes rows are drawn
//! from (account sizes, hours, products, types, countries, codes).

/// Cumulative thresholds out of 2^32: index `i` is picked for draws in
/// `[cum[i-1], cum[i])`.
#[derive(Clone, Debug)]
pub(super) struct Table {
    pub(super) cum: Vec<u64>,
}

impl Table {
    pub(super) fn new(weights: &[u64]) -> Table {
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

pub(super) fn pick(table: &Table, draw: u32) -> usize {
    let index = table.cum.partition_point(|&c| c <= draw as u64);
    index.min(table.cum.len().saturating_sub(1))
}

// ---- The mixes. Weights are relative integers. ----

/// Monday to Sunday.
pub(super) const WEEKDAY_PERMILLE: [u64; 7] = [1000, 1020, 1030, 1000, 950, 550, 450];

/// Hours 00 to 23 UTC: quiet nights, a European morning, an American
/// afternoon.
pub(super) const HOUR_PERMILLE: [u64; 24] = [
    300, 250, 200, 180, 180, 220, 300, 450, 600, 700, 750, 800, 900, 1000, 1000, 1000, 980, 950, 900, 850, 750, 600,
    450, 350,
];

/// Account profiles: currency, home country (index into [`COUNTRIES`]) and
/// time zones (empty = the report default, UTC).
pub(super) struct Profile {
    pub(super) currency: &'static str,
    pub(super) home: usize,
    pub(super) timezones: &'static [&'static str],
}

pub(super) const PROFILES: [Profile; 7] = [
    Profile { currency: "USD", home: 0, timezones: &["", "", "America/New_York", "America/Los_Angeles"] },
    Profile { currency: "USD", home: 1, timezones: &["America/Toronto"] },
    Profile { currency: "EUR", home: 4, timezones: &["Europe/Berlin", ""] },
    Profile { currency: "EUR", home: 5, timezones: &["Europe/Paris"] },
    Profile { currency: "GBP", home: 2, timezones: &["Europe/London", ""] },
    Profile { currency: "INR", home: 3, timezones: &["Asia/Kolkata"] },
    Profile { currency: "USD", home: 19, timezones: &["Asia/Kathmandu"] },
];

pub(super) const PROFILE_WEIGHTS: [u64; 7] = [620, 60, 80, 40, 90, 80, 30];

/// Country, weight, voice outbound rate per minute and SMS outbound rate
/// per segment (both in 1e-5).
pub(super) const COUNTRIES: [([u8; 2], u64, u64, u64); 28] = [
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
pub(super) const CALL_TYPES: [(&str, &str, bool); 5] = [
    ("voice", "pstn", true),
    ("voice", "app", false),
    ("voice", "sip", false),
    ("zentrunk", "pstn", true),
    ("zentrunk", "sip", false),
];
pub(super) const CALL_TYPE_WEIGHTS: [u64; 5] = [600, 180, 70, 120, 30];

/// Hangup cause and whether the call was answered (billed). Codes outside
/// the shipped table (`4999`, `3060`, `NORMAL_CLEARING`) and empty ones
/// occur too.
pub(super) const HANGUP_CAUSES: [(&str, bool); 27] = [
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
pub(super) const HANGUP_WEIGHTS: [u64; 27] =
    [560, 60, 20, 4, 5, 3, 95, 55, 50, 20, 10, 25, 10, 8, 8, 5, 4, 8, 20, 5, 6, 6, 5, 3, 4, 6, 3];

pub(super) const DURATIONS: [(u64, u64); 8] =
    [(1, 10), (10, 30), (30, 60), (60, 120), (120, 300), (300, 600), (600, 1800), (1800, 3600)];
pub(super) const DURATION_WEIGHTS: [u64; 8] = [80, 120, 180, 220, 220, 100, 60, 20];

pub(super) const SURCHARGE_PERCENT: [u64; 10] = [0, 0, 0, 0, 0, 0, 0, 5, 5, 12];

pub(super) const SEGMENTS: [u64; 6] = [1, 2, 3, 4, 5, 6];
pub(super) const SEGMENT_WEIGHTS: [u64; 6] = [740, 180, 50, 15, 8, 7];

/// Message error codes: empty = delivered. `31`, `9999` and `UNDELIVERED`
/// are not in the shipped table.
pub(super) const ERROR_CODES: [&str; 15] =
    ["", "30", "50", "80", "90", "200", "420", "1000", "20", "450", "900", "10", "31", "9999", "UNDELIVERED"];
pub(super) const ERROR_CODE_WEIGHTS: [u64; 15] = [930, 8, 12, 12, 6, 8, 4, 5, 4, 2, 1, 2, 2, 2, 2];

pub(super) const LANGUAGES: [&str; 6] = ["en-US", "en-GB", "es-ES", "hi-IN", "fr-FR", "de-DE"];
pub(super) const LANGUAGE_WEIGHTS: [u64; 6] = [700, 80, 80, 60, 40, 40];

/// Description, price per unit (1e-5), most units per row.
pub(super) const CHARGES: [(&str, u64, u64); 6] = [
    ("Number Charges", 80_000, 25),
    ("CNAM Lookup", 400, 2000),
    ("Carrier Lookup", 300, 1000),
    ("Other Charges", 10_000, 5),
    ("10DLC Campaign Fee", 150_000, 2),
    ("Port-In Fee, Expedited", 500_000, 3),
];
pub(super) const CHARGE_WEIGHTS: [u64; 6] = [450, 200, 150, 100, 60, 40];

pub(super) static PROFILE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&PROFILE_WEIGHTS));
pub(super) static COUNTRY_TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(&COUNTRIES.map(|c| c.1)));
pub(super) static CALL_TYPE_TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(&CALL_TYPE_WEIGHTS));
pub(super) static HANGUP_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&HANGUP_WEIGHTS));
pub(super) static DURATION_TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(&DURATION_WEIGHTS));
pub(super) static SEGMENT_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&SEGMENT_WEIGHTS));
pub(super) static ERROR_CODE_TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(&ERROR_CODE_WEIGHTS));
pub(super) static LANGUAGE_TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(&LANGUAGE_WEIGHTS));
pub(super) static CHARGE_TABLE: std::sync::LazyLock<Table> = std::sync::LazyLock::new(|| Table::new(&CHARGE_WEIGHTS));
