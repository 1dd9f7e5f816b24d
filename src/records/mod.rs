//! The raw record contract (`records.md`): what a row of each kind holds,
//! how a field of any input form becomes a typed value, and where the files
//! are.
//!
//! Readers ([`csv`], [`parquet`]) hand rows over as [`Field`]s in the
//! contract's column order; [`parse_record`] checks every column and yields
//! a borrowed [`Record`], the one typed shape every later stage trusts
//! (`check.rs`). [`decode`] is the one decoder of input files (gzip, zstd,
//! the BOM); [`pieces`] a file read a run of lines at a time; [`bad_rows`]
//! what happens to a row that breaks the contract, and the one
//! `rejected.csv` of every command.

pub mod account_token;
pub mod accounts;
pub mod allowlist;
pub mod bad_rows;
mod check;
pub mod csv;
pub mod decode;
pub mod dedup;
pub mod files;
pub mod parquet;
pub mod pieces;
pub(crate) mod simd;
pub mod split;

use std::fmt;

pub use check::{
    check_id, parse_record, parse_void, timestamp_in_range, FieldError, Record, Void, FIRST_YEAR, LAST_YEAR, MAX_COUNT,
    MAX_ID_BYTES, MAX_TEXT_BYTES,
};

use crate::time::Instant;

/// The folders of a data directory: the four kinds of record, and
/// `voids/`, whose rows withdraw records (`corrections.md`).
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
    /// `voids/`: rows that withdraw a record of another kind.
    Voids,
}

impl Kind {
    /// Every kind, in folder order.
    pub const ALL: [Kind; 4] = [Kind::Calls, Kind::Messages, Kind::Transcriptions, Kind::Charges];

    /// Every folder a data directory may hold rows in: the record kinds,
    /// then `voids/`.
    pub const FOLDERS: [Kind; 5] = [Kind::Calls, Kind::Messages, Kind::Transcriptions, Kind::Charges, Kind::Voids];

    /// The record kind named `name` (not `voids`).
    pub fn of_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The folder name, also used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Calls => "calls",
            Kind::Messages => "messages",
            Kind::Transcriptions => "transcriptions",
            Kind::Charges => "charges",
            Kind::Voids => "voids",
        }
    }

    /// The contract's required columns for this kind, in a fixed order that
    /// [`parse_record`] indexes. Readers hand over these, then
    /// [`Kind::optional_column`] when the file has it.
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
            Kind::Voids => &["record_id", "kind", "revision"],
        }
    }

    /// The one column a file of this kind may leave out: `revision` of a
    /// record (missing means revision 0), `reason` of a void (missing means
    /// no reason). Readers hand it over after [`Kind::columns`] when the
    /// file has it, so a row's fields are one more than the columns.
    pub fn optional_column(self) -> &'static str {
        match self {
            Kind::Voids => "reason",
            _ => "revision",
        }
    }

    /// The name of column `index`: of [`Kind::columns`], then
    /// [`Kind::optional_column`].
    pub fn column_name(self, index: usize) -> &'static str {
        self.columns().get(index).copied().unwrap_or_else(|| self.optional_column())
    }

    /// The contract type of column `index` of [`Kind::columns`].
    pub fn column_type(self, index: usize) -> ColumnType {
        let name = self.column_name(index);
        match name {
            "timestamp" => ColumnType::Timestamp,
            "billed_seconds" | "amount" | "surcharge" | "duration_seconds" => ColumnType::Decimal,
            "segments" | "units" | "revision" => ColumnType::Count,
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

    /// What its `usage` counts, plural: message segments, calls (voice and
    /// zentrunk), transcriptions, or a charge's units.
    pub fn unit(self) -> &'static str {
        match self {
            Product::Message => "segments",
            Product::Voice | Product::Zentrunk => "calls",
            Product::Transcription => "transcriptions",
            Product::Other => "units",
        }
    }

    /// Whether rows of this product carry a duration (billed or recorded
    /// seconds).
    pub fn has_duration(self) -> bool {
        matches!(self, Product::Voice | Product::Zentrunk | Product::Transcription)
    }
}

/// A row's closed dimensions: its product, direction and country, which the
/// store's own binary files (ingest spill rows, Spark's checked rows) hold
/// in four bytes ([`Closed::codes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed {
    /// The product.
    pub product: Product,
    /// The direction, if any.
    pub direction: Option<Direction>,
    /// The country, if any.
    pub country: Option<Country>,
}

impl Closed {
    /// The four bytes: the product's place in [`Product::ALL`], the
    /// direction (0 none, 1 inbound, 2 outbound), the country's two
    /// letters (zeros for none).
    pub fn codes(&self) -> [u8; 4] {
        let direction = match self.direction {
            None => 0,
            Some(Direction::Inbound) => 1,
            Some(Direction::Outbound) => 2,
        };
        let [a, b] = self.country.map_or([0, 0], |country| country.0);
        [self.product as u8, direction, a, b]
    }

    /// The dimensions of [`Closed::codes`]; `None` when a byte is no value
    /// of its field.
    pub fn from_codes([product, direction, a, b]: [u8; 4]) -> Option<Closed> {
        Some(Closed {
            product: *Product::ALL.get(usize::from(product))?,
            direction: match direction {
                0 => None,
                1 => Some(Direction::Inbound),
                2 => Some(Direction::Outbound),
                _ => return None,
            },
            country: match [a, b] {
                [0, 0] => None,
                letters => Some(Country::parse(&letters)?),
            },
        })
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

    /// The code's place among the 676 codes AA..ZZ (a small integer, one
    /// per code: a column can find its dictionary key by it).
    pub fn index(self) -> usize {
        let [a, b] = self.0;
        usize::from(a.wrapping_sub(b'A')) * 26 + usize::from(b.wrapping_sub(b'A'))
    }

    /// The code's two letters.
    pub fn as_bytes(&self) -> &[u8; 2] {
        &self.0
    }

    /// The code as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("??")
    }

    /// The code as text from one static table of every code: equal codes
    /// are the same slice (what a writer that remembers slices by address
    /// wants), and the text outlives the value.
    pub fn as_static_str(self) -> &'static str {
        // Every code, "AAABAC...ZZ", checked as UTF-8 once, at compile time.
        const BYTES: [u8; 2 * 26 * 26] = {
            let mut codes = [0u8; 2 * 26 * 26];
            let mut i = 0;
            while i < 26 * 26 {
                codes[2 * i] = b'A' + (i / 26) as u8;
                codes[2 * i + 1] = b'A' + (i % 26) as u8;
                i += 1;
            }
            codes
        };
        static CODES: &str = match std::str::from_utf8(&BYTES) {
            Ok(codes) => codes,
            Err(_) => panic!("country codes are ASCII"),
        };
        let [a, b] = self.0;
        if !(a.is_ascii_uppercase() && b.is_ascii_uppercase()) {
            return "??";
        }
        let at = 2 * (usize::from(a - b'A') * 26 + usize::from(b - b'A'));
        CODES.get(at..at + 2).unwrap_or("??")
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

/// The `record_id` of the row at `line` of `file`, read again (for error
/// messages, which carry only places until then): `None` when no row is
/// there, an error when the file cannot be read again.
pub fn record_id_at(file: &files::InputFile, line: u64) -> crate::error::Result<Option<String>> {
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
        fn malformed(&mut self, line: u64, _: &str, _: String, _: String) -> bool {
            line < self.line
        }
        fn unframed(&mut self, line: u64, _: &str, _: String, _: String) -> bool {
            line < self.line
        }
    }
    let mut probe = Probe { line, found: None };
    if file.format == files::Format::Parquet {
        parquet::read(file, &mut probe)?;
        return Ok(probe.found);
    }
    let bytes = decode::read(&file.path, file.format).map_err(|e| file.renamed(e))?;
    let probes = csv::read(file, &bytes, || Probe { line, found: None })?;
    Ok(probes.into_iter().find_map(|p| p.found))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every product, direction and country goes to its documented four
    /// bytes and back; a byte that is no value of its field is refused.
    #[test]
    fn closed_dimensions_go_to_four_bytes_and_back() {
        let directions = [(None, 0), (Some(Direction::Inbound), 1), (Some(Direction::Outbound), 2)];
        let countries = [(None, [0, 0]), (Country::parse(b"US"), *b"US"), (Country::parse(b"ZZ"), *b"ZZ")];
        for (p, product) in Product::ALL.into_iter().enumerate() {
            for (direction, d) in directions {
                for (country, [a, b]) in countries {
                    let closed = Closed { product, direction, country };
                    assert_eq!(closed.codes(), [p as u8, d, a, b]);
                    assert_eq!(Closed::from_codes(closed.codes()), Some(closed));
                }
            }
        }
        for bad in [[5, 0, 0, 0], [0, 3, 0, 0], [0, 0, b'U', 0], [0, 0, b'u', b's'], [0, 0, 0, b'S']] {
            assert_eq!(Closed::from_codes(bad), None, "{bad:?}");
        }
    }

    /// Every code's static text is its text, and equal codes share it.
    #[test]
    fn static_country_text_is_the_code() {
        for a in b'A'..=b'Z' {
            for b in b'A'..=b'Z' {
                let country = Country::parse(&[a, b]).expect("a code");
                assert_eq!(country.as_static_str(), country.as_str());
                assert_eq!(country.as_static_str().as_ptr(), Country([a, b]).as_static_str().as_ptr());
            }
        }
        assert_eq!(Country([b'a', b'Z']).as_static_str(), "??");
    }
}
