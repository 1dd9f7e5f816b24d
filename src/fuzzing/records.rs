//! The field checks' target ([`record_checks`]).

use crate::money::{Amount, SCALE};
use crate::records::{self, Field, Kind, Record};

// ------------------------------------------------------------- record_checks

/// One row's fields: the first byte picks the kind (`& 3`); the rest is
/// split at `0xFF` bytes (never part of UTF-8) into the kind's columns,
/// missing ones empty.
pub fn record_checks(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else { return };
    let kind = Kind::ALL[(control & 3) as usize];
    let width = kind.columns().len();
    let mut values: Vec<&[u8]> = rest.split(|b| *b == 0xFF).take(width).collect();
    values.resize(width, b"");
    let text: Vec<Field<'_>> = values.iter().map(|v| Field::Text(v)).collect();
    let result = records::parse_record(kind, &text);

    // The readers' other forms of the same values agree: printable ASCII
    // handed over as `Ascii`, empty values as Parquet nulls.
    let ascii: Vec<Field<'_>> = values
        .iter()
        .map(|v| match std::str::from_utf8(v) {
            Ok(s) if v.iter().all(|b| (0x20..=0x7e).contains(b)) => Field::Ascii(s),
            _ => Field::Text(v),
        })
        .collect();
    assert_eq!(records::parse_record(kind, &ascii), result, "Ascii and Text forms disagree");
    let nulls: Vec<Field<'_>> =
        values.iter().map(|v| if v.is_empty() { Field::Null } else { Field::Text(v) }).collect();
    match (records::parse_record(kind, &nulls), &result) {
        (Ok(a), Ok(b)) => assert_eq!(&a, b, "a null and an empty value read differently"),
        (Err(a), Err(b)) => assert_eq!(a.column, b.column, "a null and an empty value refused at different columns"),
        (a, b) => panic!("a null and an empty value disagree: {a:?} / {b:?}"),
    }

    match result {
        Ok(record) => check_record(kind, &record),
        Err(e) => {
            assert!(e.column < width, "{e:?}");
            assert!(!e.reason.is_empty(), "{e:?}");
        }
    }
}

fn check_record(kind: Kind, record: &Record<'_>) {
    for id in [record.record_id, record.auth_id] {
        assert!(!id.is_empty() && records::check_id(id).is_ok(), "bad id {id:?}");
    }
    assert!(record.subaccount.is_empty() || records::check_id(record.subaccount).is_ok());
    assert!(record.timestamp.nanos < 1_000_000_000);
    assert!(record.amount >= 0 && record.duration >= 0 && record.surcharge >= 0, "{record:?}");
    assert!(record.surcharge <= record.amount, "{record:?}");
    match kind {
        Kind::Messages => assert!(record.units >= 1),
        Kind::Calls | Kind::Transcriptions => assert_eq!(record.units, 1),
        Kind::Charges | Kind::Voids => assert!(record.amount > 0 && !record.type_.is_empty()),
    }

    // Its canonical text reads back to the same record.
    let Some(time) = record.timestamp.to_datetime() else { panic!("{record:?}: not a chrono instant") };
    let time = time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let decimal = |n: i64| Amount::from_nanos(n as i128).to_plain_string();
    let units = record.units.to_string();
    let (amount, surcharge, duration) = (decimal(record.amount), decimal(record.surcharge), decimal(record.duration));
    let direction = record.direction.map_or("", |d| d.as_str());
    let country = record.country.as_ref().map_or("", |c| c.as_str());
    let texts: Vec<&str> = match kind {
        Kind::Calls => vec![
            record.record_id,
            record.auth_id,
            record.subaccount,
            &time,
            record.product.as_str(),
            record.type_,
            direction,
            country,
            &duration,
            &amount,
            &surcharge,
            record.code,
        ],
        Kind::Messages => vec![
            record.record_id,
            record.auth_id,
            record.subaccount,
            &time,
            record.type_,
            direction,
            country,
            &units,
            &amount,
            &surcharge,
            record.code,
        ],
        Kind::Transcriptions => {
            vec![record.record_id, record.auth_id, record.subaccount, &time, record.type_, &duration, &amount]
        }
        Kind::Charges | Kind::Voids => vec![record.record_id, record.auth_id, &time, record.type_, &units, &amount],
    };
    // A four-digit year only (an offset can carry a record across year 0 or
    // 9999; such an instant is held, but has no canonical text to compare).
    if (0..=9999).contains(&chrono::Datelike::year(&record.timestamp.to_datetime().unwrap_or_default())) {
        let fields: Vec<Field<'_>> = texts.iter().map(|t| Field::Text(t.as_bytes())).collect();
        match records::parse_record(kind, &fields) {
            Ok(again) => {
                assert_eq!(&again, record, "the canonical text reads differently");
                assert_eq!(again.content_hash(), record.content_hash());
            }
            Err(e) => panic!("the canonical text {texts:?} of {record:?} is refused: {e:?}"),
        }
    }

    // So do Parquet-typed fields: timestamps, decimals, integer counts.
    let columns = kind.columns();
    let fields: Vec<Field<'_>> = texts
        .iter()
        .zip(columns)
        .map(|(text, column)| match *column {
            "timestamp" => Field::Time(record.timestamp),
            "amount" => Field::Decimal { unscaled: record.amount as i128, scale: 9 },
            "surcharge" => Field::Decimal { unscaled: record.surcharge as i128 * 1000, scale: 12 },
            "billed_seconds" | "duration_seconds" if record.duration as i128 % SCALE == 0 => {
                Field::Int(record.duration as i128 / SCALE)
            }
            "billed_seconds" | "duration_seconds" => Field::Decimal { unscaled: record.duration as i128, scale: 9 },
            "segments" | "units" => Field::Int(record.units as i128),
            _ if text.is_empty() => Field::Null,
            _ => Field::Text(text.as_bytes()),
        })
        .collect();
    match records::parse_record(kind, &fields) {
        Ok(again) => assert_eq!(&again, record, "typed fields read differently"),
        Err(e) => panic!("typed fields of {record:?} are refused: {e:?}"),
    }
}
