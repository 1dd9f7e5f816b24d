//! Page tokens: opaque, self-contained cursors.
//!
//! A token carries the offset of the next page, the resolved window (so a
//! defaulted window does not drift when the day changes between pages) and
//! a digest of the request's other parameters, sealed with an HMAC-SHA256
//! tag so that a token we did not issue, or one that was altered, is
//! refused. No server-side state is kept.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{Datelike, NaiveDate};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const VERSION: u8 = 1;
const BODY_LEN: usize = 1 + 8 + 4 + 4 + 16;
const TAG_LEN: usize = 16;

/// The key that seals page tokens. Every process that answers one
/// deployment's requests must use the same key.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl Default for TokenKey {
    /// The built-in key, used when no secret is configured.
    fn default() -> TokenKey {
        TokenKey::from_secret("telemeter page token key v1")
    }
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A key derived from a secret string.
    pub fn from_secret(secret: &str) -> TokenKey {
        use sha2::Digest;
        TokenKey(Sha256::digest(secret.as_bytes()).into())
    }

    fn tag(&self, body: &[u8]) -> [u8; TAG_LEN] {
        #[allow(clippy::expect_used)]
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(body);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&full[..TAG_LEN]);
        tag
    }
}

/// What a page token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageToken {
    /// Index of the first row of the page.
    pub offset: u64,
    /// The window's first day.
    pub from: NaiveDate,
    /// The window's end day (exclusive).
    pub to: NaiveDate,
    /// Digest of the request's parameters (see `UsageParams::digest`).
    pub digest: [u8; 16],
}

impl PageToken {
    /// The token's text: URL-safe base64, no padding.
    pub fn encode(&self, key: &TokenKey) -> String {
        let mut bytes = Vec::with_capacity(BODY_LEN + TAG_LEN);
        bytes.push(VERSION);
        bytes.extend_from_slice(&self.offset.to_be_bytes());
        bytes.extend_from_slice(&self.from.num_days_from_ce().to_be_bytes());
        bytes.extend_from_slice(&self.to.num_days_from_ce().to_be_bytes());
        bytes.extend_from_slice(&self.digest);
        let tag = key.tag(&bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Reads a token; `None` for anything we did not issue with `key`.
    pub fn decode(text: &str, key: &TokenKey) -> Option<PageToken> {
        if text.len() > 128 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() != BODY_LEN + TAG_LEN || bytes[0] != VERSION {
            return None;
        }
        let (body, tag) = bytes.split_at(BODY_LEN);
        let expected = key.tag(body);
        // Constant-time comparison of the tag.
        if expected.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) != 0 {
            return None;
        }
        let offset = u64::from_be_bytes(body[1..9].try_into().ok()?);
        let from = NaiveDate::from_num_days_from_ce_opt(i32::from_be_bytes(body[9..13].try_into().ok()?))?;
        let to = NaiveDate::from_num_days_from_ce_opt(i32::from_be_bytes(body[13..17].try_into().ok()?))?;
        let digest = body[17..33].try_into().ok()?;
        Some(PageToken { offset, from, to, digest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn token() -> PageToken {
        PageToken {
            offset: 200,
            from: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
            to: NaiveDate::from_ymd_opt(2026, 11, 8).unwrap(),
            digest: [7; 16],
        }
    }

    #[test]
    fn round_trips_and_refuses_other_keys() {
        let key = TokenKey::default();
        let text = token().encode(&key);
        assert_eq!(PageToken::decode(&text, &key), Some(token()));
        assert_eq!(PageToken::decode(&text, &TokenKey::from_secret("other")), None);
    }

    proptest! {
        #[test]
        fn hostile_tokens_are_refused_not_crashed_on(text in ".{0,200}") {
            prop_assert_eq!(PageToken::decode(&text, &TokenKey::default()), None);
        }

        #[test]
        fn any_altered_character_is_refused(position in 0usize..66, replacement in "[A-Za-z0-9_-]") {
            let key = TokenKey::default();
            let text = token().encode(&key);
            let mut altered: Vec<char> = text.chars().collect();
            let position = position % altered.len();
            let replacement = replacement.chars().next().unwrap();
            prop_assume!(altered[position] != replacement);
            altered[position] = replacement;
            let altered: String = altered.into_iter().collect();
            // The last character holds padding bits that base64 may ignore.
            prop_assume!(position != text.len() - 1);
            prop_assert_eq!(PageToken::decode(&altered, &key), None);
        }
    }
}
