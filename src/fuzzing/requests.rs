//! The request targets: query strings ([`query_parser`]) and page tokens
//! ([`token_decoder`]).

use chrono::NaiveDate;
use chrono_tz::Tz;

use super::now;
use crate::query::{UsageParams, UsageRequest, KEYS};
use crate::time::Granularity;
use crate::token::{self, PageToken, TokenKey};

// -------------------------------------------------------------- query_parser

/// A query string (lossily decoded), parsed and resolved for account `A`
/// at a fixed `now`, with no account zone and with two far-apart ones.
pub fn query_parser(data: &[u8]) {
    let query = String::from_utf8_lossy(data);
    let params = match UsageParams::parse_query(&query) {
        Ok(params) => params,
        Err(e) => {
            assert!(KEYS.contains(&e.parameter.as_str()), "a 400 naming an unknown parameter: {e:?}");
            assert!(!e.message.is_empty());
            return;
        }
    };
    let key = TokenKey::from_secret("fuzz");
    for account_tz in [None, Some(Tz::Pacific__Kiritimati), Some(Tz::Pacific__Pago_Pago)] {
        match UsageRequest::resolve("A", params.clone(), now(), account_tz, &key) {
            Ok(request) => {
                if params.page_token.is_none() {
                    assert_eq!(request.offset, 0);
                }
                check_request(&request);
                // Its token resumes the same window on a later day.
                let offset = u64::from(request.params.page_size) * (1 + data.len() as u64);
                let token = request.token_at(offset, [7; 16], &key);
                let later = now() + chrono::Duration::days(3);
                let next = UsageParams { page_token: Some(token), ..params.clone() };
                match UsageRequest::resolve("A", next, later, account_tz, &key) {
                    Ok(again) => {
                        assert_eq!((again.window, again.offset), (request.window.clone(), offset));
                        assert_eq!(again.snapshot, Some([7; 16]));
                    }
                    Err(e) => panic!("the request's own token is refused: {e:?}"),
                }
            }
            Err(e) => assert!(KEYS.contains(&e.parameter.as_str()), "a 400 naming an unknown parameter: {e:?}"),
        }
    }
}

/// A resolved window is ordered, within its granularity's cap, and its
/// buckets tile it. Its instants may be equal: a window of local days that
/// never happened (Pacific/Apia skipped 2011-12-30) is empty.
fn check_request(request: &UsageRequest) {
    let window = &request.window;
    let granularity = request.params.granularity;
    assert!(window.from < window.to, "{window:?}");
    assert!(window.start <= window.end, "{window:?}");
    let days = (window.to - window.from).num_days();
    match granularity {
        Granularity::Hour => assert!(days <= 7, "{window:?}"),
        Granularity::Day => assert!(days <= 92, "{window:?}"),
        Granularity::Month => {
            assert!(window.from.checked_add_months(chrono::Months::new(24)).is_none_or(|cap| window.to <= cap))
        }
        Granularity::Year => {}
    }
    let buckets = window.buckets(granularity);
    if window.start == window.end {
        // Nothing to tile: no bucket holds an instant.
        for i in 0..buckets.len() as u32 {
            assert_eq!(
                buckets.span(i),
                crate::time::Interval { start: window.start, end: window.start },
                "{window:?}: bucket {i} of an empty window"
            );
        }
        return;
    }
    assert!(!buckets.is_empty(), "{window:?}: no bucket");
    let mut at = window.start;
    for i in 0..buckets.len() as u32 {
        let crate::time::Interval { start, end } = buckets.span(i);
        assert!(
            start == at && start < end,
            "{window:?} {granularity:?}: bucket {i} is [{start}, {end}), expected from {at}"
        );
        assert_eq!(buckets.index(start), Some(i));
        at = end;
    }
    assert_eq!(at, window.end, "{window:?}: the buckets end early");
    assert_eq!(buckets.index(window.end), None);
}

// ------------------------------------------------------------- token_decoder

/// Page tokens. The first byte picks the form of the rest: text as sent;
/// a body sealed with the key (past the tag, the decoder's own checks);
/// or an offset and two day numbers, made into a token bound to the
/// request (the decoder's window through `resolve`). The granularity, the
/// zone and the page size (1 or 100) come from the first byte too.
pub fn token_decoder(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else { return };
    let key = TokenKey::from_secret("fuzz");
    let granularity = Granularity::ALL[(control >> 2 & 3) as usize];
    let page_size = if control & 0x40 != 0 { 1 } else { 100 };
    let params = UsageParams { granularity, page_size, ..UsageParams::default() };
    let text = match control & 3 {
        0 => String::from_utf8_lossy(rest).into_owned(),
        1 => token::seal(rest, &key),
        _ => {
            let mut bytes = [0u8; 16];
            let n = rest.len().min(16);
            bytes[..n].copy_from_slice(&rest[..n]);
            let offset =
                u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]);
            let from = i32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            let to = i32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
            let (Some(from), Some(to)) =
                (NaiveDate::from_num_days_from_ce_opt(from), NaiveDate::from_num_days_from_ce_opt(to))
            else {
                return;
            };
            PageToken { offset, from, to, digest: params.digest("A"), snapshot: [7; 16] }.encode(&key)
        }
    };
    let decoded = PageToken::decode(&text, &key).ok();
    if let Some(token) = &decoded {
        assert_eq!(PageToken::decode(&token.encode(&key), &key).ok().as_ref(), Some(token), "no round trip");
        assert!(PageToken::decode(&text, &TokenKey::from_secret("another key")).is_err(), "another key's token");
        assert!(token.from < token.to && token.offset > 0, "decoded {token:?}");
        assert!((0..=9999).contains(&chrono::Datelike::year(&token.from)), "decoded {token:?}");
        assert!((0..=9999).contains(&chrono::Datelike::year(&token.to)), "decoded {token:?}");
    }
    let tz = [Tz::UTC, Tz::Pacific__Kiritimati, Tz::Pacific__Pago_Pago, Tz::Asia__Kolkata][(control >> 4 & 3) as usize];
    let params = UsageParams { page_token: Some(text), timezone: Some(tz), ..params };
    match UsageRequest::resolve("A", params, now(), None, &key) {
        Ok(request) => {
            let Some(token) = decoded else { panic!("resolve took a token that does not decode") };
            assert_eq!((request.window.from, request.window.to, request.offset), (token.from, token.to, token.offset));
            assert_eq!(request.snapshot, Some(token.snapshot));
            assert_eq!(request.offset % u64::from(request.params.page_size), 0);
            check_request(&request);
        }
        Err(e) => assert_eq!(e.parameter, "page_token", "{e:?}"),
    }
}
