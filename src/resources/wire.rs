//! The JSON shapes of endpoints and recordings (api.md 2.1, 2.2, 4.1-4.3;
//! resources.md), key order fixed by the types (the order of api.md's
//! tables). Optional fields are omitted, never null, except the ones the
//! contract writes as `null` (`sub_account`, `conference_name`, `next`,
//! `previous`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{format_ms, Endpoint, Recording, Registration, DAY_US};
use crate::money::Amount;

/// Storage rate per minute per month (api.md "Recording pricing").
pub const STORAGE_RATE: &str = "0.0004";
const STORAGE_RATE_NANOS: i128 = 400_000;
/// Days of free storage.
pub const FREE_STORAGE_DAYS: i64 = 90;

/// `GET .../Endpoint/{id}/`, both shapes.
#[derive(Debug, Serialize)]
pub struct EndpointBody<'a> {
    /// Name.
    pub alias: &'a str,
    /// Request id: unregistered shape only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_id: Option<&'a str>,
    /// Application URI, or empty.
    pub application: String,
    /// Identifier.
    pub endpoint_id: &'a str,
    /// MD5 of the password: unregistered shape only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<&'a str>,
    /// `/v1/Account/<auth_id>/Endpoint/<endpoint_id>/`
    pub resource_uri: String,
    /// `"true"` or `"false"`.
    pub sip_registered: &'static str,
    /// `sip:<username>@<domain>`
    pub sip_uri: String,
    /// Subaccount or null.
    pub sub_account: Option<&'a str>,
    /// SIP username.
    pub username: &'a str,
    /// Registered shape only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sip_contact: Option<&'a str>,
    /// Registered shape only, `YYYY-MM-DD HH:mm:ss` UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sip_expires: Option<String>,
    /// Registered shape only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sip_user_agent: Option<&'a str>,
}

impl<'a> EndpointBody<'a> {
    /// The body of `endpoint`, registered when `registration` is given.
    pub fn new(
        endpoint: &'a Endpoint,
        registration: Option<&'a Registration>,
        api_id: &'a str,
        sip_domain: &str,
    ) -> EndpointBody<'a> {
        let auth_id = &endpoint.auth_id;
        EndpointBody {
            alias: &endpoint.alias,
            api_id: registration.is_none().then_some(api_id),
            application: match endpoint.application_id.as_str() {
                "" => String::new(),
                id => format!("/v1/Account/{}/Application/{}/", path_segment(auth_id), path_segment(id)),
            },
            endpoint_id: &endpoint.endpoint_id,
            password: registration.is_none().then_some(endpoint.password_md5.as_str()),
            resource_uri: format!(
                "/v1/Account/{}/Endpoint/{}/",
                path_segment(auth_id),
                path_segment(&endpoint.endpoint_id)
            ),
            sip_registered: if registration.is_some() { "true" } else { "false" },
            sip_uri: format!("sip:{}@{sip_domain}", endpoint.username),
            sub_account: Some(endpoint.sub_account.as_str()).filter(|s| !s.is_empty()),
            username: &endpoint.username,
            sip_contact: registration.map(|r| r.sip_contact.as_str()),
            sip_expires: registration.map(|r| format_utc(r.sip_expires_us, "%Y-%m-%d %H:%M:%S")),
            sip_user_agent: registration.map(|r| r.sip_user_agent.as_str()),
        }
    }
}

/// `GET .../Recording/{id}/`.
#[derive(Debug, Serialize)]
pub struct RecordingBody<'a> {
    /// Identifier.
    pub recording_id: &'a str,
    /// The recorded call.
    pub call_uuid: &'a str,
    /// Conference name, null for regular calls.
    pub conference_name: Option<&'a str>,
    /// File URL.
    pub recording_url: &'a str,
    /// `wav` or `mp3`.
    pub recording_format: &'a str,
    /// `conference` or `normal`.
    pub recording_type: &'a str,
    /// End minus start, five fractional digits.
    pub recording_duration_ms: String,
    /// Seconds, rounded to the nearest minute (half up), at least 60.
    pub rounded_recording_duration: i64,
    /// Days stored: 1 in the first 24 hours, one more per further 24 hours.
    pub recording_storage_duration: i64,
    /// Per minute per month.
    pub recording_storage_rate: &'static str,
    /// `"0"` while free, else rate x rounded minutes.
    pub monthly_recording_storage_amount: String,
    /// `YYYY-MM-DD HH:MM:SS.uuuuuu+00:00`
    pub add_time: String,
    /// Request id.
    pub api_id: &'a str,
    /// `/v1/Account/<auth_id>/Recording/<recording_id>/`
    pub resource_uri: String,
    /// Epoch ms, five fractional digits.
    pub recording_start_ms: String,
    /// Epoch ms, five fractional digits.
    pub recording_end_ms: String,
}

impl<'a> RecordingBody<'a> {
    /// The single-retrieval body of `recording` at `now_us`.
    pub fn new(recording: &'a Recording, api_id: &'a str, now_us: i64) -> RecordingBody<'a> {
        let rounded = rounded_duration_secs(recording.end - recording.start);
        let days = storage_days(recording.add_time_us, now_us);
        let monthly = if days <= FREE_STORAGE_DAYS {
            "0".to_owned()
        } else {
            Amount::from_nanos(STORAGE_RATE_NANOS * i128::from(rounded / 60)).to_plain_string()
        };
        RecordingBody {
            recording_id: &recording.recording_id,
            call_uuid: &recording.call_uuid,
            conference_name: Some(recording.conference_name.as_str()).filter(|s| !s.is_empty()),
            recording_url: &recording.recording_url,
            recording_format: &recording.recording_format,
            recording_type: &recording.recording_type,
            recording_duration_ms: format_ms(recording.end - recording.start),
            rounded_recording_duration: rounded,
            recording_storage_duration: days,
            recording_storage_rate: STORAGE_RATE,
            monthly_recording_storage_amount: monthly,
            add_time: format_add_time(recording.add_time_us),
            api_id,
            resource_uri: format!(
                "/v1/Account/{}/Recording/{}/",
                path_segment(&recording.auth_id),
                path_segment(&recording.recording_id)
            ),
            recording_start_ms: format_ms(recording.start),
            recording_end_ms: format_ms(recording.end),
        }
    }
}

/// One item of `GET .../Recording/` (api.md 2.2 rule 1).
#[derive(Debug, Serialize)]
pub struct RecordingItem<'a> {
    /// `YYYY-MM-DD HH:MM:SS.uuuuuu+00:00`
    pub add_time: String,
    /// The recorded call.
    pub call_uuid: &'a str,
    /// Conference name, null for regular calls.
    pub conference_name: Option<&'a str>,
    /// End minus start, five fractional digits.
    pub recording_duration_ms: String,
    /// `wav` or `mp3`.
    pub recording_format: &'a str,
    /// Identifier.
    pub recording_id: &'a str,
    /// `conference` or `normal`.
    pub recording_type: &'a str,
    /// File URL.
    pub recording_url: &'a str,
}

impl<'a> RecordingItem<'a> {
    /// The list item of `recording`.
    pub fn new(recording: &'a Recording) -> RecordingItem<'a> {
        RecordingItem {
            add_time: format_add_time(recording.add_time_us),
            call_uuid: &recording.call_uuid,
            conference_name: Some(recording.conference_name.as_str()).filter(|s| !s.is_empty()),
            recording_duration_ms: format_ms(recording.end - recording.start),
            recording_format: &recording.recording_format,
            recording_id: &recording.recording_id,
            recording_type: &recording.recording_type,
            recording_url: &recording.recording_url,
        }
    }
}

/// `GET .../Recording/`.
#[derive(Debug, Serialize)]
pub struct RecordingList<'a> {
    /// Request id.
    pub api_id: &'a str,
    /// Paging.
    pub meta: ListMeta,
    /// This page.
    pub objects: Vec<RecordingItem<'a>>,
}

/// `meta` of a listing.
#[derive(Debug, Serialize)]
pub struct ListMeta {
    /// Page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Matches over all pages.
    pub total_count: u64,
    /// Relative path of the next page, or null.
    pub next: Option<String>,
    /// Relative path of the previous page, or null.
    pub previous: Option<String>,
}

/// Seconds of `units` (1e-5 ms) rounded to the nearest multiple of 60,
/// half up, at least 60.
pub fn rounded_duration_secs(units: i64) -> i64 {
    const MINUTE: i64 = 60 * 1000 * 100_000;
    ((units.max(0) + MINUTE / 2) / MINUTE).max(1) * 60
}

/// Days a recording added at `add_time_us` has been stored at `now_us`.
pub fn storage_days(add_time_us: i64, now_us: i64) -> i64 {
    1 + (now_us - add_time_us).max(0) / DAY_US
}

fn format_utc(us: i64, pattern: &str) -> String {
    DateTime::<Utc>::from_timestamp_micros(us).map(|t| t.format(pattern).to_string()).unwrap_or_default()
}

/// `YYYY-MM-DD HH:MM:SS.uuuuuu+00:00`
pub fn format_add_time(us: i64) -> String {
    format_utc(us, "%Y-%m-%d %H:%M:%S%.6f+00:00")
}

/// The bytes [`path_segment`] percent-encodes: all but RFC 3986's
/// unreserved characters.
const NOT_UNRESERVED: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `text` as one segment of a URI's path, so that an id holding `/`, `%`
/// or a space names itself when the link is followed (an id of letters,
/// digits, `-`, `.`, `_` and `~` is unchanged, but for the ids `.` and
/// `..`: clients remove such segments before they send a path, RFC 3986
/// section 5.2.4, so their dots are encoded).
pub fn path_segment(text: &str) -> String {
    match text {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => percent_encoding::utf8_percent_encode(text, NOT_UNRESERVED).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_links_are_percent_encoded_path_segments() {
        assert_eq!(path_segment("MA001SHGA32ZDQYG9N8T"), "MA001SHGA32ZDQYG9N8T");
        assert_eq!(path_segment("9f3c-41.a_b~"), "9f3c-41.a_b~");
        assert_eq!(path_segment("a/b"), "a%2Fb");
        assert_eq!(path_segment("rec%41 x"), "rec%2541%20x");
        // Dot segments a client would remove, not send.
        assert_eq!(path_segment("."), "%2E");
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(path_segment("..."), "...");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    #[test]
    fn storage_and_rounding_rules() {
        let seconds = |s: i64| s * 100_000_000;
        assert_eq!(rounded_duration_secs(0), 60);
        assert_eq!(rounded_duration_secs(seconds(29)), 60);
        assert_eq!(rounded_duration_secs(seconds(89)), 60);
        assert_eq!(rounded_duration_secs(seconds(90)), 120);
        assert_eq!(rounded_duration_secs(34_510_000_000), 360); // 345.1 s
        assert_eq!(storage_days(0, 0), 1);
        assert_eq!(storage_days(0, DAY_US - 1), 1);
        assert_eq!(storage_days(0, DAY_US), 2);
        assert_eq!(storage_days(DAY_US, 0), 1);
        assert_eq!(format_add_time(1_795_182_301_123_456), "2026-11-20 13:45:01.123456+00:00");
    }

    #[test]
    fn monthly_amount_is_charged_after_ninety_days() {
        let recording = Recording {
            recording_id: "R".into(),
            auth_id: "A".into(),
            subaccount_auth: String::new(),
            call_uuid: "C".into(),
            from_number: String::new(),
            to_number: String::new(),
            conference_name: String::new(),
            conference_uuid: String::new(),
            mpc_name: String::new(),
            mpc_uuid: String::new(),
            recording_url: "u".into(),
            recording_format: "mp3".into(),
            recording_type: "normal".into(),
            start: 0,
            end: 34_510_000_000,
            add_time_us: 0,
        };
        let free = RecordingBody::new(&recording, "id", 89 * DAY_US);
        assert_eq!((free.recording_storage_duration, free.monthly_recording_storage_amount.as_str()), (90, "0"));
        let paid = RecordingBody::new(&recording, "id", 90 * DAY_US);
        assert_eq!((paid.recording_storage_duration, paid.monthly_recording_storage_amount.as_str()), (91, "0.0024"));
        assert_eq!(paid.recording_duration_ms, "345100.00000");
        assert_eq!(paid.conference_name, None);
    }
}
