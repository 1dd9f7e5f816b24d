//! Spreadsheet output of a report: `usage.csv` and `other_charges.csv`
//! (`rejected.csv`, which `ingest` writes too, is `records::bad_rows`).
//!
//! The usage and charge files are written from the same wire items as the
//! JSON pages, so every cell is the exact text of the JSON value (no number
//! is reformatted). Fields the JSON omits are empty cells; the header uses
//! the api.md field names in the api.md order, after two columns the JSON
//! holds once per page: `auth_id` and `currency`, so that the files of
//! several accounts can be concatenated.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::summary::wire::{ChargeItem, UsageItem};

/// Columns of `usage.csv`: the account and its currency, then the usage
/// item fields of api.md section 2.3.
pub const USAGE_COLUMNS: [&str; 16] = [
    "auth_id",
    "currency",
    "from_date",
    "to_date",
    "product",
    "type",
    "subaccount_auth",
    "country",
    "direction",
    "total_units",
    "duration_seconds",
    "total_amount",
    "surcharge",
    "error_code",
    "hangup_cause",
    "error_reason",
];

/// Columns of `other_charges.csv`: the account and its currency, then the
/// other_charges item fields.
pub const CHARGE_COLUMNS: [&str; 7] =
    ["auth_id", "currency", "from_date", "to_date", "description", "total_units", "total_amount"];

/// The account a CSV file is about: its first two cells on every line.
#[derive(Clone, Copy, Debug)]
pub struct Account<'a> {
    /// The account's `auth_id`.
    pub auth_id: &'a str,
    /// The currency of its amounts.
    pub currency: &'a str,
}

/// `usage.csv` written row by row to `W` (a file, or a `Vec<u8>`), so a
/// report never holds a whole account's CSV in memory.
#[derive(Debug)]
pub struct UsageCsv<'a, W: Write> {
    writer: csv::Writer<W>,
    account: Account<'a>,
    path: PathBuf,
    number: String,
}

impl<'a, W: Write> UsageCsv<'a, W> {
    /// Writes the header; `path` names the file in error messages.
    pub fn new(sink: W, path: impl Into<PathBuf>, account: Account<'a>) -> Result<UsageCsv<'a, W>> {
        let mut csv = UsageCsv { writer: writer(sink), account, path: path.into(), number: String::new() };
        csv.writer.write_record(USAGE_COLUMNS).map_err(|e| csv.error(e))?;
        Ok(csv)
    }

    /// One line: every cell the exact text of the JSON value, empty when
    /// the JSON omits the field.
    pub fn row(&mut self, item: &UsageItem<'_>) -> Result<()> {
        let Account { auth_id, currency } = self.account;
        self.text(auth_id)?;
        self.text(currency)?;
        self.text(&item.from_date)?;
        self.text(&item.to_date)?;
        self.text(item.product)?;
        self.text(item.type_)?;
        self.text(item.subaccount_auth.unwrap_or_default())?;
        self.text(item.country.unwrap_or_default())?;
        self.text(item.direction.unwrap_or_default())?;
        self.number(Some(item.total_units))?;
        self.number(item.duration_seconds.map(|d| d.0))?;
        self.number(Some(item.total_amount.0))?;
        self.number(item.surcharge.map(|d| d.0))?;
        self.text(item.error_code.unwrap_or_default())?;
        self.text(item.hangup_cause.unwrap_or_default())?;
        self.text(item.error_reason.unwrap_or_default())?;
        self.writer.write_record(None::<&[u8]>).map_err(|e| self.error(e))
    }

    /// Flushes and hands the sink back.
    pub fn finish(self) -> Result<W> {
        let path = self.path;
        self.writer.into_inner().map_err(|e| Error::io(&path, e.into_error()))
    }

    fn text(&mut self, text: &str) -> Result<()> {
        self.writer.write_field(text).map_err(|e| self.error(e))
    }

    /// A number in its JSON form (`Display` of the value), or an empty cell.
    fn number(&mut self, value: Option<impl std::fmt::Display>) -> Result<()> {
        self.number.clear();
        if let Some(value) = value {
            let _ = write!(self.number, "{value}");
        }
        self.writer.write_field(&self.number).map_err(|e| self.error(e))
    }

    /// A write error, with the operating system's error as its source when
    /// there is one (so that a closed stdout reads as a broken pipe).
    fn error(&self, error: csv::Error) -> Error {
        if !error.is_io_error() {
            return Error::io(&self.path, error);
        }
        match error.into_kind() {
            csv::ErrorKind::Io(io) => Error::io(&self.path, io),
            other => Error::io(&self.path, format!("{other:?}")),
        }
    }
}

/// `usage.csv` of `account`'s `items`, in memory.
pub fn usage_csv<'a>(account: Account<'_>, items: impl IntoIterator<Item = &'a UsageItem<'a>>) -> Result<Vec<u8>> {
    let mut csv = UsageCsv::new(Vec::new(), "usage.csv", account)?;
    for item in items {
        csv.row(item)?;
    }
    csv.finish()
}

/// `other_charges.csv`: one header, then one line per item of `account`
/// (only the header when the request does not return other charges).
pub fn charges_csv<'a>(account: Account<'_>, items: impl IntoIterator<Item = &'a ChargeItem<'a>>) -> Result<Vec<u8>> {
    let mut writer = writer(Vec::new());
    write(&mut writer, CHARGE_COLUMNS)?;
    for item in items {
        let record = [
            account.auth_id.to_owned(),
            account.currency.to_owned(),
            item.from_date.clone(),
            item.to_date.clone(),
            item.description.to_owned(),
            item.total_units.to_string(),
            item.total_amount.0.to_json_number(),
        ];
        write(&mut writer, record)?;
    }
    finish(writer)
}

/// The one CSV dialect of every file here (the csv crate's defaults: comma,
/// `\n`, quotes only where needed), with a larger buffer.
fn writer<W: Write>(sink: W) -> csv::Writer<W> {
    csv::WriterBuilder::new().buffer_capacity(1 << 16).from_writer(sink)
}

fn write<I, T>(writer: &mut csv::Writer<Vec<u8>>, record: I) -> Result<()>
where
    I: IntoIterator<Item = T>,
    T: AsRef<[u8]>,
{
    writer.write_record(record).map_err(|e| Error::Internal(format!("cannot write CSV: {e}")))
}

fn finish(writer: csv::Writer<Vec<u8>>) -> Result<Vec<u8>> {
    writer.into_inner().map_err(|e| Error::Internal(format!("cannot write CSV: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::Amount;
    use crate::summary::wire::Decimal;

    fn amount(text: &str) -> Decimal {
        Decimal(Amount::parse(text.as_bytes()).unwrap())
    }

    #[test]
    fn omitted_fields_are_empty_cells_and_numbers_keep_their_json_text() {
        let message = UsageItem {
            from_date: "2026-11-20T00:00:00Z".into(),
            to_date: "2026-11-21T00:00:00Z".into(),
            product: "message",
            type_: "sms",
            subaccount_auth: None,
            country: Some("US"),
            direction: Some("outbound"),
            total_units: 3,
            duration_seconds: None,
            total_amount: amount("0.0255"),
            surcharge: amount("0").into(),
            error_code: Some("30"),
            hangup_cause: None,
            error_reason: Some("Spam Detected"),
        };
        let transcription = UsageItem {
            from_date: message.from_date.clone(),
            to_date: message.to_date.clone(),
            product: "transcription",
            type_: "standard, \"quoted\"",
            subaccount_auth: Some("SA1"),
            country: None,
            direction: None,
            total_units: 1,
            duration_seconds: Some(amount("12.500")),
            total_amount: amount("3"),
            surcharge: None,
            error_code: None,
            hangup_cause: None,
            error_reason: None,
        };
        let account = Account { auth_id: "MA1", currency: "EUR" };
        let text = String::from_utf8(usage_csv(account, [&message, &transcription]).unwrap()).unwrap();
        assert_eq!(
            text,
            "auth_id,currency,from_date,to_date,product,type,subaccount_auth,country,direction,total_units,\
             duration_seconds,total_amount,surcharge,error_code,hangup_cause,error_reason\n\
             MA1,EUR,2026-11-20T00:00:00Z,2026-11-21T00:00:00Z,message,sms,,US,outbound,3,,0.0255,0.0,30,,\
             Spam Detected\n\
             MA1,EUR,2026-11-20T00:00:00Z,2026-11-21T00:00:00Z,transcription,\"standard, \"\"quoted\"\"\",SA1,,,1,\
             12.5,3.0,,,,\n"
        );
    }

    #[test]
    fn charges_have_their_header_even_when_empty() {
        let account = Account { auth_id: "MA1", currency: "USD" };
        assert_eq!(
            charges_csv(account, []).unwrap(),
            b"auth_id,currency,from_date,to_date,description,total_units,total_amount\n"
        );
    }
}
