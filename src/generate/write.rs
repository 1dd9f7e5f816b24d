//! Writing a [`Plan`]'s files: CSV rows into one large buffer with
//! hand-rolled number formatting (no per-row allocation), or a Parquet file
//! with typed columns.

use std::io::Write;

use rand::Rng;
use rand_pcg::Pcg64Mcg;

use super::plan::*;
use super::{FilePlan, OutputFormat};
use crate::records::Kind;

impl Plan {
    /// Writes one file in the spec's format.
    pub fn write_file<W: Write>(&self, file: &FilePlan, out: W) -> std::io::Result<()> {
        self.write_file_counted(file, out, &|_| {})
    }

    /// Writes one file in the spec's format; `on_rows` hears the rows
    /// written, in steps (at each 4 MiB of CSV; a Parquet file's at its end).
    pub fn write_file_counted<W: Write>(&self, file: &FilePlan, out: W, on_rows: &dyn Fn(u64)) -> std::io::Result<()> {
        match self.spec.format {
            OutputFormat::Csv => self.write_csv(file, out, on_rows),
            OutputFormat::CsvGz => {
                let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
                self.write_csv(file, &mut encoder, on_rows)?;
                encoder.finish()?;
                Ok(())
            }
            OutputFormat::CsvZst => {
                let mut encoder = zstd::stream::Encoder::new(out, 1)?;
                self.write_csv(file, &mut encoder, on_rows)?;
                encoder.finish()?;
                Ok(())
            }
            OutputFormat::Parquet => {
                self.write_parquet(file, out)?;
                on_rows(file.unique + file.duplicates);
                Ok(())
            }
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
    pub(super) fn order(
        &self,
        file: &FilePlan,
        mut each: impl FnMut(u64) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
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

    pub(super) fn write_csv<W: Write>(
        &self,
        file: &FilePlan,
        mut out: W,
        on_rows: &dyn Fn(u64),
    ) -> std::io::Result<()> {
        const FLUSH_AT: usize = 4 << 20;
        let mut buf = Vec::with_capacity(FLUSH_AT + 4096);
        buf.extend_from_slice(header(file.kind).as_bytes());
        buf.push(b'\n');
        let mut rows = 0;
        self.order(file, |index| {
            let row = self.row(file.kind, index);
            self.push_csv(file.kind, &row, &mut buf);
            rows += 1;
            if buf.len() >= FLUSH_AT {
                out.write_all(&buf)?;
                buf.clear();
                on_rows(std::mem::take(&mut rows));
            }
            Ok(())
        })?;
        out.write_all(&buf)?;
        on_rows(rows);
        out.flush()
    }

    pub(super) fn push_csv(&self, kind: Kind, row: &Row, buf: &mut Vec<u8>) {
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
            Kind::Charges | Kind::Voids => {
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
    pub(super) fn push_timestamp(&self, buf: &mut Vec<u8>, row: &Row, separator: u8, suffix: &[u8]) {
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

    pub(super) fn write_parquet<W: Write>(&self, file: &FilePlan, out: W) -> std::io::Result<()> {
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
            Kind::Charges | Kind::Voids => {
                columns.push(text("description", &|r| r.code.to_owned()));
                columns.push(count("units", &|r| r.units as i64));
                columns.push(decimal("amount", &|r| fixed5(r.amount))?);
            }
        }
        let height = rows.len();
        let mut frame = DataFrame::new(height, columns).map_err(std::io::Error::other)?;
        ParquetWriter::new(out)
            .with_statistics(crate::parquet::STATISTICS)
            .finish(&mut frame)
            .map_err(std::io::Error::other)?;
        Ok(())
    }
}

/// The header of each kind. Messages use another column order and
/// transcriptions carry an extra column, as real exports do.
pub(super) fn header(kind: Kind) -> &'static str {
    match kind {
        Kind::Calls => "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause",
        Kind::Messages => "record_id,timestamp,auth_id,subaccount_auth,direction,type,country,segments,amount,surcharge,error_code",
        Kind::Transcriptions => "record_id,auth_id,subaccount_auth,timestamp,type,language,duration_seconds,amount",
        Kind::Charges | Kind::Voids => "record_id,auth_id,timestamp,description,units,amount",
    }
}

pub(super) fn push_text(buf: &mut Vec<u8>, text: &str) {
    buf.extend_from_slice(text.as_bytes());
    buf.push(b',');
}

pub(super) fn push_country(buf: &mut Vec<u8>, country: Option<[u8; 2]>) {
    if let Some(code) = country {
        buf.extend_from_slice(&code);
    }
    buf.push(b',');
}

pub(super) fn country_text(country: Option<[u8; 2]>) -> String {
    country.map(|c| String::from_utf8_lossy(&c).into_owned()).unwrap_or_default()
}

pub(super) fn push_u64(buf: &mut Vec<u8>, value: u64) {
    let mut digits = itoa::Buffer::new();
    buf.extend_from_slice(digits.format(value).as_bytes());
}

/// `value` in 1e-5 units as a decimal with five places: `0.01700`.
pub(super) fn push_fixed5(buf: &mut Vec<u8>, value: u64) {
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
