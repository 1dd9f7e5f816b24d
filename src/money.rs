//! Exact decimal quantities: money and durations.
//!
//! Every amount in the contract is a non-negative decimal with at most nine
//! fractional digits. We hold it as an integer count of nano-units
//! (1e-9), so parsing, summing and printing are exact: no value ever passes
//! through floating point. A single record's value is an `i64` of nanos
//! (up to 9,223,372,036.854775807 units); sums are `i128` with checked adds,
//! so an overflow is an error, never a wrap.

use std::fmt;

/// Nano-units per whole unit.
pub const SCALE: i128 = 1_000_000_000;

/// Maximum number of fractional digits the contract allows.
pub const MAX_FRACTION_DIGITS: usize = 9;

/// An exact decimal, in nano-units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(i128);

/// Why a decimal string was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecimalError {
    /// Nothing to parse.
    Empty,
    /// A character other than digits and one point (signs and exponents too).
    NotADecimal,
    /// More than nine digits after the point.
    TooManyFractionDigits,
    /// Does not fit a single record's value.
    TooLarge,
}

impl fmt::Display for DecimalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecimalError::Empty => "is empty; expected a decimal",
            DecimalError::NotADecimal => {
                "is not a decimal (expected digits with an optional point: no sign, no exponent)"
            }
            DecimalError::TooManyFractionDigits => "has more than 9 digits after the point",
            DecimalError::TooLarge => "is too large (at most 9223372036.854775807)",
        })
    }
}

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount(0);

    /// The amount of `nanos` nano-units.
    pub const fn from_nanos(nanos: i128) -> Amount {
        Amount(nanos)
    }

    /// The value in nano-units.
    pub const fn nanos(self) -> i128 {
        self.0
    }

    /// Parses the contract's decimal form: `123`, `0.0085`, `12.500000000`.
    ///
    /// No sign, no exponent, no spaces, at most nine fractional digits, and
    /// digits on both sides of a point. The result fits an `i64` of nanos.
    pub fn parse(text: &[u8]) -> Result<Amount, DecimalError> {
        parse_nanos(text).map(|n| Amount(n as i128))
    }

    /// Parses a sum written by [`fmt::Display`] (a stored total, such as a
    /// store manifest's amount of a kind): the contract's decimal form, but
    /// any size an `i128` of nanos holds, not only one record's.
    pub fn parse_total(text: &[u8]) -> Result<Amount, DecimalError> {
        if let Ok(nanos) = parse_nanos(text) {
            return Ok(Amount(nanos as i128));
        }
        let (whole, fraction) = match text.iter().position(|&b| b == b'.') {
            Some(point) => (&text[..point], &text[point + 1..]),
            None => (text, &b""[..]),
        };
        let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
        if !digits(whole) || (text.contains(&b'.') && !digits(fraction)) {
            return Err(DecimalError::NotADecimal);
        }
        if fraction.len() > MAX_FRACTION_DIGITS {
            return Err(DecimalError::TooManyFractionDigits);
        }
        let mut nanos: i128 = 0;
        for &b in whole.iter().chain(fraction) {
            nanos =
                nanos.checked_mul(10).and_then(|n| n.checked_add((b - b'0') as i128)).ok_or(DecimalError::TooLarge)?;
        }
        let scale = 10i128.pow((MAX_FRACTION_DIGITS - fraction.len()) as u32);
        nanos.checked_mul(scale).map(Amount).ok_or(DecimalError::TooLarge)
    }

    /// Builds an amount from an integer `unscaled` with `scale` fractional
    /// digits (a Parquet DECIMAL), refusing negatives, more than nine digits
    /// of real precision and values too large for one record.
    pub fn from_unscaled(unscaled: i128, scale: usize) -> Result<Amount, DecimalError> {
        if unscaled < 0 {
            return Err(DecimalError::NotADecimal);
        }
        let nanos = if scale <= MAX_FRACTION_DIGITS {
            unscaled.checked_mul(10i128.pow((MAX_FRACTION_DIGITS - scale) as u32)).ok_or(DecimalError::TooLarge)?
        } else {
            let divisor =
                10i128.checked_pow((scale - MAX_FRACTION_DIGITS) as u32).ok_or(DecimalError::TooManyFractionDigits)?;
            if unscaled % divisor != 0 {
                return Err(DecimalError::TooManyFractionDigits);
            }
            unscaled / divisor
        };
        if nanos > i64::MAX as i128 {
            return Err(DecimalError::TooLarge);
        }
        Ok(Amount(nanos))
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }

    /// The value as a JSON number: a point, no exponent, trailing zeros
    /// trimmed but at least one fractional digit (`0.0085`, `12.5`, `3.0`).
    pub fn to_json_number(self) -> String {
        self.to_string()
    }

    /// The value with trailing fractional zeros trimmed and no point when it
    /// is whole (`3`, `12.5`): the form of a decimal string field.
    pub fn to_plain_string(self) -> String {
        let s = self.to_string();
        match s.strip_suffix(".0") {
            Some(whole) => whole.to_owned(),
            None => s,
        }
    }
}

/// Parses a decimal into nanos as an `i64`: the hot path of every reader.
pub fn parse_nanos(text: &[u8]) -> Result<i64, DecimalError> {
    if let Some(nanos) = parse_short_nanos(text) {
        return Ok(nanos);
    }
    parse_nanos_checked(text)
}

/// The common case of [`parse_nanos`] in one pass: at most nine digits
/// before the point (so nothing can overflow) and at most nine after.
/// `None` for anything else, which the general parser then accepts or
/// refuses with its reason.
#[inline]
fn parse_short_nanos(text: &[u8]) -> Option<i64> {
    const POW10: [i64; 10] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    // At most 9 + 1 + 9 bytes: at most 18 digits, so nothing overflows.
    if text.len() > 19 {
        return None;
    }
    // The whole part: one to nine digits (a tenth is not the short form).
    let mut value: i64 = 0;
    let mut at = 0;
    while at < text.len() && at < 10 {
        let digit = text[at].wrapping_sub(b'0');
        if digit >= 10 {
            break;
        }
        value = value * 10 + digit as i64;
        at += 1;
    }
    if at == 0 || at > 9 {
        return None;
    }
    if at == text.len() {
        return Some(value * POW10[MAX_FRACTION_DIGITS]);
    }
    if text[at] != b'.' {
        return None;
    }
    // The fraction: one to nine digits, nothing after them.
    let fraction = &text[at + 1..];
    if fraction.is_empty() || fraction.len() > MAX_FRACTION_DIGITS {
        return None;
    }
    for &b in fraction {
        let digit = b.wrapping_sub(b'0');
        if digit >= 10 {
            return None;
        }
        value = value * 10 + digit as i64;
    }
    Some(value * POW10[MAX_FRACTION_DIGITS - fraction.len()])
}

/// [`parse_nanos`] for any input, with every check and its reason.
fn parse_nanos_checked(text: &[u8]) -> Result<i64, DecimalError> {
    if text.is_empty() {
        return Err(DecimalError::Empty);
    }
    let (int_part, frac_part) = match memchr::memchr(b'.', text) {
        Some(dot) => (&text[..dot], Some(&text[dot + 1..])),
        None => (text, None),
    };
    if int_part.is_empty() {
        return Err(DecimalError::NotADecimal);
    }
    let mut whole: i64 = 0;
    for &b in int_part {
        if !b.is_ascii_digit() {
            return Err(DecimalError::NotADecimal);
        }
        whole = whole.checked_mul(10).and_then(|w| w.checked_add((b - b'0') as i64)).ok_or(DecimalError::TooLarge)?;
    }
    let mut frac: i64 = 0;
    if let Some(frac_part) = frac_part {
        if frac_part.is_empty() {
            return Err(DecimalError::NotADecimal);
        }
        if frac_part.len() > MAX_FRACTION_DIGITS {
            if frac_part.iter().all(u8::is_ascii_digit) {
                return Err(DecimalError::TooManyFractionDigits);
            }
            return Err(DecimalError::NotADecimal);
        }
        for &b in frac_part {
            if !b.is_ascii_digit() {
                return Err(DecimalError::NotADecimal);
            }
            frac = frac * 10 + (b - b'0') as i64;
        }
        frac *= 10i64.pow((MAX_FRACTION_DIGITS - frac_part.len()) as u32);
    }
    whole.checked_mul(SCALE as i64).and_then(|w| w.checked_add(frac)).ok_or(DecimalError::TooLarge)
}

impl fmt::Display for Amount {
    /// Writes the number with a point and at least one fractional digit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let negative = self.0 < 0;
        let magnitude = self.0.unsigned_abs();
        let whole = magnitude / SCALE as u128;
        let mut frac = (magnitude % SCALE as u128) as u64;
        if negative {
            f.write_str("-")?;
        }
        if frac == 0 {
            return write!(f, "{whole}.0");
        }
        let mut width = MAX_FRACTION_DIGITS;
        while frac.is_multiple_of(10) {
            frac /= 10;
            width -= 1;
        }
        write!(f, "{whole}.{frac:0width$}")
    }
}

impl std::ops::Add for Amount {
    type Output = Amount;
    /// Adds; panics on `i128` overflow, which needs more than 10^20 records
    /// at the largest value. Hot paths use [`Amount::checked_add`].
    fn add(self, other: Amount) -> Amount {
        Amount(self.0 + other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_short_parser_agrees_with_the_checked_one(
            text in prop_oneof![
                "[0-9]{0,12}(\\.[0-9]{0,11})?",
                "[0-9.]{0,20}",
                "[0-9a.+e-]{0,8}",
                any::<Vec<u8>>().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ]
        ) {
            let checked = parse_nanos_checked(text.as_bytes());
            if let Some(short) = parse_short_nanos(text.as_bytes()) {
                prop_assert_eq!(Ok(short), checked);
            }
            prop_assert_eq!(parse_nanos(text.as_bytes()), checked);
        }
    }

    #[test]
    fn the_short_parser_takes_the_usual_forms_and_leaves_the_rest() {
        for (text, nanos) in [
            ("0", 0),
            ("1200", 1_200_000_000_000),
            ("0.17000", 170_000_000),
            ("999999999.999999999", 999_999_999_999_999_999),
        ] {
            assert_eq!(parse_short_nanos(text.as_bytes()), Some(nanos), "{text}");
            assert_eq!(parse_nanos_checked(text.as_bytes()), Ok(nanos), "{text}");
        }
        for text in ["", ".5", "5.", "1.2.3", "1000000000", "0.0000000001", "-1", "1e3", " 1", "9223372036.854775807"] {
            assert_eq!(parse_short_nanos(text.as_bytes()), None, "{text}");
        }
    }

    /// Found by the `record_checks` fuzz target: nineteen digits and no
    /// point overflowed the short parser's accumulator (a panic in debug
    /// builds, a wrapped value thrown away in release ones).
    #[test]
    fn nineteen_digits_without_a_point_are_too_large_not_an_overflow() {
        for text in ["9223372037185477580", "9999999999999999999", "1000000000000000000"] {
            assert_eq!(parse_short_nanos(text.as_bytes()), None, "{text}");
            assert_eq!(parse_nanos(text.as_bytes()), Err(DecimalError::TooLarge), "{text}");
        }
    }

    #[test]
    fn parses_and_formats() {
        let cases: &[(&str, &str)] = &[
            ("123", "123.0"),
            ("0.0085", "0.0085"),
            ("12.500000000", "12.5"),
            ("0", "0.0"),
            ("0.000000001", "0.000000001"),
            ("007.10", "7.1"),
            ("9223372036.854775807", "9223372036.854775807"),
        ];
        for (input, output) in cases {
            let amount = Amount::parse(input.as_bytes()).unwrap();
            assert_eq!(amount.to_json_number(), *output, "{input}");
        }
    }

    #[test]
    fn refuses_what_the_contract_refuses() {
        let cases: &[(&str, DecimalError)] = &[
            ("", DecimalError::Empty),
            ("-1", DecimalError::NotADecimal),
            ("+1", DecimalError::NotADecimal),
            ("1e3", DecimalError::NotADecimal),
            ("1.2e3", DecimalError::NotADecimal),
            (".5", DecimalError::NotADecimal),
            ("5.", DecimalError::NotADecimal),
            (" 5", DecimalError::NotADecimal),
            ("1.2.3", DecimalError::NotADecimal),
            ("0.0000000001", DecimalError::TooManyFractionDigits),
            ("9223372036.854775808", DecimalError::TooLarge),
            ("99999999999999999999", DecimalError::TooLarge),
            ("NaN", DecimalError::NotADecimal),
        ];
        for (input, error) in cases {
            assert_eq!(Amount::parse(input.as_bytes()), Err(*error), "{input:?}");
        }
    }

    #[test]
    fn a_million_nanos_sum_exactly() {
        let one = Amount::parse(b"0.000000001").unwrap();
        let total = (0..1_000_000).fold(Amount::ZERO, |acc, _| acc.checked_add(one).unwrap());
        assert_eq!(total.to_json_number(), "0.001");
    }

    #[test]
    fn from_unscaled_matches_text() {
        assert_eq!(Amount::from_unscaled(85, 4).unwrap().to_string(), "0.0085");
        assert_eq!(Amount::from_unscaled(1_250_000_000_000, 12).unwrap().to_string(), "1.25");
        assert_eq!(Amount::from_unscaled(1_250_000_000_001, 12), Err(DecimalError::TooManyFractionDigits));
        assert_eq!(Amount::from_unscaled(-1, 2), Err(DecimalError::NotADecimal));
        assert_eq!(Amount::from_unscaled(3, 0).unwrap().to_plain_string(), "3");
    }

    proptest! {
        #[test]
        fn text_round_trips(whole in 0u64..9_000_000_000, frac in 0u32..1_000_000_000, digits in 1usize..=9) {
            let frac = frac as u64 % 10u64.pow(digits as u32);
            let text = format!("{whole}.{frac:0digits$}");
            let amount = Amount::parse(text.as_bytes()).unwrap();
            let again = Amount::parse(amount.to_json_number().as_bytes()).unwrap();
            prop_assert_eq!(amount, again);
            let expected = whole as i128 * SCALE + frac as i128 * 10i128.pow((9 - digits) as u32);
            prop_assert_eq!(amount.nanos(), expected);
        }

        #[test]
        fn sums_are_associative(values in proptest::collection::vec(0i64..i64::MAX / 1024, 0..64), split in 0usize..64) {
            let split = split.min(values.len());
            let all = values.iter().fold(Amount::ZERO, |a, v| a + Amount::from_nanos(*v as i128));
            let left = values[..split].iter().fold(Amount::ZERO, |a, v| a + Amount::from_nanos(*v as i128));
            let right = values[split..].iter().fold(Amount::ZERO, |a, v| a + Amount::from_nanos(*v as i128));
            prop_assert_eq!(all, left + right);
        }
    }

    #[test]
    fn totals_beyond_one_record_parse_back() {
        let two = Amount::from_nanos(2 * i64::MAX as i128);
        assert_eq!(two.to_string(), "18446744073.709551614");
        assert_eq!(Amount::parse_total(two.to_string().as_bytes()), Ok(two));
        assert_eq!(Amount::parse_total(b"0.5"), Ok(Amount::from_nanos(500_000_000)));
        assert_eq!(Amount::parse_total(b"12"), Ok(Amount::from_nanos(12 * SCALE)));
        for bad in [&b""[..], b"1.", b".5", b"1.0000000001", b"-1", b"1e3"] {
            assert!(Amount::parse_total(bad).is_err(), "{bad:?}");
        }
    }
}
