//! The usage summary request: a query string (or CLI flags) in, a checked
//! [`UsageRequest`] out. The 400s of the parameters and the window are
//! raised here; a page token cut from other data is refused by the page
//! (`summary::Summary::page`).
//!
//! The HTTP server and `summary --query` share this code: repeated keys,
//! comma lists and percent-encoding are read the same way, unknown keys are
//! dropped and an `auth_id` key is ignored (the path's account is used);
//! [`dropped_keys`] names them for a warning, the answer unchanged.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};

use crate::error::{BadRequest, Notice};
use crate::records::ProductSet;
use crate::records::{Country, Direction, Product};
use crate::time::{self, Granularity, Window};
use crate::token::{PageToken, Refusal, TokenKey};

/// Rows per page when the request does not say.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// Largest `page_size`.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// The keys the usage summary honours, in the order they are checked.
pub const KEYS: [&str; 12] = [
    "subaccount_auth",
    "granularity",
    "from_date",
    "to_date",
    "product",
    "error_code",
    "hangup_cause",
    "direction",
    "country",
    "page_size",
    "page_token",
    "timezone",
];

/// The parameters of a request, each checked, before dates are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageParams {
    /// Scope to one subaccount.
    pub subaccount_auth: Option<String>,
    /// Bucket size.
    pub granularity: Granularity,
    /// Explicit first day.
    pub from_date: Option<NaiveDate>,
    /// Explicit day after the last.
    pub to_date: Option<NaiveDate>,
    /// Products; `Other` means `other_charges`.
    pub products: ProductSet,
    /// Error code filter.
    pub error_code: Option<String>,
    /// Hangup cause filter.
    pub hangup_cause: Option<String>,
    /// Direction filter.
    pub direction: Option<Direction>,
    /// Country filter.
    pub country: Option<Country>,
    /// Rows per page.
    pub page_size: u32,
    /// The cursor of a later page.
    pub page_token: Option<String>,
    /// Explicit reporting time zone.
    pub timezone: Option<Tz>,
}

impl Default for UsageParams {
    fn default() -> UsageParams {
        UsageParams {
            subaccount_auth: None,
            granularity: Granularity::Day,
            from_date: None,
            to_date: None,
            products: ProductSet::ALL,
            error_code: None,
            hangup_cause: None,
            direction: None,
            country: None,
            page_size: DEFAULT_PAGE_SIZE,
            page_token: None,
            timezone: None,
        }
    }
}

impl UsageParams {
    /// Parses a raw query string (`a=1&b=2`, percent-encoded, `+` for space).
    pub fn parse_query(query: &str) -> Result<UsageParams, BadRequest> {
        UsageParams::from_pairs(decode_query(query)?)
    }

    /// Checks decoded key/value pairs, in the order given.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Result<UsageParams, BadRequest> {
        let mut values: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        for (key, value) in pairs {
            if let Some(known) = KEYS.iter().find(|k| **k == key) {
                values.entry(known).or_default().push(value);
            }
        }
        let mut params = UsageParams::default();
        for key in KEYS {
            let Some(given) = values.get(key) else { continue };
            if key == "product" {
                params.products = parse_products(given)?;
                continue;
            }
            let value = single(key, given)?;
            match key {
                "subaccount_auth" => {
                    if value.is_empty() {
                        return Err(bad(key, value, "expected a non-empty subaccount auth ID"));
                    }
                    if value.chars().any(char::is_control) {
                        return Err(bad(key, value, "an auth ID has no control character"));
                    }
                    params.subaccount_auth = Some(value.to_owned());
                }
                "granularity" => {
                    params.granularity = Granularity::parse(value)
                        .ok_or_else(|| bad(key, value, "expected one of hour, day, month, year"))?;
                }
                "from_date" | "to_date" => {
                    let date = time::check_date(value).map_err(|e| bad(key, value, &e.to_string()))?;
                    if key == "from_date" {
                        params.from_date = Some(date);
                    } else {
                        params.to_date = Some(date);
                    }
                }
                "error_code" | "hangup_cause" => {
                    if value.chars().any(char::is_control) {
                        return Err(bad(key, value, "a code has no control character"));
                    }
                    let code = Some(value.to_owned());
                    if key == "error_code" {
                        params.error_code = code;
                    } else {
                        params.hangup_cause = code;
                    }
                }
                "direction" => {
                    params.direction = Some(
                        Direction::parse(value.as_bytes())
                            .ok_or_else(|| bad(key, value, "expected inbound or outbound"))?,
                    );
                }
                "country" => {
                    params.country = Some(Country::parse(value.as_bytes()).ok_or_else(|| {
                        bad(key, value, "expected an ISO-3166-1 alpha-2 code of two upper-case letters, e.g. US")
                    })?);
                }
                "page_size" => {
                    params.page_size = value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_PAGE_SIZE).contains(n) && value.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| bad(key, value, "expected an integer from 1 to 1000"))?;
                }
                "page_token" => params.page_token = (!value.is_empty()).then(|| value.to_owned()),
                "timezone" => {
                    params.timezone = Some(
                        value
                            .parse::<Tz>()
                            .map_err(|_| bad(key, value, "expected an IANA time zone name, e.g. America/New_York"))?,
                    );
                }
                _ => {}
            }
        }
        Ok(params)
    }

    /// A digest of every parameter but the token, with the account: what a
    /// page token is bound to.
    pub fn digest(&self, auth_id: &str) -> [u8; 16] {
        let mut hash = Sha256::new();
        let mut put = |label: &str, value: Option<&str>| {
            hash.update(label.as_bytes());
            match value {
                Some(v) => {
                    hash.update([1]);
                    hash.update((v.len() as u64).to_le_bytes());
                    hash.update(v.as_bytes());
                }
                None => hash.update([0]),
            }
        };
        put("auth_id", Some(auth_id));
        put("subaccount_auth", self.subaccount_auth.as_deref());
        put("granularity", Some(self.granularity.as_str()));
        put("from_date", self.from_date.map(|d| d.to_string()).as_deref());
        put("to_date", self.to_date.map(|d| d.to_string()).as_deref());
        let products: Vec<&str> = self.products.iter().map(Product::as_str).collect();
        put("product", Some(&products.join(",")));
        put("error_code", self.error_code.as_deref());
        put("hangup_cause", self.hangup_cause.as_deref());
        put("direction", self.direction.map(Direction::as_str));
        put("country", self.country.as_ref().map(Country::as_str));
        put("page_size", Some(&self.page_size.to_string()));
        put("timezone", self.timezone.map(|tz| tz.name()));
        let digest = hash.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        out
    }
}

/// What the usage summary drops of a request's keys, one notice per key
/// (first seen first): a key that is not a parameter (with the parameter
/// it is likely a misspelling of), and `auth_id` (the path's account is
/// used). The answer is the same with or without them; the commands say
/// them on stderr.
pub fn dropped_keys<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<Notice> {
    let mut seen: Vec<&str> = Vec::new();
    let mut notices = Vec::new();
    for key in keys {
        if KEYS.contains(&key) || seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let shown = crate::error::printable(key);
        let text = if key == "auth_id" {
            "query key 'auth_id' was ignored: the account is the one of the request path (--auth-id)".to_owned()
        } else {
            match did_you_mean(key) {
                Some(known) => {
                    format!("query key '{shown}' is not an API parameter and was ignored (did you mean '{known}'?)")
                }
                None => format!(
                    "query key '{shown}' is not an API parameter and was ignored (the parameters are {})",
                    KEYS.join(", ")
                ),
            }
        };
        notices.push(Notice(text));
    }
    notices
}

/// The parameter `key` is most likely a misspelling of: the same letters
/// but for case, `-`, `_` and spaces, else within two edits.
pub fn did_you_mean(key: &str) -> Option<&'static str> {
    let plain = |text: &str| -> String {
        text.chars().filter(|c| !matches!(c, '_' | '-' | ' ' | '.')).flat_map(char::to_lowercase).collect()
    };
    let given = plain(key);
    if given.is_empty() {
        return None;
    }
    if let Some(known) = KEYS.iter().find(|k| plain(k) == given) {
        return Some(known);
    }
    // Short keys get one edit: two would turn "to" into many things.
    let most = if given.chars().count() <= 4 { 1 } else { 2 };
    KEYS.iter()
        .map(|known| (edit_distance(&given, &plain(known)), *known))
        .filter(|(distance, _)| *distance <= most)
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance between two short texts, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The key/value pairs of a raw query string (`?a=1&b=2`, percent-encoded,
/// `+` for space), in order; a known key whose value is not UTF-8 once
/// decoded is a 400.
pub fn decode_query(query: &str) -> Result<Vec<(String, String)>, BadRequest> {
    let query = query.strip_prefix('?').unwrap_or(query);
    check_utf8(query)?;
    Ok(form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
}

/// A 400 for a known key whose value is not UTF-8 once percent-decoded:
/// decoding would put U+FFFD in its place, a value the client never sent.
fn check_utf8(query: &str) -> Result<(), BadRequest> {
    let decode = |text: &str| percent_encoding::percent_decode_str(&text.replace('+', " ")).collect::<Vec<u8>>();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key);
        let Some(key) = std::str::from_utf8(&key).ok().and_then(|key| KEYS.iter().find(|k| **k == key)) else {
            continue;
        };
        if std::str::from_utf8(&decode(value)).is_err() {
            return Err(BadRequest::new(*key, format!("invalid {key} '{value}': not UTF-8 once percent-decoded")));
        }
    }
    Ok(())
}

fn bad(key: &str, value: &str, allowed: &str) -> BadRequest {
    BadRequest::new(key, format!("invalid {key} '{value}': {allowed}"))
}

fn single<'a>(key: &str, given: &'a [String]) -> Result<&'a str, BadRequest> {
    match given {
        [one] => Ok(one),
        [first, rest @ ..] if rest.iter().all(|v| v == first) => Ok(first),
        _ => Err(BadRequest::new(
            key,
            format!(
                "parameter {key} is given more than once with different values ({}): give it once",
                given.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

fn parse_products(given: &[String]) -> Result<ProductSet, BadRequest> {
    let mut set = ProductSet::default();
    for value in given {
        for name in value.split(',') {
            if name == "all" {
                set = ProductSet::ALL;
                continue;
            }
            let product = Product::parse(name).ok_or_else(|| {
                bad("product", name, "expected one or more of message, voice, zentrunk, transcription, other, all")
            })?;
            set = set.with(product);
        }
    }
    Ok(set)
}

/// A request ready to run: parameters, the resolved window and the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRequest {
    /// The account, from the path (or `--auth-id`).
    pub auth_id: String,
    /// The checked parameters.
    pub params: UsageParams,
    /// Whether the time zone was named by the request or the account (and
    /// so is reported in `meta.timezone`).
    pub timezone_named: bool,
    /// The window, resolved once (a later page takes it from its token).
    pub window: Window,
    /// Index of the first row of the page.
    pub offset: u64,
    /// What page tokens of this request are bound to.
    pub digest: [u8; 16],
    /// The snapshot of the result the request's page token was cut from
    /// (`None` on page 1): a later page is only cut from the same result.
    pub snapshot: Option<[u8; 16]>,
}

impl UsageRequest {
    /// Resolves dates and the page: defaults from `now` in the request's
    /// zone (else `account_tz`, else UTC), window caps, the page token.
    pub fn resolve(
        auth_id: &str,
        params: UsageParams,
        now: DateTime<Utc>,
        account_tz: Option<Tz>,
        key: &TokenKey,
    ) -> Result<UsageRequest, BadRequest> {
        let tz = params.timezone.or(account_tz).unwrap_or(Tz::UTC);
        let timezone_named = params.timezone.is_some() || account_tz.is_some();
        let digest = params.digest(auth_id);
        let (window, offset, snapshot) = match &params.page_token {
            Some(text) => {
                let token = PageToken::decode(text, key).map_err(|refusal| refused(text, refusal))?;
                if token.digest != digest {
                    return Err(BadRequest::new(
                        "page_token",
                        "invalid page_token: it was issued for a request with other parameters; \
                         send page_token with all other parameters unchanged",
                    ));
                }
                if token.offset % u64::from(params.page_size) != 0 {
                    return Err(refused(text, Refusal::Invalid("its offset is not the first row of a page")));
                }
                let window = Window::new(token.from, token.to, params.granularity, tz)
                    .map_err(|e| BadRequest::new("page_token", format!("invalid page_token: {}", e.message)))?;
                (window, token.offset, Some(token.snapshot))
            }
            None => {
                let defaults = Window::default_dates(now, tz);
                let from = params.from_date.unwrap_or(defaults.from);
                let to = params.to_date.unwrap_or(defaults.to);
                // A date the request did not send is said to be a default.
                let defaulted = match (params.from_date, params.to_date) {
                    (None, Some(_)) => format!(" (from_date defaults to 7 days before today: {from})"),
                    (Some(_), None) => format!(" (to_date defaults to today: {to})"),
                    _ => String::new(),
                };
                let window = Window::new(from, to, params.granularity, tz)
                    .map_err(|e| BadRequest::new(e.parameter, format!("{}{defaulted}", e.message)))?;
                (window, 0, None)
            }
        };
        Ok(UsageRequest { auth_id: auth_id.to_owned(), params, timezone_named, window, offset, digest, snapshot })
    }

    /// The token of the page that starts at row `offset` of the result
    /// whose snapshot is `snapshot`.
    pub fn token_at(&self, offset: u64, snapshot: [u8; 16], key: &TokenKey) -> String {
        PageToken { offset, from: self.window.from, to: self.window.to, digest: self.digest, snapshot }.encode(key)
    }
}

/// The 400 of a page token that `PageToken::decode` (or a check of its
/// fields against the request) refused.
fn refused(text: &str, refusal: Refusal) -> BadRequest {
    let message = match refusal {
        Refusal::NotIssued => format!("invalid page_token '{text}': not a page token issued by this service"),
        Refusal::EarlierVersion => "invalid page_token: it was issued by an earlier version of this service; \
                                    start again from page 1 (send the request without page_token)"
            .to_owned(),
        Refusal::Invalid(what) => format!("invalid page_token: {what}"),
    };
    BadRequest::new("page_token", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value that is no text, or an id or code with a control character,
    /// is a 400 naming its key, not a value the client never sent.
    #[test]
    fn values_that_are_not_text_are_refused() {
        for (query, key) in [
            ("subaccount_auth=SA%FF", "subaccount_auth"),
            ("subaccount_auth=SA%00x", "subaccount_auth"),
            ("error_code=4%C3", "error_code"),
            ("hangup_cause=40%0A00", "hangup_cause"),
        ] {
            let error = UsageParams::parse_query(query).expect_err(query);
            assert_eq!(error.parameter, key, "{query}: {}", error.message);
        }
        // Unknown keys are dropped, however they are encoded; U+FFFD sent is kept.
        assert!(UsageParams::parse_query("x=%FF&%FF=1").is_ok());
        let sent = UsageParams::parse_query("subaccount_auth=SA%EF%BF%BD").expect("U+FFFD is text");
        assert_eq!(sent.subaccount_auth.as_deref(), Some("SA\u{fffd}"));
    }

    /// A request value quoted in a 400 (the CLI prints it on the terminal).
    #[test]
    fn control_characters_of_request_values_are_escaped() {
        let params = UsageParams::parse_query("granularity=%1B%5B31mday").expect_err("a bad granularity");
        assert!(params.message.contains("'\\u{1b}[31mday'"), "{}", params.message);
        assert!(!params.message.chars().any(char::is_control), "{}", params.message);
    }

    fn error(query: &str) -> String {
        UsageParams::parse_query(query).unwrap_err().message
    }

    #[test]
    fn reads_the_query_as_the_api_receives_it() {
        let params = UsageParams::parse_query(
            "product=voice,message&product=zentrunk&granularity=hour&auth_id=someone-else&foo=bar\
             &country=US&direction=inbound&page_size=5&error_code=30&hangup_cause=4000\
             &from_date=2026-11-01&to_date=2026%2D11%2D02&subaccount_auth=SA%201&page_token=",
        )
        .unwrap();
        assert_eq!(params.granularity, Granularity::Hour);
        let products: Vec<_> = params.products.iter().collect();
        assert_eq!(products, [Product::Message, Product::Voice, Product::Zentrunk]);
        assert_eq!(params.to_date, time::parse_date("2026-11-02"));
        assert_eq!(params.subaccount_auth.as_deref(), Some("SA 1"));
        assert_eq!(params.page_token, None);
        assert_eq!(params.page_size, 5);
        assert_eq!(UsageParams::parse_query("product=all,voice").unwrap().products, ProductSet::ALL);
        assert_eq!(UsageParams::parse_query("").unwrap(), UsageParams::default());
    }

    #[test]
    fn refuses_malformed_values_naming_parameter_value_and_what_is_allowed() {
        assert_eq!(error("granularity=week"), "invalid granularity 'week': expected one of hour, day, month, year");
        assert_eq!(error("direction=up"), "invalid direction 'up': expected inbound or outbound");
        assert!(error("country=usa").starts_with("invalid country 'usa'"));
        assert!(error("country=us").starts_with("invalid country 'us'"));
        assert_eq!(error("page_size=0"), "invalid page_size '0': expected an integer from 1 to 1000");
        assert!(error("page_size=1001").starts_with("invalid page_size '1001'"));
        // `+` is a space in a query string; `%2B` is a plus sign.
        assert!(error("page_size=+5").starts_with("invalid page_size ' 5'"));
        assert!(error("page_size=%2B5").starts_with("invalid page_size '+5'"));
        assert!(error("from_date=2026-02-30").starts_with("invalid from_date '2026-02-30'"));
        assert!(error("to_date=26-01-01").starts_with("invalid to_date '26-01-01'"));
        assert!(error("product=voice,fax").starts_with("invalid product 'fax'"));
        assert!(error("subaccount_auth=").starts_with("invalid subaccount_auth ''"));
        assert!(error("timezone=Mars/Olympus").starts_with("invalid timezone 'Mars/Olympus'"));
        assert!(error("granularity=day&granularity=hour").contains("more than once"));
        assert!(UsageParams::parse_query("granularity=day&granularity=day").is_ok());
    }

    #[test]
    fn dropped_keys_are_named_with_the_parameter_they_likely_misspell() {
        let cases = [
            ("fromdate", Some("from_date")),
            ("FROM_DATE", Some("from_date")),
            ("from-date", Some("from_date")),
            ("todate", Some("to_date")),
            ("to_dat", Some("to_date")),
            ("granularty", Some("granularity")),
            ("pagesize", Some("page_size")),
            ("prodcut", Some("product")),
            ("products", Some("product")),
            ("timezon", Some("timezone")),
            ("tz", None),
            ("foo", None),
            ("", None),
            ("x", None),
        ];
        for (key, expected) in cases {
            assert_eq!(did_you_mean(key), expected, "{key}");
        }
        let notices = dropped_keys(["fromdate", "granularity", "fromdate", "auth_id", "foo"]);
        let texts: Vec<String> = notices.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "query key 'fromdate' is not an API parameter and was ignored (did you mean 'from_date'?)",
                "query key 'auth_id' was ignored: the account is the one of the request path (--auth-id)",
                "query key 'foo' is not an API parameter and was ignored (the parameters are subaccount_auth, \
                 granularity, from_date, to_date, product, error_code, hangup_cause, direction, country, \
                 page_size, page_token, timezone)",
            ]
        );
        assert!(dropped_keys(KEYS).is_empty());
    }

    #[test]
    fn defaults_come_from_now() {
        let now = DateTime::parse_from_rfc3339("2026-11-20T23:30:00Z").unwrap().with_timezone(&Utc);
        let key = TokenKey::from_secret("unit tests");
        let request = UsageRequest::resolve("A", UsageParams::default(), now, None, &key).unwrap();
        assert_eq!(request.window.from, time::parse_date("2026-11-13").unwrap());
        assert_eq!(request.window.to, time::parse_date("2026-11-20").unwrap());
        let kolkata: Tz = "Asia/Kolkata".parse().unwrap();
        let request = UsageRequest::resolve("A", UsageParams::default(), now, Some(kolkata), &key).unwrap();
        assert_eq!(request.window.to, time::parse_date("2026-11-21").unwrap());
        assert!(request.timezone_named);
    }

    #[test]
    fn tokens_are_bound_to_parameters_and_window() {
        let key = TokenKey::from_secret("unit tests");
        let day1 = DateTime::parse_from_rfc3339("2026-11-20T12:00:00Z").unwrap().with_timezone(&Utc);
        let day2 = DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z").unwrap().with_timezone(&Utc);
        let first = UsageRequest::resolve("A", UsageParams::default(), day1, None, &key).unwrap();
        let token = first.token_at(100, [0; 16], &key);
        let params = UsageParams { page_token: Some(token.clone()), ..UsageParams::default() };
        let second = UsageRequest::resolve("A", params.clone(), day2, None, &key).unwrap();
        assert_eq!(second.window, first.window);
        assert_eq!(second.offset, 100);
        let changed = UsageParams { page_size: 7, ..params.clone() };
        assert!(UsageRequest::resolve("A", changed, day2, None, &key).is_err());
        assert!(UsageRequest::resolve("B", params, day2, None, &key).is_err());
        let mut tampered = token.into_bytes();
        tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
        let params = UsageParams { page_token: Some(String::from_utf8(tampered).unwrap()), ..UsageParams::default() };
        assert!(UsageRequest::resolve("A", params, day2, None, &key).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_page_token_is_a_400_or_a_request_with_a_sane_window_and_offset(
            text in "[A-Za-z0-9_-]{0,100}",
            offset in proptest::prelude::any::<u64>(),
            from in -4_000_000i32..4_000_000,
            length in -10i32..5_000_000,
            page_size in 1u32..=1000,
            granularity in 0usize..4,
        ) {
            let key = TokenKey::from_secret("unit tests");
            let now = DateTime::parse_from_rfc3339("2026-11-20T12:00:00Z").unwrap().with_timezone(&Utc);
            let granularity = [Granularity::Hour, Granularity::Day, Granularity::Month, Granularity::Year][granularity];
            let params = UsageParams { page_size, granularity, ..UsageParams::default() };
            let with = |token: String| UsageParams { page_token: Some(token), ..params.clone() };
            let refused = UsageRequest::resolve("A", with(text), now, None, &key).unwrap_err();
            proptest::prop_assert_eq!(refused.parameter, "page_token");
            // Sealed with the right key, whatever the fields: what a holder
            // of the key could forge.
            let day = NaiveDate::from_num_days_from_ce_opt;
            if let (Some(from), Some(to)) = (day(from), day(from.saturating_add(length))) {
                let token = PageToken { offset, from, to, digest: params.digest("A"), snapshot: [0; 16] };
                match UsageRequest::resolve("A", with(token.encode(&key)), now, None, &key) {
                    Ok(request) => {
                        use chrono::Datelike;
                        proptest::prop_assert!(request.window.from < request.window.to);
                        proptest::prop_assert!((0..=9999).contains(&request.window.from.year()));
                        proptest::prop_assert!((0..=9999).contains(&request.window.to.year()));
                        proptest::prop_assert!(request.offset > 0 && request.offset % u64::from(page_size) == 0);
                    }
                    Err(bad) => proptest::prop_assert_eq!(bad.parameter, "page_token"),
                }
            }
        }
    }
}
