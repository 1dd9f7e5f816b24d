//! The raw record contract (`records.md`): what a row of each kind holds,
//! how a field of any input form becomes a typed value, and where the files
//! are.
//!
//! Readers ([`csv`], [`parquet`]) hand rows over as [`Field`]s in the
//! contract's column order; [`parse_record`] checks every column and yields
//! a borrowed [`Record`], the one typed shape every later stage trusts.

pub mod accounts;
pub mod csv;
pub mod dedup;
pub mod files;
pub mod parquet;

use std::fmt;

use xxhash_rust::xxh3::Xxh3;

use crate::money::{self, Amount};
use crate::time::Instant;

/// The four kinds of record folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `calls/`: voice and SIP-trunking call detail records.
    Calls,
    /// `messages/`: SMS / MMS records.
    Messages,
    /// `transcriptions/`.
    Transcriptions,
    /// `charges/`: non-telecom billing rows, reported as `other_charges`.
    Charges,
}

impl Kind {
    /// Every kind, in folder order.
    pub const ALL: [Kind; 4] = [Kind::Calls, Kind::Messages, Kind::Transcriptions, Kind::Charges];

    /// The folder name, also used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Calls => "calls",
            Kind::Messages => "messages",
            Kind::Transcriptions => "transcriptions",
            Kind::Charges => "charges",
        }
    }

    /// The contract's columns for this kind, in a fixed order that
    /// [`parse_record`] indexes.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Kind::Calls => &[
                "record_id",
                "auth_id",
                "subaccount_auth",
                "timestamp",
                "product",
                "type",
                "direction",
                "country",
                "billed_seconds",
                "amount",
                "surcharge",
                "hangup_cause",
            ],
            Kind::Messages => &[
                "record_id",
                "auth_id",
                "subaccount_auth",
                "timestamp",
                "type",
                "direction",
                "country",
                "segments",
                "amount",
                "surcharge",
                "error_code",
            ],
            Kind::Transcriptions => {
                &["record_id", "auth_id", "subaccount_auth", "timestamp", "type", "duration_seconds", "amount"]
            }
            Kind::Charges => &["record_id", "auth_id", "timestamp", "description", "units", "amount"],
        }
    }

    /// The contract type of column `index` of [`Kind::columns`].
    pub fn column_type(self, index: usize) -> ColumnType {
        let name = self.columns()[index];
        match name {
            "timestamp" => ColumnType::Timestamp,
            "billed_seconds" | "amount" | "surcharge" | "duration_seconds" => ColumnType::Decimal,
            "segments" | "units" => ColumnType::Count,
            _ => ColumnType::Text,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The physical shape a column is read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Ids, names, codes.
    Text,
    /// An RFC 3339 instant.
    Timestamp,
    /// An exact decimal.
    Decimal,
    /// A non-negative integer.
    Count,
}

/// A usage product, in the byte order of its name (the sort order of rows),
/// plus `Other` for charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Product {
    /// Messages.
    Message,
    /// Transcriptions.
    Transcription,
    /// Voice calls.
    Voice,
    /// SIP trunking calls.
    Zentrunk,
    /// Non-telecom charges (`other_charges`).
    Other,
}

impl Product {
    /// Every product, in name order.
    pub const ALL: [Product; 5] =
        [Product::Message, Product::Transcription, Product::Voice, Product::Zentrunk, Product::Other];

    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Product::Message => "message",
            Product::Transcription => "transcription",
            Product::Voice => "voice",
            Product::Zentrunk => "zentrunk",
            Product::Other => "other",
        }
    }

    /// Parses the API name, exactly.
    pub fn parse(text: &str) -> Option<Product> {
        Product::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// Whether rows of this product carry `country` and `direction`.
    pub fn has_country_and_direction(self) -> bool {
        matches!(self, Product::Message | Product::Voice | Product::Zentrunk)
    }

    /// Whether rows of this product carry `error_code`.
    pub fn has_error_code(self) -> bool {
        self == Product::Message
    }

    /// Whether rows of this product carry `hangup_cause`.
    pub fn has_hangup_cause(self) -> bool {
        matches!(self, Product::Voice | Product::Zentrunk)
    }
}

/// A set of products, `other` included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ProductSet(u8);

impl ProductSet {
    /// All five.
    pub const ALL: ProductSet = ProductSet(0b1_1111);

    /// The set with `product` added.
    pub fn with(self, product: Product) -> ProductSet {
        ProductSet(self.0 | 1 << product as u8)
    }

    /// Whether `product` is in the set.
    pub fn contains(self, product: Product) -> bool {
        self.0 & 1 << product as u8 != 0
    }

    /// The members, in name order.
    pub fn iter(self) -> impl Iterator<Item = Product> {
        Product::ALL.into_iter().filter(move |p| self.contains(*p))
    }
}

/// A call or message direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// `inbound`.
    Inbound,
    /// `outbound`.
    Outbound,
}

impl Direction {
    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }

    /// Parses the API name, exactly.
    pub fn parse(text: &[u8]) -> Option<Direction> {
        match text {
            b"inbound" => Some(Direction::Inbound),
            b"outbound" => Some(Direction::Outbound),
            _ => None,
        }
    }
}

/// An ISO 3166-1 alpha-2 code: two upper-case ASCII letters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Country([u8; 2]);

impl Country {
    /// Parses two upper-case letters.
    pub fn parse(text: &[u8]) -> Option<Country> {
        match text {
            [a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => Some(Country([*a, *b])),
            _ => None,
        }
    }

    /// The code as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

/// One field of a row as a reader found it.
#[derive(Clone, Copy, Debug)]
pub enum Field<'a> {
    /// No value (a Parquet null); read as the empty string.
    Null,
    /// Text, as in CSV or a Parquet string column.
    Text(&'a [u8]),
    /// Text the reader found to be printable ASCII (every byte in
    /// `0x20..=0x7e`): valid UTF-8 without control characters, so the
    /// checks for those are already done.
    Ascii(&'a str),
    /// A Parquet integer of any width, signed or unsigned.
    Int(i128),
    /// A Parquet DECIMAL: `unscaled * 10^-scale`.
    Decimal {
        /// The unscaled integer.
        unscaled: i128,
        /// Digits after the point.
        scale: usize,
    },
    /// A Parquet timestamp.
    Time(Instant),
}

impl<'a> Field<'a> {
    /// The bytes of a text field ([`Field::Text`] or [`Field::Ascii`]).
    #[inline]
    pub fn text_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Field::Text(bytes) => Some(bytes),
            Field::Ascii(text) => Some(text.as_bytes()),
            _ => None,
        }
    }

    /// The value as a person would read it, for messages.
    pub fn display(&self) -> String {
        match self {
            Field::Null => String::new(),
            Field::Text(t) => String::from_utf8_lossy(t).into_owned(),
            Field::Ascii(t) => (*t).to_owned(),
            Field::Int(i) => i.to_string(),
            Field::Decimal { unscaled, scale } => {
                let s = unscaled.abs().to_string();
                let sign = if *unscaled < 0 { "-" } else { "" };
                if *scale == 0 {
                    format!("{sign}{s}")
                } else if s.len() > *scale {
                    format!("{sign}{}.{}", &s[..s.len() - scale], &s[s.len() - scale..])
                } else {
                    format!("{sign}0.{}{s}", "0".repeat(scale - s.len()))
                }
            }
            Field::Time(t) => match t.to_datetime() {
                Some(dt) => dt.to_rfc3339(),
                None => format!("{}s", t.secs),
            },
        }
    }
}

/// A row checked against the contract, borrowing its text from the reader.
///
/// Charges use `type_` for their description and leave the usage-only
/// fields at their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Unique per record within its kind.
    pub record_id: &'a str,
    /// The parent account.
    pub auth_id: &'a str,
    /// The subaccount, or empty for parent-level usage.
    pub subaccount: &'a str,
    /// When it happened.
    pub timestamp: Instant,
    /// The product (`Other` for charges).
    pub product: Product,
    /// The sub-type (`sms`, `pstn`, ...), or a charge's description.
    pub type_: &'a str,
    /// Direction, for products that have one.
    pub direction: Option<Direction>,
    /// Country, `None` when empty or for products without one.
    pub country: Option<Country>,
    /// Units billed: segments, one per call or transcription, charge units.
    pub units: u64,
    /// Billed or recorded seconds, in nanos.
    pub duration: i64,
    /// Total charge, in nanos.
    pub amount: i64,
    /// Surcharge part of `amount`, in nanos.
    pub surcharge: i64,
    /// `error_code` of a message or `hangup_cause` of a call; may be empty.
    pub code: &'a str,
}

impl Record<'_> {
    /// A hash of every contract field, used to tell identical re-deliveries
    /// from conflicts. Input form does not matter: `0.50` and `0.5`, `Z` and
    /// `+00:00` hash alike.
    pub fn content_hash(&self) -> u64 {
        // The same bytes as the streaming form below, hashed in one call
        // from a stack buffer when they fit (XXH3's one-shot and streaming
        // digests of the same bytes agree).
        // (Small enough that zeroing it costs little: it is made per row.)
        const FIT: usize = 256;
        let texts = [self.auth_id, self.subaccount, self.type_, self.code];
        if texts.iter().map(|t| 8 + t.len()).sum::<usize>() + 8 + 4 + 4 + 32 <= FIT {
            let mut buf = [0u8; FIT];
            let mut at = 0;
            let mut put = |bytes: &[u8]| {
                buf[at..at + bytes.len()].copy_from_slice(bytes);
                at += bytes.len();
            };
            for text in texts {
                put(&(text.len() as u64).to_le_bytes());
                put(text.as_bytes());
            }
            put(&self.timestamp.secs.to_le_bytes());
            put(&self.timestamp.nanos.to_le_bytes());
            let country = self.country.map_or([0, 0], |c| c.0);
            put(&[self.product as u8, self.direction.map_or(0, |d| d as u8 + 1), country[0], country[1]]);
            for n in [self.units as i64, self.duration, self.amount, self.surcharge] {
                put(&n.to_le_bytes());
            }
            return xxhash_rust::xxh3::xxh3_64(&buf[..at]);
        }
        self.content_hash_streaming()
    }

    fn content_hash_streaming(&self) -> u64 {
        let mut h = Xxh3::new();
        for text in [self.auth_id, self.subaccount, self.type_, self.code] {
            h.update(&(text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        }
        h.update(&self.timestamp.secs.to_le_bytes());
        h.update(&self.timestamp.nanos.to_le_bytes());
        let country = self.country.map_or([0, 0], |c| c.0);
        h.update(&[self.product as u8, self.direction.map_or(0, |d| d as u8 + 1), country[0], country[1]]);
        for n in [self.units as i64, self.duration, self.amount, self.surcharge] {
            h.update(&n.to_le_bytes());
        }
        h.digest()
    }
}

/// Why one column of a row was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Index into [`Kind::columns`].
    pub column: usize,
    /// The value as read.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The longest id the contract allows, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// The largest count (`segments`, `units`) telemeter accepts: what a signed
/// 64-bit integer holds (the store's Int64 column, and Parquet's INT64).
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// The first UTC year a record's timestamp may fall in.
pub const FIRST_YEAR: i64 = 1678;

/// The last UTC year a record's timestamp may fall in. With
/// [`FIRST_YEAR`]: whole years that nanoseconds since the epoch in an `i64`
/// hold (the store's timestamp column, Arrow's and Parquet's usual one).
pub const LAST_YEAR: i64 = 2261;

/// Whether `t` lies in the years [`FIRST_YEAR`]..=[`LAST_YEAR`] (UTC).
#[inline]
pub fn timestamp_in_range(t: Instant) -> bool {
    const FIRST: Instant = Instant::start_of_year(FIRST_YEAR);
    const END: Instant = Instant::start_of_year(LAST_YEAR + 1);
    FIRST <= t && t < END
}

/// Checks one row of `kind`, given its fields in [`Kind::columns`] order.
pub fn parse_record<'a>(kind: Kind, fields: &[Field<'a>]) -> Result<Record<'a>, FieldError> {
    let f = |i: usize| fields[i];
    let mut record = Record {
        record_id: id(f(0), 0)?,
        auth_id: id(f(1), 1)?,
        subaccount: "",
        timestamp: Instant { secs: 0, nanos: 0 },
        product: Product::Other,
        type_: "",
        direction: None,
        country: None,
        units: 1,
        duration: 0,
        amount: 0,
        surcharge: 0,
        code: "",
    };
    match kind {
        Kind::Calls => {
            record.subaccount = optional_id(f(2), 2)?;
            record.timestamp = timestamp(f(3), 3)?;
            record.product = match text(f(4), 4)? {
                "voice" => Product::Voice,
                "zentrunk" => Product::Zentrunk,
                _ => return Err(refuse(f(4), 4, "is not a call product (expected voice or zentrunk)")),
            };
            record.type_ = id(f(5), 5)?;
            record.direction = Some(direction(f(6), 6)?);
            record.country = country(f(7), 7)?;
            record.duration = decimal(f(8), 8)?;
            record.amount = decimal(f(9), 9)?;
            record.surcharge = surcharge(f(10), 10, record.amount)?;
            record.code = text(f(11), 11)?;
        }
        Kind::Messages => {
            record.product = Product::Message;
            record.subaccount = optional_id(f(2), 2)?;
            record.timestamp = timestamp(f(3), 3)?;
            record.type_ = id(f(4), 4)?;
            record.direction = Some(direction(f(5), 5)?);
            record.country = country(f(6), 6)?;
            record.units = count(f(7), 7)?;
            if record.units == 0 {
                return Err(refuse(f(7), 7, "is not a segment count (at least 1)"));
            }
            record.amount = decimal(f(8), 8)?;
            record.surcharge = surcharge(f(9), 9, record.amount)?;
            record.code = text(f(10), 10)?;
        }
        Kind::Transcriptions => {
            record.product = Product::Transcription;
            record.subaccount = optional_id(f(2), 2)?;
            record.timestamp = timestamp(f(3), 3)?;
            record.type_ = id(f(4), 4)?;
            record.duration = decimal(f(5), 5)?;
            record.amount = decimal(f(6), 6)?;
        }
        Kind::Charges => {
            record.timestamp = timestamp(f(2), 2)?;
            record.type_ = text(f(3), 3)?;
            if record.type_.is_empty() {
                return Err(refuse(f(3), 3, "is empty; a charge needs a description"));
            }
            record.units = count(f(4), 4)?;
            record.amount = decimal(f(5), 5)?;
            if record.amount == 0 {
                return Err(refuse(f(5), 5, "is not greater than 0 (a charge is always positive)"));
            }
        }
    }
    Ok(record)
}

#[cold]
#[inline(never)]
fn refuse(field: Field<'_>, column: usize, reason: impl Into<String>) -> FieldError {
    FieldError { column, value: field.display(), reason: reason.into() }
}

/// A text column: valid UTF-8 without control characters (no contract
/// column holds a newline, a NUL, U+0085 or any other).
#[inline]
fn text(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    match field {
        Field::Null => Ok(""),
        Field::Ascii(text) => Ok(text),
        Field::Text(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|_| refuse(field, column, "is not valid UTF-8"))?;
            if has_control(bytes) {
                return Err(refuse(field, column, CONTROL));
            }
            Ok(text)
        }
        _ => Err(refuse(field, column, "is not text")),
    }
}

const CONTROL: &str = "contains a control character";

/// Whether UTF-8 `bytes` hold a control character (`char::is_control`:
/// U+0000..=U+001F, U+007F, and U+0080..=U+009F, which is `C2 80..=9F`).
#[inline]
fn has_control(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &b)| {
        b < 0x20 || b == 0x7f || (b == 0xc2 && bytes.get(i + 1).is_some_and(|next| (0x80..=0x9f).contains(next)))
    })
}

#[inline]
fn optional_id(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    if let Field::Ascii(value) = field {
        if value.len() <= MAX_ID_BYTES {
            return Ok(value);
        }
    }
    let value = text(field, column)?;
    if value.is_empty() {
        return Ok(value);
    }
    check_id(value).map_err(|reason| refuse(field, column, reason))?;
    Ok(value)
}

#[inline]
fn id(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    if let Field::Ascii(value) = field {
        if !value.is_empty() && value.len() <= MAX_ID_BYTES {
            return Ok(value);
        }
    }
    let value = text(field, column)?;
    if value.is_empty() {
        return Err(refuse(field, column, "is empty; expected an id"));
    }
    check_id(value).map_err(|reason| refuse(field, column, reason))?;
    Ok(value)
}

/// Checks the contract's id rules on a non-empty value.
pub fn check_id(value: &str) -> Result<(), &'static str> {
    if value.len() > MAX_ID_BYTES {
        return Err("is longer than 128 bytes");
    }
    // Printable ASCII (the usual id) has no control character.
    if value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Ok(());
    }
    if value.chars().any(char::is_control) {
        return Err(CONTROL);
    }
    Ok(())
}

#[inline]
fn timestamp(field: Field<'_>, column: usize) -> Result<Instant, FieldError> {
    let instant = match field {
        Field::Time(t) => t,
        Field::Text(bytes) => Instant::parse(bytes).map_err(|e| refuse(field, column, e.to_string()))?,
        Field::Ascii(text) => Instant::parse(text.as_bytes()).map_err(|e| refuse(field, column, e.to_string()))?,
        Field::Null => return Err(refuse(field, column, "is empty; expected a timestamp")),
        _ => return Err(refuse(field, column, "is not a timestamp")),
    };
    if !timestamp_in_range(instant) {
        return Err(refuse(
            field,
            column,
            format!("is outside the years {FIRST_YEAR} to {LAST_YEAR} (UTC) that telemeter accepts"),
        ));
    }
    Ok(instant)
}

#[inline]
fn decimal(field: Field<'_>, column: usize) -> Result<i64, FieldError> {
    let nanos = match field {
        Field::Text(bytes) => money::parse_nanos(bytes).map(|n| n as i128),
        Field::Ascii(text) => money::parse_nanos(text.as_bytes()).map(|n| n as i128),
        // At most u64::MAX: times 10^9 this cannot overflow an i128.
        Field::Int(i) if (0..=u64::MAX as i128).contains(&i) => Ok(i * money::SCALE),
        Field::Int(i) if i > 0 => Err(money::DecimalError::TooLarge),
        Field::Decimal { unscaled, scale } => Amount::from_unscaled(unscaled, scale).map(Amount::nanos),
        Field::Null => Err(money::DecimalError::Empty),
        _ => Err(money::DecimalError::NotADecimal),
    };
    match nanos {
        Ok(n) if n <= i64::MAX as i128 => Ok(n as i64),
        Ok(_) => Err(refuse(field, column, money::DecimalError::TooLarge.to_string())),
        Err(e) => Err(refuse(field, column, e.to_string())),
    }
}

#[inline]
fn surcharge(field: Field<'_>, column: usize, amount: i64) -> Result<i64, FieldError> {
    let value = decimal(field, column)?;
    if value > amount {
        return Err(refuse(field, column, format!("is more than the amount {}", Amount::from_nanos(amount as i128))));
    }
    Ok(value)
}

#[inline]
fn count(field: Field<'_>, column: usize) -> Result<u64, FieldError> {
    let too_large = || refuse(field, column, format!("is more than {MAX_COUNT}, the largest count telemeter accepts"));
    if let Some(bytes) = field.text_bytes().filter(|b| !b.is_empty() && b.iter().all(u8::is_ascii_digit)) {
        let mut value: u64 = 0;
        for &b in bytes {
            value = value.checked_mul(10).and_then(|v| v.checked_add((b - b'0') as u64)).ok_or_else(too_large)?;
        }
        return if value <= MAX_COUNT { Ok(value) } else { Err(too_large()) };
    }
    let value = match field {
        Field::Int(i) if i >= 0 => i,
        Field::Decimal { unscaled, scale: 0 } if unscaled >= 0 => unscaled,
        _ => return Err(refuse(field, column, "is not a count (a non-negative integer)")),
    };
    if value <= MAX_COUNT as i128 {
        Ok(value as u64)
    } else {
        Err(too_large())
    }
}

#[inline]
fn direction(field: Field<'_>, column: usize) -> Result<Direction, FieldError> {
    field
        .text_bytes()
        .and_then(Direction::parse)
        .ok_or_else(|| refuse(field, column, "is not a direction (inbound or outbound)"))
}

#[inline]
fn country(field: Field<'_>, column: usize) -> Result<Option<Country>, FieldError> {
    match field.text_bytes() {
        Some(b"") => Ok(None),
        Some(bytes) => Country::parse(bytes).map(Some).ok_or_else(|| {
            refuse(field, column, "is not a country (two upper-case letters, ISO 3166-1 alpha-2, or empty)")
        }),
        None if matches!(field, Field::Null) => Ok(None),
        None => Err(refuse(field, column, "is not a country")),
    }
}

/// The `record_id` of the row at `line` of `file`, read again (for error
/// messages, which carry only places until then).
pub fn record_id_at(file: &files::InputFile, line: u64) -> Option<String> {
    struct Probe {
        line: u64,
        found: Option<String>,
    }
    impl csv::RowSink for Probe {
        fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
            if line == self.line {
                self.found = Some(fields[0].display());
            }
            line < self.line
        }
        fn malformed(&mut self, line: u64, _: String, _: String) -> bool {
            line < self.line
        }
    }
    let mut probe = Probe { line, found: None };
    if file.format == files::Format::Parquet {
        parquet::read(file, file.kind, &mut probe).ok()?;
        return probe.found;
    }
    let bytes = csv::load(file).ok()?;
    let probes = csv::read(file, file.kind, &bytes, || Probe { line, found: None }).ok()?;
    probes.into_iter().find_map(|p| p.found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(values: &[&'static str]) -> Vec<Field<'static>> {
        values.iter().map(|v| Field::Text(v.as_bytes())).collect()
    }

    #[test]
    fn parses_a_call() {
        let fields = texts(&[
            "c1",
            "A1",
            "",
            "2026-11-20T13:45:01Z",
            "voice",
            "pstn",
            "outbound",
            "US",
            "61",
            "0.0170",
            "0.002",
            "4000",
        ]);
        let record = parse_record(Kind::Calls, &fields).unwrap();
        assert_eq!(record.product, Product::Voice);
        assert_eq!(record.amount, 17_000_000);
        assert_eq!(record.duration, 61_000_000_000);
        assert_eq!(record.code, "4000");
        assert_eq!(record.units, 1);
    }

    #[test]
    fn names_the_column_at_fault() {
        let cases: &[(Kind, &[&'static str], usize)] = &[
            (
                Kind::Calls,
                &["c1", "A1", "", "2026-11-20T13:45:01Z", "fax", "pstn", "outbound", "US", "1", "1", "0", ""],
                4,
            ),
            (
                Kind::Calls,
                &["c1", "A1", "", "2026-11-20T13:45:01Z", "voice", "pstn", "out", "US", "1", "1", "0", ""],
                6,
            ),
            (
                Kind::Calls,
                &["c1", "A1", "", "2026-11-20T13:45:01Z", "voice", "pstn", "inbound", "us", "1", "1", "0", ""],
                7,
            ),
            (
                Kind::Calls,
                &["c1", "A1", "", "2026-11-20T13:45:01Z", "voice", "pstn", "inbound", "US", "1", "1", "2", ""],
                10,
            ),
            (Kind::Messages, &["m1", "A1", "", "2026-11-20", "sms", "inbound", "US", "1", "1", "0", ""], 3),
            (Kind::Messages, &["m1", "A1", "", "2026-11-20T13:45:01Z", "sms", "inbound", "US", "0", "1", "0", ""], 7),
            (Kind::Messages, &["m1", "", "", "2026-11-20T13:45:01Z", "sms", "inbound", "US", "1", "1", "0", ""], 1),
            (Kind::Transcriptions, &["t1", "A1", "", "2026-11-20T13:45:01Z", "standard", "1.5", "1e3"], 6),
            (Kind::Charges, &["x1", "A1", "2026-11-20T13:45:01Z", "", "1", "1"], 3),
            (Kind::Charges, &["x1", "A1", "2026-11-20T13:45:01Z", "CNAM Lookup", "1", "0.0"], 5),
            (Kind::Charges, &["x1", "A1", "2026-11-20T13:45:01Z", "CNAM Lookup", "-1", "1"], 4),
            // The ranges the engine holds.
            (Kind::Charges, &["x1", "A1", "0000-01-01T00:00:00Z", "CNAM Lookup", "1", "1"], 2),
            (Kind::Charges, &["x1", "A1", "9999-12-31T23:59:59Z", "CNAM Lookup", "1", "1"], 2),
            (Kind::Charges, &["x1", "A1", "2026-11-20T13:45:01Z", "CNAM Lookup", "9223372036854775808", "1"], 4),
            (Kind::Charges, &["x1", "A1", "2026-11-20T13:45:01Z", "CNAM Lookup", "18446744073709551615", "1"], 4),
            (
                Kind::Messages,
                &["m1", "A1", "", "2026-11-20T13:45:01Z", "sms", "inbound", "US", "9223372036854775808", "1", "0", ""],
                7,
            ),
        ];
        for (kind, values, column) in cases {
            let error = parse_record(*kind, &texts(values)).unwrap_err();
            assert_eq!(error.column, *column, "{kind} {values:?}: {error:?}");
        }
    }

    #[test]
    fn control_characters_are_refused_in_every_text_column() {
        let call =
            ["c1", "A1", "S1", "2026-11-20T13:45:01Z", "voice", "pstn", "outbound", "US", "61", "0.017", "0", "4000"];
        let message = ["m1", "A1", "S1", "2026-11-20T13:45:01Z", "sms", "outbound", "US", "1", "0.5", "0", "30"];
        let charge = ["x1", "A1", "2026-11-20T13:45:01Z", "CNAM Lookup", "1", "0.5"];
        let cases: [(Kind, &[&str], &[usize]); 3] = [
            (Kind::Calls, &call, &[0, 1, 2, 5, 11]),
            (Kind::Messages, &message, &[0, 1, 2, 4, 10]),
            (Kind::Charges, &charge, &[0, 1, 3]),
        ];
        for (kind, values, columns) in cases {
            let fields: Vec<Field<'_>> = values.iter().map(|v| Field::Text(v.as_bytes())).collect();
            assert!(parse_record(kind, &fields).is_ok(), "{kind} {values:?}");
            for &column in columns {
                for control in ["\u{0}", "\u{85}", "\t", "\n", "\r", "\u{7f}", "\u{1b}"] {
                    let value = format!("a{control}b");
                    let mut fields = fields.clone();
                    fields[column] = Field::Text(value.as_bytes());
                    let error = parse_record(kind, &fields).expect_err(&format!("{kind} column {column}: {value:?}"));
                    assert_eq!(error.column, column, "{kind} {value:?}: {error:?}");
                    assert!(error.reason.contains("control character"), "{error:?}");
                }
            }
        }
    }

    #[test]
    fn content_hash_is_the_streaming_hash() {
        let long = "x".repeat(400);
        let rows: [&[&'static str]; 2] = [
            &[
                "c1",
                "A1",
                "S1",
                "2026-11-20T13:45:01.5Z",
                "voice",
                "pstn",
                "outbound",
                "US",
                "61",
                "0.017",
                "0.002",
                "4000",
            ],
            &["c1", "A1", "", "2026-11-20T13:45:01Z", "zentrunk", "sip", "inbound", "", "0", "0", "0", ""],
        ];
        for values in rows {
            let record = parse_record(Kind::Calls, &texts(values)).unwrap();
            assert_eq!(record.content_hash(), record.content_hash_streaming());
            let record = Record { code: &long, ..record };
            assert_eq!(record.content_hash(), record.content_hash_streaming());
        }
    }

    #[test]
    fn content_hash_ignores_the_input_form() {
        let a = texts(&["t1", "A1", "", "2026-11-20T13:45:01Z", "standard", "1.50", "0.5"]);
        let b = texts(&["t1", "A1", "", "2026-11-20 19:15:01+05:30", "standard", "1.5", "0.500"]);
        let c = texts(&["t1", "A1", "", "2026-11-20T13:45:01Z", "standard", "1.5", "0.6"]);
        let hash = |f: &[Field<'static>]| parse_record(Kind::Transcriptions, f).unwrap().content_hash();
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(hash(&a), hash(&c));
    }
}
