//! Checking a row against the contract (`records.md`): [`parse_record`]
//! turns a reader's [`Field`]s, in [`Kind::columns`] order, into a borrowed
//! [`Record`] or a [`FieldError`] naming the column, the value and why.
//!
//! This is the hottest code after the CSV reader: the usual printable-ASCII
//! field takes a fast path, and nothing is allocated unless a row is refused.

use xxhash_rust::xxh3::Xxh3;

use super::{Country, Direction, Field, Kind, Product};
use crate::money::{self, Amount};
use crate::time::Instant;

/// A row checked against the contract, borrowing its text from the reader.
///
/// Charges use `type_` for their description and leave the usage-only
/// fields at their defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// The `revision` column: 0 when missing or empty. The highest revision
    /// of a record id is its current version (`corrections.md`).
    pub revision: u64,
}

/// A row of `voids/`, checked: it withdraws the record `record_id` of
/// `kind` unless a version of a higher revision exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Void<'a> {
    /// The record withdrawn.
    pub record_id: &'a str,
    /// Its kind (a record kind, never `voids`).
    pub kind: Kind,
    /// Orders the void among the record's versions: at least 1.
    pub revision: u64,
    /// Why, for the audit trail; may be empty.
    pub reason: &'a str,
}

impl Void<'_> {
    /// A hash of what two voids of one record and revision must share to
    /// be duplicates: the reason.
    pub fn content_hash(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(self.reason.as_bytes(), VOID_SEED)
    }
}

/// The seed of a void's content hash, so that a void's hash is not a
/// record's.
const VOID_SEED: u64 = 0x766f_6964;

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

/// The longest value of a text column (`description`, `hangup_cause`,
/// `error_code`), in bytes: eight times an id. The contract gives these
/// no length; codes and labels are short, and a longer value is a bad row.
pub const MAX_TEXT_BYTES: usize = 1024;

/// The most characters of a refused value a message shows.
const MAX_SHOWN_CHARS: usize = 200;

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

/// Checks one row of `kind`, given its fields in [`Kind::columns`] order
/// (a field missing at the end is taken for an empty one).
pub fn parse_record<'a>(kind: Kind, fields: &[Field<'a>]) -> Result<Record<'a>, FieldError> {
    let f = |i: usize| fields.get(i).copied().unwrap_or(Field::Null);
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
        revision: 0,
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
            record.type_ = description(f(3), 3)?;
            if record.type_.is_empty() {
                return Err(refuse(f(3), 3, "is empty; a charge needs a description"));
            }
            record.units = count(f(4), 4)?;
            record.amount = decimal(f(5), 5)?;
            if record.amount == 0 {
                return Err(refuse(f(5), 5, "is not greater than 0 (a charge is always positive)"));
            }
        }
        Kind::Voids => return Err(refuse(f(0), 0, "is a void, not a record (read voids with parse_void)")),
    }
    if let Some(&field) = fields.get(kind.columns().len()) {
        record.revision = revision(field, kind.columns().len())?;
    }
    Ok(record)
}

/// The optional `revision` of a record: empty is 0.
#[inline]
fn revision(field: Field<'_>, column: usize) -> Result<u64, FieldError> {
    match field {
        Field::Null => Ok(0),
        Field::Ascii("") => Ok(0),
        Field::Text(b"") => Ok(0),
        _ => count(field, column),
    }
}

/// Checks one row of `voids/`, given its fields in [`Kind::columns`] order
/// (`reason` after them when the file has it; a field missing at the end
/// is taken for an empty one).
pub fn parse_void<'a>(fields: &[Field<'a>]) -> Result<Void<'a>, FieldError> {
    let f = |i: usize| fields.get(i).copied().unwrap_or(Field::Null);
    let record_id = id(f(0), 0)?;
    let kind = text(f(1), 1)?;
    let kind = Kind::of_name(kind)
        .ok_or_else(|| refuse(f(1), 1, "is not a record kind (expected calls, messages, transcriptions or charges)"))?;
    let revision = match f(2) {
        Field::Null | Field::Ascii("") | Field::Text(b"") => {
            return Err(refuse(f(2), 2, "is empty; a void needs a revision of at least 1"))
        }
        field => count(field, 2)?,
    };
    if revision == 0 {
        return Err(refuse(f(2), 2, "is not a void's revision (at least 1)"));
    }
    let reason = match fields.get(3) {
        Some(&field) => text(field, 3)?,
        None => "",
    };
    Ok(Void { record_id, kind, revision, reason })
}

#[cold]
#[inline(never)]
fn refuse(field: Field<'_>, column: usize, reason: impl Into<String>) -> FieldError {
    FieldError { column, value: shown(field.display()), reason: reason.into() }
}

/// A refused value as a message shows it: whole up to
/// [`MAX_SHOWN_CHARS`] characters, else its start and its size.
fn shown(value: String) -> String {
    match value.char_indices().nth(MAX_SHOWN_CHARS) {
        None => value,
        Some((end, _)) => format!("{}... ({} bytes in all)", &value[..end], value.len()),
    }
}

/// A text column: valid UTF-8 without control characters (no id or code
/// holds a newline, a NUL, U+0085 or any other).
#[inline]
fn text(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    text_with::<false>(field, column)
}

/// A charge's description: a text column that may also hold tabs and
/// line breaks (a customer-facing label; a quoted field may span lines),
/// but no other control character.
fn description(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    text_with::<true>(field, column)
}

/// [`text`], tabs and line breaks allowed when `BREAKS`.
#[inline]
fn text_with<const BREAKS: bool>(field: Field<'_>, column: usize) -> Result<&str, FieldError> {
    match field {
        Field::Null => Ok(""),
        Field::Ascii(text) if text.len() <= MAX_TEXT_BYTES => Ok(text),
        Field::Ascii(_) => Err(too_long(field, column)),
        Field::Text(bytes) if bytes.len() > MAX_TEXT_BYTES => Err(too_long(field, column)),
        Field::Text(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|_| refuse(field, column, "is not valid UTF-8"))?;
            if has_control::<BREAKS>(bytes) {
                return Err(refuse(field, column, CONTROL));
            }
            Ok(text)
        }
        _ => Err(refuse(field, column, "is not text")),
    }
}

#[cold]
fn too_long(field: Field<'_>, column: usize) -> FieldError {
    refuse(field, column, format!("is longer than {MAX_TEXT_BYTES} bytes, the most a text column may hold"))
}

const CONTROL: &str = "contains a control character";

/// Whether UTF-8 `bytes` hold a control character (`char::is_control`:
/// U+0000..=U+001F, U+007F, and U+0080..=U+009F, which is `C2 80..=9F`);
/// tabs and line breaks aside when `BREAKS`.
#[inline]
fn has_control<const BREAKS: bool>(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &b)| {
        (b < 0x20 && !(BREAKS && matches!(b, b'\t' | b'\n' | b'\r')))
            || b == 0x7f
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|next| (0x80..=0x9f).contains(next)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(values: &[&'static str]) -> Vec<Field<'static>> {
        values.iter().map(|v| Field::Text(v.as_bytes())).collect()
    }

    /// A call's fields (hangup cause 4000).
    const CALL: [&str; 12] =
        ["c1", "A1", "", "2026-11-20T13:45:01Z", "voice", "pstn", "outbound", "US", "61", "0.0170", "0.002", "4000"];

    /// A short row is refused, not a panic: its missing fields are empty.
    #[test]
    fn a_short_row_is_an_error() {
        let error = parse_record(Kind::Calls, &texts(&CALL[..3])).expect_err("refused");
        assert_eq!(error.column, 3, "{error:?}");
        assert!(parse_record(Kind::Calls, &[]).is_err());
        assert!(parse_void(&texts(&["c1"])).is_err());
    }

    #[test]
    fn parses_a_call() {
        let fields = texts(&CALL);
        let record = parse_record(Kind::Calls, &fields).unwrap();
        assert_eq!(record.product, Product::Voice);
        assert_eq!(record.amount, 17_000_000);
        assert_eq!(record.duration, 61_000_000_000);
        assert_eq!(record.code, "4000");
        assert_eq!(record.units, 1);
    }

    /// A text column holds up to [`MAX_TEXT_BYTES`]; a longer value is
    /// refused, in either field form, and the message shows its start.
    #[test]
    fn a_text_past_its_limit_is_refused_and_shown_cut() {
        let call = |code: &'static str, ascii: bool| {
            let mut fields = texts(&CALL);
            fields[11] = if ascii { Field::Ascii(code) } else { Field::Text(code.as_bytes()) };
            parse_record(Kind::Calls, &fields).map(|record| record.code.len())
        };
        let at_limit: &'static str = "4".repeat(MAX_TEXT_BYTES).leak();
        let past: &'static str = "\u{e9}".repeat(25 << 20).leak();
        for ascii in [true, false] {
            assert_eq!(call(at_limit, ascii), Ok(MAX_TEXT_BYTES));
        }
        let error = call(past, false).expect_err("refused");
        assert_eq!(error.column, 11);
        assert_eq!(error.reason, "is longer than 1024 bytes, the most a text column may hold");
        assert_eq!(error.value, format!("{}... (52428800 bytes in all)", "\u{e9}".repeat(200)));
        let error = call(at_limit.repeat(2).leak(), true);
        assert!(error.is_err_and(|e| e.value.len() < 300), "cut");
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
                    // A charge's description is a label that may hold tabs
                    // and line breaks (a quoted field may span lines).
                    if kind == Kind::Charges && column == 3 && ["\t", "\n", "\r"].contains(&control) {
                        let record = parse_record(kind, &fields).expect("a description with a line break");
                        assert_eq!(record.type_, value);
                        continue;
                    }
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
