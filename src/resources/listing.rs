//! The query of `GET .../Recording/` (api.md 4.3, resources.md "Listing
//! recordings"): a raw query string and "now" in, a checked [`ListQuery`]
//! out. Every 400 of the listing is raised here.
//!
//! Time filters become one half-open range of `add_time` in microseconds:
//! `add_time__gt/gte` give the lower bound, `__lt/lte` the upper (missing
//! upper = now), a bare `add_time` the instant at the precision given.
//! `recording_storage_duration` filters are turned into the same kind of
//! range (days stored is a function of `add_time` and now).

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::DAY_US;
use crate::error::BadRequest;

/// Largest and default `limit`.
pub const MAX_LIMIT: u32 = 20;
/// The window without any time filter: 7 days before now.
pub const DEFAULT_WINDOW_US: i64 = 7 * DAY_US;
/// The longest `add_time` range: 30 days.
pub const MAX_ADD_TIME_SPAN_US: i64 = 30 * DAY_US;

/// Exact-match filters: query key and database column.
const EXACT: [(&str, &str); 8] = [
    ("from_number", "from_number"),
    ("to_number", "to_number"),
    ("subaccount", "subaccount_auth"),
    ("call_uuid", "call_uuid"),
    ("mpc_name", "mpc_name"),
    ("mpc_uuid", "mpc_uuid"),
    ("conference_name", "conference_name"),
    ("conference_uuid", "conference_uuid"),
];

const ADD_TIME: [&str; 5] = ["add_time", "add_time__gt", "add_time__gte", "add_time__lt", "add_time__lte"];

const STORAGE: [&str; 5] = [
    "recording_storage_duration",
    "recording_storage_duration__gt",
    "recording_storage_duration__gte",
    "recording_storage_duration__lt",
    "recording_storage_duration__lte",
];

/// A checked listing request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Exact filters: database column and value.
    pub exact: Vec<(&'static str, String)>,
    /// Inclusive lower bound of `add_time`, microseconds.
    pub lower_us: Option<i64>,
    /// Exclusive upper bound of `add_time`, microseconds.
    pub upper_us: Option<i64>,
    /// Results per page, 1 to 20.
    pub limit: u32,
    /// Results skipped.
    pub offset: u64,
    /// The filters as given (decoded), in a fixed key order, without
    /// `limit` and `offset`: what `meta.next`/`previous` repeat.
    pub filters: Vec<(String, String)>,
}

impl ListQuery {
    /// Parses the raw query string of a listing at `now_us`.
    pub fn parse(query: &str, now_us: i64) -> Result<ListQuery, BadRequest> {
        let query = query.strip_prefix('?').unwrap_or(query);
        let mut given: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            given.entry(key.into_owned()).or_default().push(value.into_owned());
        }
        let mut single = |key: &str| -> Result<Option<String>, BadRequest> {
            match given.remove(key).as_deref() {
                None => Ok(None),
                Some([first, rest @ ..]) if rest.iter().all(|v| v == first) => Ok(Some(first.clone())),
                Some(values) => Err(BadRequest::new(
                    key,
                    format!(
                        "parameter {key} is given more than once with different values ({}): give it once",
                        values.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
                    ),
                )),
            }
        };
        let mut out = ListQuery { limit: MAX_LIMIT, ..ListQuery::default() };
        for (key, column) in EXACT {
            if let Some(value) = single(key)?.filter(|v| !v.is_empty()) {
                out.filters.push((key.to_owned(), value.clone()));
                out.exact.push((column, value));
            }
        }
        let mut add_time = Vec::new();
        for key in ADD_TIME {
            if let Some(value) = single(key)? {
                add_time.push((key, value));
            }
        }
        let mut storage = Vec::new();
        for key in STORAGE {
            if let Some(value) = single(key)? {
                storage.push((key, value));
            }
        }
        if let Some(value) = single("limit")? {
            out.limit = parse_count(&value)
                .filter(|n| (1..=u64::from(MAX_LIMIT)).contains(n))
                .map(|n| n as u32)
                .ok_or_else(|| bad("limit", &value, "expected an integer from 1 to 20"))?;
        }
        if let Some(value) = single("offset")? {
            out.offset = parse_count(&value).ok_or_else(|| bad("offset", &value, "expected an integer 0 or more"))?;
        }
        match (add_time.is_empty(), storage.is_empty()) {
            (false, false) => {
                return Err(BadRequest::new(
                    "recording_storage_duration",
                    "recording_storage_duration filters cannot be combined with add_time filters",
                ))
            }
            (false, true) => out.add_time_range(&add_time, now_us)?,
            (true, false) => out.storage_range(&storage, now_us)?,
            (true, true) => {
                out.lower_us = Some(now_us - DEFAULT_WINDOW_US);
                out.upper_us = Some(now_us + 1);
            }
        }
        out.filters.extend(add_time.into_iter().chain(storage).map(|(k, v)| (k.to_owned(), v)));
        Ok(out)
    }

    fn narrow(&mut self, lower: Option<i64>, upper: Option<i64>) {
        if let Some(lower) = lower {
            self.lower_us = Some(self.lower_us.map_or(lower, |l| l.max(lower)));
        }
        if let Some(upper) = upper {
            self.upper_us = Some(self.upper_us.map_or(upper, |u| u.min(upper)));
        }
    }

    fn add_time_range(&mut self, given: &[(&str, String)], now_us: i64) -> Result<(), BadRequest> {
        for (key, value) in given {
            let (at, precision) = parse_add_time(value)
                .ok_or_else(|| bad(key, value, "expected a UTC time YYYY-MM-DD HH:MM[:ss[.uuuuuu]]"))?;
            match *key {
                "add_time" => self.narrow(Some(at), Some(at + precision)),
                "add_time__gt" => self.narrow(Some(at + 1), None),
                "add_time__gte" => self.narrow(Some(at), None),
                "add_time__lt" => self.narrow(None, Some(at)),
                _ => self.narrow(None, Some(at + 1)),
            }
        }
        let upper = self.upper_us.unwrap_or(now_us + 1);
        self.upper_us = Some(upper);
        let Some(lower) = self.lower_us else {
            return Err(BadRequest::new(
                "add_time",
                "an add_time range needs a lower bound (add_time__gt or add_time__gte): \
                 an add_time search may span at most 30 days",
            ));
        };
        // The range is [lower, upper): it spans from its first instant to
        // its last, one microsecond before `upper`.
        let span = upper - 1 - lower;
        if span > MAX_ADD_TIME_SPAN_US {
            return Err(BadRequest::new(
                "add_time",
                format!(
                    "the add_time range spans {} days; an add_time search may span at most 30 days",
                    (span + DAY_US - 1) / DAY_US
                ),
            ));
        }
        Ok(())
    }

    /// Days stored = 1 + whole days since `add_time` (1 before it), so
    /// `days >= k` means `add_time <= now - (k-1) days` and `days <= k`
    /// means `add_time > now - k days`.
    fn storage_range(&mut self, given: &[(&str, String)], now_us: i64) -> Result<(), BadRequest> {
        for (key, value) in given {
            let days = parse_count(value)
                .and_then(|d| i64::try_from(d).ok())
                .filter(|d| *d <= 1_000_000)
                .ok_or_else(|| bad(key, value, "expected a whole number of days from 0 to 1000000"))?;
            let (at_least, at_most) = match *key {
                "recording_storage_duration" => (Some(days), Some(days)),
                "recording_storage_duration__gt" => (Some(days + 1), None),
                "recording_storage_duration__gte" => (Some(days), None),
                "recording_storage_duration__lt" => (None, Some(days - 1)),
                _ => (None, Some(days)),
            };
            if let Some(k) = at_least.filter(|k| *k > 1) {
                self.narrow(None, Some(now_us - (k - 1) * DAY_US + 1));
            }
            match at_most {
                Some(k) if k < 1 => self.narrow(Some(0), Some(0)),
                Some(k) => self.narrow(Some(now_us - k * DAY_US + 1), None),
                None => {}
            }
        }
        Ok(())
    }
}

fn bad(key: &str, value: &str, allowed: &str) -> BadRequest {
    BadRequest::new(key, format!("invalid {key} '{value}': {allowed}"))
}

fn parse_count(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Parses `YYYY-MM-DD HH:MM[:ss[.uuuuuu]]` (UTC; `T` also accepted) into
/// microseconds and the precision given, in microseconds.
pub fn parse_add_time(text: &str) -> Option<(i64, i64)> {
    let b = text.as_bytes();
    if b.len() < 16 || !matches!(b[10], b' ' | b'T') || b[13] != b':' {
        return None;
    }
    let date = NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()?;
    let two = |s: &str| -> Option<u32> {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    let hour = two(text.get(11..13)?)?;
    let minute = two(text.get(14..16)?)?;
    let mut second = 0;
    let mut micros = 0i64;
    let mut precision = 60_000_000i64;
    let rest = text.get(16..)?;
    if !rest.is_empty() {
        let rest = rest.strip_prefix(':')?;
        second = two(rest.get(..2)?)?;
        precision = 1_000_000;
        let fraction = rest.get(2..)?;
        if !fraction.is_empty() {
            let digits = fraction.strip_prefix('.')?;
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let scale = 10i64.pow(6 - digits.len() as u32);
            micros = digits.parse::<i64>().ok()? * scale;
            precision = scale;
        }
    }
    let time = date.and_hms_opt(hour, minute, second)?;
    Some((time.and_utc().timestamp() * 1_000_000 + micros, precision))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_219_200_000_000; // 2026-11-21T00:00:00Z

    fn error(query: &str) -> String {
        ListQuery::parse(query, NOW).unwrap_err().message
    }

    #[test]
    fn defaults_to_the_last_seven_days_and_twenty_rows() {
        let q = ListQuery::parse("", NOW).unwrap();
        assert_eq!((q.limit, q.offset), (20, 0));
        assert_eq!((q.lower_us, q.upper_us), (Some(NOW - 7 * DAY_US), Some(NOW + 1)));
        let q =
            ListQuery::parse("call_uuid=C%201&subaccount=SA&limit=5&offset=10&unknown=1&from_number=", NOW).unwrap();
        assert_eq!(q.exact, [("subaccount_auth", "SA".to_owned()), ("call_uuid", "C 1".to_owned())]);
        assert_eq!((q.limit, q.offset), (5, 10));
    }

    #[test]
    fn refuses_bad_limits_and_offsets() {
        assert_eq!(error("limit=21"), "invalid limit '21': expected an integer from 1 to 20");
        assert_eq!(error("limit=0"), "invalid limit '0': expected an integer from 1 to 20");
        assert!(error("limit=abc").starts_with("invalid limit"));
        assert_eq!(error("offset=-1"), "invalid offset '-1': expected an integer 0 or more");
        assert!(error("limit=1&limit=2").contains("more than once"));
    }

    #[test]
    fn add_time_ranges_are_capped_at_thirty_days() {
        let q = ListQuery::parse("add_time__gte=2026-11-01%2000:00&add_time__lt=2026-11-20 00:00:00", NOW).unwrap();
        assert_eq!(q.lower_us, Some(NOW - 20 * DAY_US));
        assert_eq!(q.upper_us, Some(NOW - DAY_US));
        let q = ListQuery::parse("add_time__gt=2026-10-22 00:00", NOW).unwrap();
        assert_eq!(q.upper_us, Some(NOW + 1));
        assert_eq!(
            error("add_time__gt=2026-10-21 23:59"),
            "the add_time range spans 31 days; an add_time search may span at most 30 days"
        );
        // Exactly 30 days, up to now or to an inclusive upper bound.
        assert!(ListQuery::parse("add_time__gte=2026-10-22 00:00", NOW).is_ok());
        assert!(ListQuery::parse("add_time__gte=2026-10-01 00:00&add_time__lte=2026-10-31 00:00", NOW).is_ok());
        assert!(error("add_time__gte=2026-10-01 00:00&add_time__lte=2026-10-31 00:00:00.000001").contains("31 days"));
        assert!(error("add_time__lt=2026-11-20 00:00").contains("needs a lower bound"));
        assert!(error("add_time=2026-11-20").starts_with("invalid add_time '2026-11-20'"));
        assert!(error("add_time=2026-11-20 00:00&recording_storage_duration=3").contains("cannot be combined"));
    }

    #[test]
    fn a_bare_add_time_matches_at_the_precision_given() {
        let minute = ListQuery::parse("add_time=2026-11-20 13:45", NOW).unwrap();
        let start = NOW - DAY_US + (13 * 3600 + 45 * 60) * 1_000_000;
        assert_eq!((minute.lower_us, minute.upper_us), (Some(start), Some(start + 60_000_000)));
        let micro = ListQuery::parse("add_time=2026-11-20T13:45:01.000123", NOW).unwrap();
        assert_eq!((micro.lower_us, micro.upper_us), (Some(start + 1_000_123), Some(start + 1_000_124)));
        assert_eq!(parse_add_time("2026-11-20 13:45:01.5"), Some(((start + 1_500_000), 100_000)));
        assert_eq!(parse_add_time("2026-02-30 00:00"), None);
    }

    #[test]
    fn storage_duration_becomes_an_add_time_range() {
        // days stored = 1 + whole days since add_time.
        let q = ListQuery::parse("recording_storage_duration=3", NOW).unwrap();
        assert_eq!(q.lower_us, Some(NOW - 3 * DAY_US + 1));
        assert_eq!(q.upper_us, Some(NOW - 2 * DAY_US + 1));
        let q = ListQuery::parse("recording_storage_duration__gt=90", NOW).unwrap();
        assert_eq!((q.lower_us, q.upper_us), (None, Some(NOW - 90 * DAY_US + 1)));
        let q = ListQuery::parse("recording_storage_duration__lt=1", NOW).unwrap();
        assert_eq!((q.lower_us, q.upper_us), (Some(0), Some(0)));
        assert!(error("recording_storage_duration__gte=x").starts_with("invalid recording_storage_duration__gte 'x'"));
    }
}
