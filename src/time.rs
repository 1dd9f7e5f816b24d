//! Instants, dates, granularities, windows and buckets.
//!
//! Record timestamps are parsed by hand (this is on the hot path) into
//! [`Instant`]: whole UTC seconds plus nanoseconds. A report window is a
//! pair of local dates in a time zone; its buckets are precomputed once as a
//! sorted list of UTC boundaries ([`Buckets`]), so that placing a record is a
//! binary search and clipping a bucket to the window comes for free (the
//! first and last boundaries are the window's own ends).

use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// A UTC instant: seconds since the Unix epoch and the nanoseconds within.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub secs: i64,
    /// Nanoseconds within the second, below 1e9.
    pub nanos: u32,
}

/// The instants from `start` (included) to `end` (excluded), UTC seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The first second.
    pub start: i64,
    /// The second after the last.
    pub end: i64,
}

impl Interval {
    /// Every second.
    pub const ALL: Interval = Interval { start: i64::MIN, end: i64::MAX };
}

/// A window's first and last dates, local to its time zone (`to`
/// excluded, as a request's `to_date`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dates {
    /// The first date.
    pub from: NaiveDate,
    /// The date after the last.
    pub to: NaiveDate,
}

/// Why a timestamp string was refused; prints as the reason alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Not of the shape `YYYY-MM-DD[T ]HH:MM:SS[.fraction][Z|±HH:MM]`.
    #[error("is not an RFC 3339 timestamp (e.g. 2026-11-20T13:45:01Z or 2026-11-20 13:45:01.250+05:30)")]
    Shape,
    /// A date off the calendar (`2026-02-29`, month 13).
    #[error("is {0}")]
    Date(DateError),
    /// Second 60 (a leap second).
    #[error("has second 60 (a leap second): Unix time has no leap seconds; seconds are 00 to 59")]
    LeapSecond,
    /// An hour, minute or second out of range.
    #[error("is not a time of day (hours are 00 to 23, minutes and seconds 00 to 59)")]
    Time,
    /// More fractional digits than nanoseconds hold.
    #[error("has {0} fractional digits: at most 9 (nanoseconds) are accepted")]
    Fraction(usize),
    /// An offset past 23:59.
    #[error("has an offset out of range (at most ±23:59)")]
    Offset,
}

impl Instant {
    /// Parses `YYYY-MM-DD[T ]HH:MM:SS[.fraction][Z|±HH:MM]`; no offset
    /// means UTC. The fraction has one to nine digits.
    pub fn parse(text: &[u8]) -> Result<Instant, TimestampError> {
        let t = text;
        if t.len() < 19 {
            return Err(TimestampError::Shape);
        }
        let year = digits(&t[0..4])? as i64;
        let month = digits(&t[5..7])?;
        let day = digits(&t[8..10])?;
        let hour = digits(&t[11..13])?;
        let minute = digits(&t[14..16])?;
        let second = digits(&t[17..19])?;
        if t[4] != b'-' || t[7] != b'-' || !matches!(t[10], b'T' | b't' | b' ') {
            return Err(TimestampError::Shape);
        }
        if t[13] != b':' || t[16] != b':' {
            return Err(TimestampError::Shape);
        }
        if !(1..=12).contains(&month) {
            return Err(TimestampError::Date(DateError::NoSuchMonth { month }));
        }
        let days = days_in_month(year, month);
        if day == 0 || day > days {
            return Err(TimestampError::Date(DateError::NoSuchDay { year: year as u32, month, days }));
        }
        if hour == 23 && minute == 59 && second == 60 {
            return Err(TimestampError::LeapSecond);
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(TimestampError::Time);
        }
        let mut rest = &t[19..];
        let mut nanos = 0u32;
        if let Some((&b'.', fraction)) = rest.split_first() {
            let n_digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
            if n_digits == 0 {
                return Err(TimestampError::Shape);
            }
            if n_digits > 9 {
                return Err(TimestampError::Fraction(n_digits));
            }
            nanos = digits(&fraction[..n_digits])? * 10u32.pow(9 - n_digits as u32);
            rest = &fraction[n_digits..];
        }
        let offset_secs: i64 = match rest {
            [] | [b'Z'] | [b'z'] => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let hours = digits(&[*h1, *h2])? as i64;
                let minutes = digits(&[*m1, *m2])? as i64;
                if hours > 23 || minutes > 59 {
                    return Err(TimestampError::Offset);
                }
                let offset = hours * 3600 + minutes * 60;
                if *sign == b'-' {
                    -offset
                } else {
                    offset
                }
            }
            _ => return Err(TimestampError::Shape),
        };
        let days = days_from_civil(year, month, day);
        let local = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64;
        Ok(Instant { secs: local - offset_secs, nanos })
    }

    /// The instant `nanos` nanoseconds after the epoch (a Parquet timestamp).
    pub fn from_epoch_nanos(nanos: i128) -> Instant {
        Instant { secs: nanos.div_euclid(1_000_000_000) as i64, nanos: nanos.rem_euclid(1_000_000_000) as u32 }
    }

    /// Midnight UTC at the start of January 1 of `year` (proleptic
    /// Gregorian).
    pub const fn start_of_year(year: i64) -> Instant {
        Instant { secs: days_from_civil(year, 1, 1) * 86_400, nanos: 0 }
    }

    /// The chrono value of this instant, if chrono can hold it.
    pub fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp(self.secs, self.nanos)
    }
}

fn digits(text: &[u8]) -> Result<u32, TimestampError> {
    let mut value = 0u32;
    for &b in text {
        if !b.is_ascii_digit() {
            return Err(TimestampError::Shape);
        }
        value = value * 10 + (b - b'0') as u32;
    }
    Ok(value)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's algorithm).
const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Parses a `YYYY-MM-DD` request date: four-digit year, a real calendar day.
pub fn parse_date(text: &str) -> Option<NaiveDate> {
    check_date(text).ok()
}

/// [`parse_date`], saying why a text is not a date: its shape, or the
/// calendar (`2026-11-31`: November 2026 has 30 days).
pub fn check_date(text: &str) -> Result<NaiveDate, DateError> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(DateError::Shape);
    }
    let (Ok(year), Ok(month), Ok(day)) = (digits(&b[0..4]), digits(&b[5..7]), digits(&b[8..10])) else {
        return Err(DateError::Shape);
    };
    if !(1..=12).contains(&month) {
        return Err(DateError::NoSuchMonth { month });
    }
    let days = days_in_month(i64::from(year), month);
    if day == 0 || day > days {
        return Err(DateError::NoSuchDay { year, month, days });
    }
    NaiveDate::from_ymd_opt(year as i32, month, day).ok_or(DateError::Shape)
}

/// Why a request date is refused; prints as the reason alone (`not a
/// calendar date (November 2026 has 30 days)`, `expected a date
/// YYYY-MM-DD`), which [`DateError::message`] puts after the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DateError {
    /// Not `YYYY-MM-DD` with digits.
    #[error("expected a date YYYY-MM-DD")]
    Shape,
    /// A month outside 01-12.
    #[error("not a calendar date (there is no month {month:02}; months are 01 to 12)")]
    NoSuchMonth {
        /// The month given.
        month: u32,
    },
    /// A day outside the month.
    #[error("not a calendar date ({} {year} has {days} days)", MONTH_NAMES[(*.month as usize).saturating_sub(1) % 12])]
    NoSuchDay {
        /// The year given.
        year: u32,
        /// The month given (1-12).
        month: u32,
        /// The days that month has.
        days: u32,
    },
}

impl DateError {
    /// The message of a refused value: `'2026-11-31' is not a calendar date
    /// (November 2026 has 30 days)`, `'20261101' is not a date (YYYY-MM-DD)`.
    pub fn message(&self, text: &str) -> String {
        let text = crate::error::printable(text);
        match self {
            DateError::Shape => format!("'{text}' is not a date (YYYY-MM-DD)"),
            calendar => format!("'{text}' is {calendar}"),
        }
    }
}

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The bucket size of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// A calendar hour.
    Hour,
    /// A calendar day.
    Day,
    /// A calendar month.
    Month,
    /// A calendar year.
    Year,
}

impl Granularity {
    /// All granularities, finest first.
    pub const ALL: [Granularity; 4] = [Granularity::Hour, Granularity::Day, Granularity::Month, Granularity::Year];

    /// The API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Month => "month",
            Granularity::Year => "year",
        }
    }

    /// Parses the API name, exactly.
    pub fn parse(text: &str) -> Option<Granularity> {
        Granularity::ALL.into_iter().find(|g| g.as_str() == text)
    }

    /// The next coarser granularity, suggested when a window is too long.
    pub fn coarser(self) -> Granularity {
        match self {
            Granularity::Hour => Granularity::Day,
            Granularity::Day => Granularity::Month,
            Granularity::Month | Granularity::Year => Granularity::Year,
        }
    }
}

/// Why a window was refused; the text is the 400 message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowError {
    /// The request parameter to blame.
    pub parameter: &'static str,
    /// What is wrong, naming the values and what is allowed.
    pub message: String,
}

/// A report window: local dates `[from, to)` in a time zone, with the UTC
/// instants of their local midnights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// First local day, inclusive.
    pub from: NaiveDate,
    /// Local day after the last, exclusive.
    pub to: NaiveDate,
    /// The zone whose calendar defines days, months and years.
    pub tz: Tz,
    /// UTC seconds of `from` 00:00 local.
    pub start: i64,
    /// UTC seconds of `to` 00:00 local.
    pub end: i64,
}

impl Window {
    /// Checks `from < to` and the cap of `granularity`, and resolves the
    /// local midnights.
    pub fn new(from: NaiveDate, to: NaiveDate, granularity: Granularity, tz: Tz) -> Result<Window, WindowError> {
        if from >= to {
            return Err(WindowError {
                parameter: "from_date",
                message: format!("from_date {from} must be before to_date {to}"),
            });
        }
        let days = (to - from).num_days();
        let too_long = |limit: &str| WindowError {
            parameter: "to_date",
            message: format!(
                "window of {} exceeds the {limit} maximum for granularity '{}'; use granularity '{}'",
                // A cap in days is compared in days: "93 days", not "3 months and 1 day".
                if granularity == Granularity::Month { describe_span(from, to) } else { format!("{days} days") },
                granularity.as_str(),
                granularity.coarser().as_str()
            ),
        };
        match granularity {
            Granularity::Hour if days > 7 => return Err(too_long("7-day")),
            Granularity::Day if days > 92 => return Err(too_long("92-day")),
            Granularity::Month if from.checked_add_months(chrono::Months::new(24)).is_some_and(|cap| to > cap) => {
                return Err(too_long("24-month"))
            }
            _ => {}
        }
        Ok(Window { from, to, tz, start: local_midnight(tz, from), end: local_midnight(tz, to) })
    }

    /// The default window: the 7 days before today, today being the local
    /// date of `now` in `tz`.
    pub fn default_dates(now: DateTime<Utc>, tz: Tz) -> Dates {
        let today = now.with_timezone(&tz).date_naive();
        Dates { from: today - chrono::Days::new(7), to: today }
    }

    /// The bucket boundaries of this window at `granularity`.
    pub fn buckets(&self, granularity: Granularity) -> Buckets {
        let mut bounds = vec![self.start];
        match granularity {
            Granularity::Hour => {
                let mut local = self.from.and_hms_opt(0, 0, 0).unwrap_or_default();
                let last = self.to.and_hms_opt(0, 0, 0).unwrap_or_default();
                while local < last {
                    match self.tz.from_local_datetime(&local) {
                        LocalResult::Single(t) => bounds.push(t.timestamp()),
                        LocalResult::Ambiguous(a, b) => {
                            bounds.push(a.timestamp());
                            bounds.push(b.timestamp());
                        }
                        LocalResult::None => {}
                    }
                    local += chrono::Duration::hours(1);
                }
                // A change of offset starts a bucket too: the hour that
                // begins in a gap (Lord Howe's 02:30 after 02:00) or repeats
                // from a half hour (Chatham's 02:45) is its own bucket.
                bounds.extend(offset_changes(self.tz, self.start, self.end));
            }
            Granularity::Day => {
                for date in self.from.iter_days().take_while(|d| *d < self.to) {
                    bounds.push(local_midnight(self.tz, date));
                }
            }
            Granularity::Month | Granularity::Year => {
                let mut date = self.from;
                while date < self.to {
                    bounds.push(local_midnight(self.tz, date));
                    date = match granularity {
                        Granularity::Month => first_of_next_month(date),
                        _ => NaiveDate::from_ymd_opt(date.year() + 1, 1, 1).unwrap_or(NaiveDate::MAX),
                    };
                }
            }
        }
        bounds.push(self.end);
        bounds.sort_unstable();
        bounds.dedup();
        bounds.retain(|b| *b >= self.start && *b <= self.end);
        Buckets { bounds, tz: self.tz }
    }
}

fn first_of_next_month(date: NaiveDate) -> NaiveDate {
    let (year, month) = if date.month() == 12 { (date.year() + 1, 1) } else { (date.year(), date.month() + 1) };
    NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(NaiveDate::MAX)
}

fn describe_span(from: NaiveDate, to: NaiveDate) -> String {
    let days = (to - from).num_days();
    let plural = |n: i64, unit: &str| if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") };
    if days <= 92 {
        return plural(days, "day");
    }
    let mut months = (to.year() - from.year()) * 12 + to.month() as i32 - from.month() as i32;
    while months > 0 && from.checked_add_months(chrono::Months::new(months as u32)).is_none_or(|d| d > to) {
        months -= 1;
    }
    let rest = from.checked_add_months(chrono::Months::new(months as u32)).map_or(0, |d| (to - d).num_days());
    match rest {
        0 => plural(months as i64, "month"),
        _ => format!("{} and {}", plural(months as i64, "month"), plural(rest, "day")),
    }
}

/// The UTC seconds in `(start, end)` at which `tz` changes its offset.
/// The offset is compared a day apart, then every 15 minutes within a day
/// whose ends differ (no zone has changed its offset twice within a day),
/// and a change is found to the second by bisection: a lookup a day for a
/// window without a change, which most are (a report computes each
/// account's).
fn offset_changes(tz: Tz, start: i64, end: i64) -> Vec<i64> {
    const DAY: i64 = 86_400;
    const STEP: i64 = 15 * 60;
    let offset = |secs: i64| {
        DateTime::from_timestamp(secs, 0)
            .map_or(0, |t| tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc())
    };
    let mut changes = Vec::new();
    let (mut day, mut day_offset) = (start, offset(start));
    while day < end {
        let day_end = (day + DAY).min(end);
        let end_offset = offset(day_end);
        let (mut at, mut before) = (day, day_offset);
        while end_offset != day_offset && at < day_end {
            let next = (at + STEP).min(day_end);
            let after = offset(next);
            if after != before {
                // The first second of the new offset is in (low, high].
                let (mut low, mut high) = (at, next);
                while high - low > 1 {
                    let middle = low + (high - low) / 2;
                    if offset(middle) == before {
                        low = middle;
                    } else {
                        high = middle;
                    }
                }
                if high < end {
                    changes.push(high);
                }
            }
            (at, before) = (next, after);
        }
        (day, day_offset) = (day_end, end_offset);
    }
    changes
}

/// UTC seconds of the first instant of local `date` in `tz` (its midnight,
/// or the end of a gap when midnight does not exist there).
pub fn local_midnight(tz: Tz, date: NaiveDate) -> i64 {
    let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    for step in 0..=96 {
        let local: NaiveDateTime = midnight + chrono::Duration::minutes(15 * step);
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) if step == 0 => return t.timestamp(),
            LocalResult::Ambiguous(a, _) if step == 0 => return a.timestamp(),
            // Midnight is in a gap, which ends at or before this instant,
            // and not always on a quarter hour (Kiritimati's 1979 jump
            // from -10:40 ended at 00:40): the end to the second.
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => return gap_end(tz, date, t.timestamp()),
            LocalResult::None => continue,
        }
    }
    midnight.and_utc().timestamp()
}

/// The first second whose local date in `tz` is `date` or later, given
/// `after`, one that is, a quarter hour or less past the end of a gap at
/// the date's midnight: by bisection over the day before it.
fn gap_end(tz: Tz, date: NaiveDate, after: i64) -> i64 {
    let reached = |secs: i64| {
        DateTime::from_timestamp(secs, 0).is_none_or(|t| tz.from_utc_datetime(&t.naive_utc()).date_naive() >= date)
    };
    let (mut low, mut high) = (after - 86_400, after);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if reached(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    high
}

/// Sorted bucket boundaries in UTC seconds: bucket `i` is
/// `[bounds[i], bounds[i + 1])`, already clipped to the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buckets {
    bounds: Vec<i64>,
    tz: Tz,
}

impl Buckets {
    /// Buckets over explicit boundaries (at least two, ascending).
    pub fn from_bounds(bounds: Vec<i64>, tz: Tz) -> Buckets {
        Buckets { bounds, tz }
    }

    /// The bucket of an instant, or `None` outside the window.
    #[inline]
    pub fn index(&self, secs: i64) -> Option<u32> {
        let first = *self.bounds.first()?;
        let last = *self.bounds.last()?;
        if secs < first || secs >= last {
            return None;
        }
        Some((self.bounds.partition_point(|b| *b <= secs) - 1) as u32)
    }

    /// Number of buckets.
    pub fn len(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    /// Whether there are no buckets.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `[start, end)` of bucket `index` in UTC seconds.
    pub fn span(&self, index: u32) -> Interval {
        let i = index as usize;
        Interval { start: self.bounds[i], end: self.bounds[i + 1] }
    }

    /// From the first bucket's start to the last one's end (empty for no
    /// boundaries).
    pub fn whole(&self) -> Interval {
        let (start, end) = (self.bounds.first(), self.bounds.last());
        Interval { start: start.copied().unwrap_or(0), end: end.copied().unwrap_or(0) }
    }

    /// Every boundary, in UTC seconds, ascending.
    pub fn bounds(&self) -> &[i64] {
        &self.bounds
    }

    /// The time zone the boundaries are written in.
    pub fn tz(&self) -> Tz {
        self.tz
    }
}

/// Writes UTC seconds as `YYYY-MM-DDTHH:MM:SSZ` in UTC, or with the local
/// offset (`2026-03-08T00:00:00-05:00`) in any other zone. An offset with
/// seconds (a zone's local mean time, Monrovia's -00:44:30 until 1972)
/// has no RFC 3339 form: that instant is written in UTC.
pub fn format_instant(secs: i64, tz: Tz) -> String {
    let Some(utc) = DateTime::from_timestamp(secs, 0) else {
        return secs.to_string();
    };
    let local = utc.with_timezone(&tz);
    let offset = local.offset().fix().local_minus_utc();
    if tz == Tz::UTC || offset % 60 != 0 {
        return utc.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let offset = offset.abs();
    format!("{}{sign}{:02}:{:02}", local.format("%Y-%m-%dT%H:%M:%S"), offset / 3600, offset % 3600 / 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_date_that_starts_inside_a_gap_starts_where_the_gap_ends() {
        let date = |text: &str| parse_date(text).expect("a date");
        // Kiritimati, 1979-10-01: 23:59:59 at -10:40 is followed by 00:40
        // at -10:00, off the quarter hours.
        let kiritimati: Tz = "Pacific/Kiritimati".parse().expect("a zone");
        assert_eq!(local_midnight(kiritimati, date("1979-10-01")), at("1979-10-01T10:40:00Z"));
        // Monrovia, 1972-01-07: from -00:44:30 to UTC.
        let monrovia: Tz = "Africa/Monrovia".parse().expect("a zone");
        assert_eq!(local_midnight(monrovia, date("1972-01-07")), at("1972-01-07T00:44:30Z"));
        // Sao Paulo, 2018-11-04: midnight became 01:00, on the hour.
        let sao_paulo: Tz = "America/Sao_Paulo".parse().expect("a zone");
        assert_eq!(local_midnight(sao_paulo, date("2018-11-04")), at("2018-11-04T03:00:00Z"));
        // Apia skipped 2011-12-30: it starts with the 31st.
        let apia: Tz = "Pacific/Apia".parse().expect("a zone");
        assert_eq!(local_midnight(apia, date("2011-12-30")), local_midnight(apia, date("2011-12-31")));
        assert_eq!(local_midnight(apia, date("2011-12-31")), at("2011-12-30T10:00:00Z"));
    }

    #[test]
    fn dates_off_the_calendar_say_why() {
        use super::{check_date, DateError};
        let cases = [
            ("2026-11-31", "'2026-11-31' is not a calendar date (November 2026 has 30 days)"),
            ("2026-02-29", "'2026-02-29' is not a calendar date (February 2026 has 28 days)"),
            ("2026-04-00", "'2026-04-00' is not a calendar date (April 2026 has 30 days)"),
            ("2026-13-01", "'2026-13-01' is not a calendar date (there is no month 13; months are 01 to 12)"),
            ("2026-00-10", "'2026-00-10' is not a calendar date (there is no month 00; months are 01 to 12)"),
            ("20261101", "'20261101' is not a date (YYYY-MM-DD)"),
            ("2026-1-011", "'2026-1-011' is not a date (YYYY-MM-DD)"),
            ("2026-11-2x", "'2026-11-2x' is not a date (YYYY-MM-DD)"),
        ];
        for (text, message) in cases {
            assert_eq!(check_date(text).unwrap_err().message(text), message, "{text}");
        }
        assert_eq!(check_date("2028-02-29").map(|d| d.to_string()).as_deref(), Ok("2028-02-29"));
        assert_eq!(check_date("2000-02-29").map(|d| d.to_string()).as_deref(), Ok("2000-02-29"));
        assert_eq!(check_date("1900-02-29"), Err(DateError::NoSuchDay { year: 1900, month: 2, days: 28 }));
        assert_eq!(check_date("2026-11-30").map(|d| d.to_string()).as_deref(), Ok("2026-11-30"));
    }

    use super::*;

    fn at(text: &str) -> i64 {
        Instant::parse(text.as_bytes()).unwrap().secs
    }

    #[test]
    fn parses_every_accepted_form() {
        let z = at("2026-11-20T13:45:01Z");
        assert_eq!(z, 1_795_182_301);
        assert_eq!(at("2026-11-20 13:45:01"), z);
        assert_eq!(at("2026-11-20T13:45:01"), z);
        assert_eq!(at("2026-11-20t13:45:01z"), z);
        assert_eq!(at("2026-11-20T19:15:01+05:30"), z);
        assert_eq!(at("2026-11-20T05:45:01-08:00"), z);
        assert_eq!(at("2026-11-20 13:45:01+00:00"), z);
        let fractional = Instant::parse(b"2026-11-20T13:45:01.250+00:00").unwrap();
        assert_eq!((fractional.secs, fractional.nanos), (z, 250_000_000));
        let nanos = Instant::parse(b"2026-11-20T13:45:01.000000001Z").unwrap();
        assert_eq!(nanos.nanos, 1);
        assert_eq!(at("1970-01-01T00:00:00Z"), 0);
        assert_eq!(at("1969-12-31T23:59:59Z"), -1);
        assert_eq!(at("2024-02-29T00:00:00Z"), 1_709_164_800);
    }

    #[test]
    fn timestamps_off_the_calendar_or_the_clock_say_why() {
        let cases = [
            ("2026-02-29T13:45:01Z", "is not a calendar date (February 2026 has 28 days)"),
            ("2026-11-31 00:00:00", "is not a calendar date (November 2026 has 30 days)"),
            ("2026-13-20T13:45:01Z", "is not a calendar date (there is no month 13; months are 01 to 12)"),
            ("2026-12-31T23:59:60Z", "has second 60 (a leap second): Unix time has no leap seconds"),
            ("2026-11-20T13:45:60Z", "is not a time of day (hours are 00 to 23, minutes and seconds 00 to 59)"),
            ("2026-11-20T24:00:00Z", "is not a time of day"),
            ("2026-11-20T13:45:01.1234567890Z", "has 10 fractional digits: at most 9 (nanoseconds) are accepted"),
            ("2026-11-20T13:45:01+24:00", "has an offset out of range (at most ±23:59)"),
            ("2026-11-20T13:45", "is not an RFC 3339 timestamp"),
        ];
        for (text, reason) in cases {
            let error = Instant::parse(text.as_bytes()).expect_err(text).to_string();
            assert!(error.starts_with(reason), "{text}: {error}");
        }
    }

    #[test]
    fn refuses_malformed_timestamps() {
        for bad in [
            "",
            "2026-11-20",
            "2026-11-20T13:45",
            "2026-11-20T13:45:01+0530",
            "2026-11-20T13:45:01+05",
            "2026-11-20T13:45:01.Z",
            "2026-11-20T13:45:01.1234567890Z",
            "2026-13-20T13:45:01Z",
            "2026-02-29T13:45:01Z",
            "2026-11-20T24:00:00Z",
            "2026-11-20T13:60:01Z",
            "2026-11-20T13:45:60Z",
            "2026/11/20T13:45:01Z",
            "2026-11-20X13:45:01Z",
            "2026-11-20T13:45:01 Z",
            "2026-11-20T13:45:01ZZ",
            "+2026-11-20T13:45:01Z",
        ] {
            assert!(Instant::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn civil_days_match_chrono() {
        for days in (-800_000i64..800_000).step_by(997) {
            let date = NaiveDate::from_num_days_from_ce_opt((days + 719_163) as i32).unwrap();
            assert_eq!(days_from_civil(date.year() as i64, date.month(), date.day()), days);
        }
    }

    fn date(text: &str) -> NaiveDate {
        parse_date(text).unwrap()
    }

    #[test]
    fn window_caps_accept_the_cap_and_refuse_one_day_more() {
        let utc = Tz::UTC;
        let cases = [
            (Granularity::Hour, "2026-11-01", "2026-11-08", true),
            (Granularity::Hour, "2026-11-01", "2026-11-09", false),
            (Granularity::Day, "2026-01-01", "2026-04-03", true),
            (Granularity::Day, "2026-01-01", "2026-04-04", false),
            (Granularity::Month, "2024-01-31", "2026-01-31", true),
            (Granularity::Month, "2024-01-31", "2026-02-01", false),
            (Granularity::Year, "1990-01-01", "2090-01-01", true),
        ];
        for (granularity, from, to, ok) in cases {
            let result = Window::new(date(from), date(to), granularity, utc);
            assert_eq!(result.is_ok(), ok, "{granularity:?} {from} {to}: {result:?}");
        }
        let error = Window::new(date("2026-11-01"), date("2026-11-11"), Granularity::Hour, utc).unwrap_err();
        assert_eq!(
            error.message,
            "window of 10 days exceeds the 7-day maximum for granularity 'hour'; use granularity 'day'"
        );
        let error = Window::new(date("2024-01-15"), date("2026-02-16"), Granularity::Month, utc).unwrap_err();
        assert_eq!(
            error.message,
            "window of 25 months and 1 day exceeds the 24-month maximum for granularity 'month'; use granularity 'year'"
        );
        let error = Window::new(date("2026-11-01"), date("2026-11-01"), Granularity::Day, utc).unwrap_err();
        assert_eq!(error.parameter, "from_date");
    }

    #[test]
    fn month_buckets_are_clipped_to_the_window() {
        let window = Window::new(date("2026-01-15"), date("2026-03-10"), Granularity::Month, Tz::UTC).unwrap();
        let buckets = window.buckets(Granularity::Month);
        let spans: Vec<(String, String)> = (0..buckets.len() as u32)
            .map(|i| {
                let Interval { start: a, end: b } = buckets.span(i);
                (format_instant(a, Tz::UTC), format_instant(b, Tz::UTC))
            })
            .collect();
        assert_eq!(
            spans,
            [
                ("2026-01-15T00:00:00Z".into(), "2026-02-01T00:00:00Z".into()),
                ("2026-02-01T00:00:00Z".into(), "2026-03-01T00:00:00Z".into()),
                ("2026-03-01T00:00:00Z".into(), "2026-03-10T00:00:00Z".into()),
            ]
        );
        assert_eq!(buckets.index(at("2026-01-14T23:59:59Z")), None);
        assert_eq!(buckets.index(at("2026-01-15T00:00:00Z")), Some(0));
        assert_eq!(buckets.index(at("2026-02-28T23:59:59Z")), Some(1));
        assert_eq!(buckets.index(at("2026-03-09T23:59:59Z")), Some(2));
        assert_eq!(buckets.index(at("2026-03-10T00:00:00Z")), None);
    }

    #[test]
    fn dst_days_have_23_and_25_hour_buckets() {
        let ny: Tz = "America/New_York".parse().unwrap();
        let spring = Window::new(date("2026-03-08"), date("2026-03-09"), Granularity::Hour, ny).unwrap();
        assert_eq!(spring.buckets(Granularity::Hour).len(), 23);
        let fall = Window::new(date("2026-11-01"), date("2026-11-02"), Granularity::Hour, ny).unwrap();
        let buckets = fall.buckets(Granularity::Hour);
        assert_eq!(buckets.len(), 25);
        for i in 0..buckets.len() as u32 {
            let Interval { start: a, end: b } = buckets.span(i);
            assert_eq!(b - a, 3600);
        }
        assert_eq!(format_instant(spring.start, ny), "2026-03-08T00:00:00-05:00");
        assert_eq!(format_instant(spring.end, ny), "2026-03-09T00:00:00-04:00");
        let kathmandu: Tz = "Asia/Kathmandu".parse().unwrap();
        let window = Window::new(date("2026-11-20"), date("2026-11-21"), Granularity::Hour, kathmandu).unwrap();
        assert_eq!(format_instant(window.start, kathmandu), "2026-11-20T00:00:00+05:45");
        assert_eq!(format_instant(window.start, Tz::UTC), "2026-11-19T18:15:00Z");
    }

    /// Every local hour that exists is a bucket of its own, beginning where
    /// the hour does, also when an offset changes by a half hour (Lord
    /// Howe) or at a quarter past (Chatham). Each bucket is the instants
    /// of one local hour, as a check second by second shows.
    #[test]
    fn hours_that_begin_off_the_hour_are_buckets_of_their_own() {
        use chrono::Timelike;
        let cases = [
            ("Australia/Lord_Howe", "2026-10-04", "2026-10-04T02:30:00+11:00", 24),
            ("Australia/Lord_Howe", "2026-04-05", "2026-04-05T01:30:00+10:30", 25),
            ("Pacific/Chatham", "2026-04-05", "2026-04-05T02:45:00+12:45", 26),
            ("Pacific/Chatham", "2026-09-27", "2026-09-27T03:45:00+13:45", 24),
            ("America/New_York", "2026-11-01", "2026-11-01T01:00:00-05:00", 25),
            // Santiago changes at midnight: the window starts after one
            // change (its first hour is 01:00) and ends at another.
            ("America/Santiago", "2026-09-05", "2026-09-05T23:00:00-04:00", 24),
            ("America/Santiago", "2026-09-06", "2026-09-06T01:00:00-03:00", 23),
            ("America/Santiago", "2026-04-04", "2026-04-04T00:00:00-03:00", 25),
        ];
        for (zone, day, bound, count) in cases {
            let tz: Tz = zone.parse().unwrap();
            let from = date(day);
            let window = Window::new(from, from.succ_opt().unwrap(), Granularity::Hour, tz).unwrap();
            let buckets = window.buckets(Granularity::Hour);
            assert_eq!(buckets.len(), count, "{zone} {day}");
            let starts: Vec<String> =
                (0..buckets.len() as u32).map(|i| format_instant(buckets.span(i).start, tz)).collect();
            assert!(starts.iter().any(|s| s == bound), "{zone} {day}: {starts:?}");
            for i in 0..buckets.len() as u32 {
                let Interval { start, end } = buckets.span(i);
                let hour = |secs: i64| {
                    let local = DateTime::from_timestamp(secs, 0).unwrap().with_timezone(&tz);
                    (local.date_naive(), local.hour(), local.offset().fix())
                };
                assert!((start..end).all(|s| hour(s) == hour(start)), "{zone} {day}: bucket {i} spans hours");
            }
        }
    }

    /// An offset with seconds is written in UTC: the text names the
    /// bucket's own instant.
    #[test]
    fn offsets_with_seconds_are_written_in_utc() {
        let monrovia: Tz = "Africa/Monrovia".parse().unwrap();
        let window = Window::new(date("1971-06-01"), date("1971-06-02"), Granularity::Day, monrovia).unwrap();
        assert_eq!(format_instant(window.start, monrovia), "1971-06-01T00:44:30Z");
        let ny: Tz = "America/New_York".parse().unwrap();
        assert_eq!(format_instant(0, ny), "1969-12-31T19:00:00-05:00");
    }
}
