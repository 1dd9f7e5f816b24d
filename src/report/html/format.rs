//! Numbers as a person reads them on the report pages: money with thousands
//! separators and its currency's usual decimals, counts with separators,
//! durations as h:mm:ss. Everything is integer arithmetic on
//! [`Amount`]'s nano-units; nothing passes through floating point.
//!
//! Money is rounded **half up** (half away from zero: 0.005 USD shows as
//! 0.01), the way an invoice rounds; durations are rounded half up to whole
//! seconds. Wherever rounding hid digits, the HTML form carries the exact
//! decimal (the JSON's) in a `title` and shows it in place when the value
//! is tapped or focused (CSS only, see `report.css`: `.x:focus`).
//!
//! Periods are shown as a customer reads them ([`period`]): whole days as
//! dates with the last day included, other spans as clock times.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, FixedOffset, Months, NaiveDateTime, NaiveTime, Timelike};

use crate::money::Amount;

/// The usual number of decimals of a currency (ISO 4217 minor units):
/// 0 for the yen, won and the like, 3 for the dinars and rials that use
/// thousandths, 2 for every other code (unknown codes included).
pub fn currency_decimals(currency: &str) -> u32 {
    match currency.to_ascii_uppercase().as_str() {
        "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX" | "UYI" | "VND"
        | "VUV" | "XAF" | "XOF" | "XPF" => 0,
        "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
        _ => 2,
    }
}

/// `nanos` rounded half up (away from zero) to `decimals` fractional
/// digits, as an integer count of `10^-decimals` units.
pub fn round_half_up(nanos: i128, decimals: u32) -> i128 {
    let decimals = decimals.min(9);
    let step = 10i128.pow(9 - decimals);
    let (quotient, remainder) = (nanos / step, nanos % step);
    if remainder.unsigned_abs() * 2 >= step.unsigned_abs() {
        quotient + nanos.signum()
    } else {
        quotient
    }
}

/// An integer with a comma between groups of three digits: `1,234,567`.
pub fn grouped(value: u128) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `amount` in `currency`'s usual decimals with thousands separators
/// (`6,818.05`, `1,235` for JPY), rounded half up.
pub fn money(amount: Amount, currency: &str) -> String {
    let decimals = currency_decimals(currency);
    let rounded = round_half_up(amount.nanos(), decimals);
    let scale = 10u128.pow(decimals);
    let magnitude = rounded.unsigned_abs();
    let mut out = String::new();
    if rounded < 0 {
        out.push('-');
    }
    out.push_str(&grouped(magnitude / scale));
    if decimals > 0 {
        let _ = write!(out, ".{:0width$}", magnitude % scale, width = decimals as usize);
    }
    out
}

/// A duration in seconds as `h:mm:ss` (hours grouped: `2,543:20:00`),
/// rounded half up to whole seconds.
pub fn duration(seconds: Amount) -> String {
    let whole = round_half_up(seconds.nanos(), 0);
    let magnitude = whole.unsigned_abs();
    let sign = if whole < 0 { "-" } else { "" };
    let (hours, minutes, secs) = (magnitude / 3600, magnitude / 60 % 60, magnitude % 60);
    format!("{sign}{}:{minutes:02}:{secs:02}", grouped(hours))
}

/// Whether `amount` has no digits beyond `decimals`, so its rounded form
/// says everything the exact value does.
fn is_exact(amount: Amount, decimals: u32) -> bool {
    amount.nanos() % 10i128.pow(9 - decimals.min(9)) == 0
}

/// Appends `shown` as HTML; when `exact` differs from it, as a focusable
/// span whose `title` (and, on tap or focus, its text) is the exact value.
fn write_with_exact(out: &mut String, shown: &str, exact: Option<Amount>) {
    match exact {
        None => out.push_str(shown),
        Some(exact) => {
            let _ = write!(out, "<span class=\"x\" tabindex=\"0\" title=\"{exact}\">{shown}</span>");
        }
    }
}

/// Appends [`money`] as HTML, with the exact decimal attached when
/// rounding hid digits.
pub fn money_html(out: &mut String, amount: Amount, currency: &str) {
    let exact = (!is_exact(amount, currency_decimals(currency))).then_some(amount);
    write_with_exact(out, &money(amount, currency), exact);
}

/// Appends [`duration`] as HTML; the exact seconds are attached to every
/// non-zero duration (`h:mm:ss` does not say the unit is seconds, and
/// rounds fractions of a second).
pub fn duration_html(out: &mut String, seconds: Amount) {
    write_with_exact(out, &duration(seconds), (seconds != Amount::ZERO).then_some(seconds));
}

/// A half-open period `[from, to)`, its bounds as the API writes them
/// (`2026-11-14T00:00:00Z`, `2026-03-08T00:00:00-05:00`), as a customer
/// reads it:
/// - whole local days are dates, the last day included (`2026-11-14`,
///   `2026-11-05 to 2026-11-30`); a whole month or year is named
///   (`2026-11`, `2026`);
/// - any other span is local clock times whose end is excluded, as a
///   meeting's is (`2026-11-14 05:00 to 06:00`), with the UTC offsets when
///   a clock change falls inside it.
///
/// Bounds it cannot read are shown as given.
pub fn period(from: &str, to: &str) -> String {
    let parse = |s: &str| DateTime::parse_from_rfc3339(s).ok();
    let (Some(start), Some(end)) = (parse(from), parse(to)) else { return format!("{from} to {to}") };
    if end <= start {
        return format!("{from} to {to}");
    }
    let (local_start, local_end) = (start.naive_local(), end.naive_local());
    if local_start.time() == NaiveTime::MIN && local_end.time() == NaiveTime::MIN {
        let (first, next) = (local_start.date(), local_end.date());
        let last = next.pred_opt().unwrap_or(next);
        return if first.ordinal() == 1 && Some(next) == first.checked_add_months(Months::new(12)) {
            first.format("%Y").to_string()
        } else if first.day() == 1 && Some(next) == first.checked_add_months(Months::new(1)) {
            first.format("%Y-%m").to_string()
        } else if first == last {
            first.to_string()
        } else {
            format!("{first} to {last}")
        };
    }
    let clock = |t: NaiveDateTime| t.format(if t.second() == 0 { "%H:%M" } else { "%H:%M:%S" }).to_string();
    let since = format!("{} {}", local_start.date(), clock(local_start));
    let until = if local_end.date() == local_start.date() {
        clock(local_end)
    } else {
        format!("{} {}", local_end.date(), clock(local_end))
    };
    if start.offset() == end.offset() {
        format!("{since} to {until}")
    } else {
        let utc = |offset: &FixedOffset| match offset.local_minus_utc() {
            0 => "UTC".to_owned(),
            _ => format!("UTC{offset}"),
        };
        format!("{since} ({}) to {until} ({})", utc(start.offset()), utc(end.offset()))
    }
}

/// Writes the rest of an opened tag that shows a period (`<td`, `<span`):
/// the exact bounds in its `title`, then [`period`]'s text. The caller
/// closes the element.
pub fn period_html(out: &mut String, from: &str, to: &str) {
    out.push_str(" title=\"");
    super::esc_into(out, from);
    out.push_str(" to ");
    super::esc_into(out, to);
    out.push_str(", end excluded\">");
    super::esc_into(out, &period(from, to));
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn amount(text: &str) -> Amount {
        Amount::parse_total(text.as_bytes()).expect("decimal")
    }

    #[test]
    fn periods_read_as_a_customer_reads_them() {
        let cases = [
            ("2026-11-14T00:00:00Z", "2026-11-15T00:00:00Z", "2026-11-14"),
            ("2026-11-14T00:00:00Z", "2026-11-21T00:00:00Z", "2026-11-14 to 2026-11-20"),
            ("2026-11-01T00:00:00+05:30", "2026-12-01T00:00:00+05:30", "2026-11"),
            ("2026-11-05T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-05 to 2026-11-30"),
            ("2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-02"),
            ("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026"),
            ("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-01"),
            // A day with a clock change is still one local day.
            ("2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", "2026-03-08"),
            ("2026-11-14T05:00:00Z", "2026-11-14T06:00:00Z", "2026-11-14 05:00 to 06:00"),
            ("2026-11-14T23:00:00Z", "2026-11-15T00:00:00Z", "2026-11-14 23:00 to 2026-11-15 00:00"),
            ("2026-11-14T05:00:30Z", "2026-11-20T00:00:00Z", "2026-11-14 05:00:30 to 2026-11-20 00:00"),
            (
                "2026-11-01T01:00:00-07:00",
                "2026-11-01T01:00:00-08:00",
                "2026-11-01 01:00 (UTC-07:00) to 01:00 (UTC-08:00)",
            ),
            ("not a time", "2026-11-15T00:00:00Z", "not a time to 2026-11-15T00:00:00Z"),
            ("2026-11-15T00:00:00Z", "2026-11-14T00:00:00Z", "2026-11-15T00:00:00Z to 2026-11-14T00:00:00Z"),
        ];
        for (from, to, shown) in cases {
            assert_eq!(period(from, to), shown, "{from} {to}");
        }
    }

    #[test]
    fn money_uses_the_currency_decimals_and_rounds_half_up() {
        assert_eq!(money(amount("6818.05492"), "USD"), "6,818.05");
        assert_eq!(money(amount("0.9"), "USD"), "0.90");
        assert_eq!(money(amount("0.005"), "EUR"), "0.01");
        assert_eq!(money(amount("0.0049999"), "EUR"), "0.00");
        assert_eq!(money(amount("1234.5"), "JPY"), "1,235");
        assert_eq!(money(amount("1234.4999"), "jpy"), "1,234");
        assert_eq!(money(amount("12.3455"), "KWD"), "12.346");
        assert_eq!(money(amount("1000000"), "XYZ"), "1,000,000.00");
        assert_eq!(money(Amount::from_nanos(-1_005_000_000), "USD"), "-1.01");
        assert_eq!(money(Amount::ZERO, "USD"), "0.00");
    }

    #[test]
    fn the_exact_value_is_attached_only_when_rounding_hid_digits() {
        let mut out = String::new();
        money_html(&mut out, amount("0.26"), "USD");
        assert_eq!(out, "0.26");
        out.clear();
        money_html(&mut out, amount("6818.05492"), "USD");
        assert_eq!(out, "<span class=\"x\" tabindex=\"0\" title=\"6818.05492\">6,818.05</span>");
        out.clear();
        duration_html(&mut out, amount("9156000.0"));
        assert_eq!(out, "<span class=\"x\" tabindex=\"0\" title=\"9156000.0\">2,543:20:00</span>");
        out.clear();
        duration_html(&mut out, amount("90.5"));
        assert_eq!(out, "<span class=\"x\" tabindex=\"0\" title=\"90.5\">0:01:31</span>");
        out.clear();
        duration_html(&mut out, Amount::ZERO);
        assert_eq!(out, "0:00:00");
    }

    #[test]
    fn counts_and_durations() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(duration(amount("59.4")), "0:00:59");
        assert_eq!(duration(amount("59.5")), "0:01:00");
        assert_eq!(duration(amount("3600")), "1:00:00");
    }

    /// The reference rounding: half up on the decimal digits themselves.
    fn rounded_by_digits(nanos: i128, decimals: u32) -> i128 {
        let text = format!("{:010}", nanos);
        let (whole, fraction) = text.split_at(text.len() - 9);
        let kept: i128 = format!("{whole}{}", &fraction[..decimals as usize]).parse().expect("digits");
        let next = fraction.as_bytes().get(decimals as usize).copied().unwrap_or(b'0');
        kept + i128::from(next >= b'5')
    }

    proptest! {
        /// A span of whole local days, in zones with and without clock
        /// changes, reads as its first and last day (the end's day is
        /// excluded), or as one day, or as its month or year when it is
        /// exactly one.
        #[test]
        fn whole_local_days_read_as_their_first_and_last_day(
            start in 0u32..3000,
            days in 1u32..400,
            zone in prop::sample::select(vec!["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham"]),
        ) {
            use chrono::{NaiveDate, TimeZone};
            let tz: chrono_tz::Tz = zone.parse().expect("zone");
            let first = NaiveDate::from_ymd_opt(2020, 1, 1).expect("date") + chrono::Days::new(u64::from(start));
            let next = first + chrono::Days::new(u64::from(days));
            let midnight = |date: NaiveDate| tz.from_local_datetime(&date.and_time(NaiveTime::MIN)).single();
            // Zones whose clocks change at midnight skip or repeat it: not a whole-day bound.
            let (Some(from), Some(to)) = (midnight(first), midnight(next)) else { return Ok(()) };
            let text = |at: chrono::DateTime<chrono_tz::Tz>| crate::time::format_instant(at.timestamp(), tz);
            let shown = period(&text(from), &text(to));
            let last = next.pred_opt().expect("a day before");
            let expected = if first.ordinal() == 1 && next == first.with_year(first.year() + 1).expect("year") {
                first.format("%Y").to_string()
            } else if first.day() == 1 && Some(next) == first.checked_add_months(Months::new(1)) {
                first.format("%Y-%m").to_string()
            } else if days == 1 {
                first.to_string()
            } else {
                format!("{first} to {last}")
            };
            prop_assert_eq!(shown, expected);
        }

        /// The formatted text, separators removed, parses back to the
        /// exact value rounded half up to the currency's decimals.
        #[test]
        fn formatted_money_parses_back_to_the_rounded_value(
            nanos in 0i128..=i64::MAX as i128 * 1000,
            currency in prop::sample::select(vec!["USD", "EUR", "JPY", "KWD", "GBP", "CLP", "BHD"]),
        ) {
            let decimals = currency_decimals(currency);
            let text = money(Amount::from_nanos(nanos), currency);
            let parts: Vec<&str> = text.split('.').collect();
            prop_assert_eq!(parts.len(), if decimals == 0 { 1 } else { 2 });
            let groups: Vec<&str> = parts[0].split(',').collect();
            prop_assert!(groups[0].len() <= 3 && !groups[0].is_empty());
            prop_assert!(groups[1..].iter().all(|g| g.len() == 3));
            let back = Amount::parse_total(text.replace(',', "").as_bytes()).expect("parses");
            let step = 10i128.pow(9 - decimals);
            prop_assert_eq!(back.nanos(), rounded_by_digits(nanos, decimals) * step);
            prop_assert!((back.nanos() - nanos).abs() * 2 <= step);
        }

        /// h:mm:ss reads back to the seconds rounded half up.
        #[test]
        fn durations_read_back(nanos in 0i128..=i64::MAX as i128 * 1000) {
            let text = duration(Amount::from_nanos(nanos));
            let parts: Vec<u128> = text.replace(',', "").split(':').map(|p| p.parse().expect("digits")).collect();
            prop_assert_eq!(parts.len(), 3);
            prop_assert!(parts[1] < 60 && parts[2] < 60);
            let seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
            prop_assert_eq!(seconds as i128, rounded_by_digits(nanos, 0));
        }
    }
}
