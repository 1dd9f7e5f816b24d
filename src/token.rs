//! Page tokens: opaque, self-contained cursors, and the keys that seal them.
//!
//! A token carries the offset of the next page, the resolved window (so a
//! defaulted window does not drift when the day changes between pages), a
//! digest of the request's other parameters, and the snapshot it was cut
//! from: a digest of the whole result (every row of every page, the other
//! charges, the currency). It is sealed with an HMAC-SHA256 tag, so a token
//! we did not issue, or one that was altered, is refused; a token whose
//! result has changed since (the data changed) is refused by
//! [`crate::summary::Summary::requested_page`]. No server-side state is kept.
//!
//! Decoding checks every field, whatever the tag says: a window inside the
//! dates a request can name and ordered, an offset past the first page.
//!
//! Keys are never built in: a [`TokenKey`] comes from a secret
//! (`TELEMETER_TOKEN_KEY`) or from a key file of random bytes
//! ([`TokenKey::load_or_create`]: a store's `token.key`, or the state
//! directory's for raw data directories).

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{Datelike, NaiveDate};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

const VERSION: u8 = 2;
const BODY_LEN: usize = 1 + 8 + 4 + 4 + 16 + 16;
const TAG_LEN: usize = 16;
/// Length of a version-1 token (no snapshot), to name it in the refusal.
const V1_LEN: usize = 1 + 8 + 4 + 4 + 16 + TAG_LEN;
/// The largest offset a token may carry: far above any result's rows.
const MAX_OFFSET: u64 = 1 << 48;
const KEY_LEN: usize = 32;

/// The key that seals page tokens. Every process that answers one
/// deployment's requests must use the same key.
#[derive(Clone)]
pub struct TokenKey([u8; KEY_LEN]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A key derived from a secret string (`TELEMETER_TOKEN_KEY`).
    pub fn from_secret(secret: &str) -> TokenKey {
        use sha2::Digest;
        TokenKey(Sha256::digest(secret.as_bytes()).into())
    }

    /// A fresh key of random bytes from the operating system.
    pub fn random() -> Result<TokenKey> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::External(format!("no random bytes for a page-token key: {e}")))?;
        Ok(TokenKey(bytes))
    }

    /// The key in the file at `path` (64 hex digits and a newline); when
    /// there is none, a random key written there first, readable by its
    /// owner only (mode 0600). Processes racing to create it all end up
    /// with the one that was written first.
    pub fn load_or_create(path: &Path) -> Result<TokenKey> {
        if let Some(key) = TokenKey::read(path)? {
            return Ok(key);
        }
        let key = TokenKey::random()?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|e| Error::External(format!("no random bytes: {e}")))?;
        let temporary = dir.join(format!(".{name}.tmp-{}", hex(&nonce)));
        let written = write_private(&temporary, format!("{}\n", hex(&key.0)).as_bytes());
        // A hard link publishes the complete file under its name, or fails
        // when another process published one first.
        let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
        let _ = std::fs::remove_file(&temporary);
        match linked {
            Ok(()) => {
                crate::durable::sync_dir(dir)?;
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => TokenKey::read(path)?
                .ok_or_else(|| Error::io(path, "the key file disappeared while it was being created")),
            Err(e) => Err(Error::io(path, format!("cannot create the page-token key: {e}"))),
        }
    }

    /// The key in the file at `path`; `None` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<TokenKey>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, format!("cannot read the page-token key: {e}"))),
        };
        let digits = text.strip_suffix('\n').unwrap_or(&text);
        let mut bytes = [0u8; KEY_LEN];
        let valid = digits.len() == 2 * KEY_LEN
            && digits.bytes().all(|b| b.is_ascii_hexdigit())
            && bytes
                .iter_mut()
                .enumerate()
                .all(|(i, byte)| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map(|value| *byte = value).is_ok());
        if !valid {
            return Err(Error::io(path, "not a page-token key (expected 64 hex digits)"));
        }
        Ok(Some(TokenKey(bytes)))
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a new file that only its owner may read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
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
    /// Digest of the result the token was cut from (see
    /// `Summary::snapshot`): the pages after it are of that result only.
    pub snapshot: [u8; 16],
}

/// Why a page token was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token sealed with this key: malformed, altered, or another key's.
    NotIssued,
    /// A token of an earlier layout (before tokens carried their snapshot).
    EarlierVersion,
    /// Sealed with this key, but a field is out of range: what is wrong.
    Invalid(&'static str),
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
        bytes.extend_from_slice(&self.snapshot);
        seal(&bytes, key)
    }

    /// Reads a token sealed with `key` and checks every field.
    pub fn decode(text: &str, key: &TokenKey) -> Result<PageToken, Refusal> {
        if text.len() > 128 {
            return Err(Refusal::NotIssued);
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| Refusal::NotIssued)?;
        if bytes.len() == V1_LEN && bytes[0] == 1 {
            return Err(Refusal::EarlierVersion);
        }
        if bytes.len() != BODY_LEN + TAG_LEN || bytes[0] != VERSION {
            return Err(Refusal::NotIssued);
        }
        let (body, tag) = bytes.split_at(BODY_LEN);
        let expected = key.tag(body);
        // Constant-time comparison of the tag.
        if expected.iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b)) != 0 {
            return Err(Refusal::NotIssued);
        }
        let mut fields = Fields(&body[1..]);
        let offset = u64::from_be_bytes(fields.take());
        let from = day(i32::from_be_bytes(fields.take()))?;
        let to = day(i32::from_be_bytes(fields.take()))?;
        let digest = fields.take();
        let snapshot = fields.take();
        if from >= to {
            return Err(Refusal::Invalid("its window ends before it starts"));
        }
        if offset == 0 || offset > MAX_OFFSET {
            return Err(Refusal::Invalid("its offset is not that of a later page"));
        }
        Ok(PageToken { offset, from, to, digest, snapshot })
    }
}

/// The day `days` after 0000-12-31, when a request could name it (years
/// 0000 to 9999, as `from_date` and `to_date` are written).
fn day(days: i32) -> Result<NaiveDate, Refusal> {
    let out_of_range = Refusal::Invalid("its window is outside the years 0000 to 9999");
    let date = NaiveDate::from_num_days_from_ce_opt(days).ok_or(out_of_range.clone())?;
    if !(0..=9999).contains(&date.year()) {
        return Err(out_of_range);
    }
    Ok(date)
}

/// The fields of a token body, read in order (the length was checked).
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
}

/// The text of a token with body `body`: the body and its tag, URL-safe
/// base64 without padding. Public for the fuzz targets, which seal bodies
/// of their own to reach the checks behind the tag.
#[doc(hidden)]
pub fn seal(body: &[u8], key: &TokenKey) -> String {
    let mut bytes = Vec::with_capacity(body.len() + TAG_LEN);
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&key.tag(body));
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> TokenKey {
        TokenKey::from_secret("unit tests")
    }

    fn token() -> PageToken {
        PageToken {
            offset: 200,
            from: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
            to: NaiveDate::from_ymd_opt(2026, 11, 8).unwrap(),
            digest: [7; 16],
            snapshot: [9; 16],
        }
    }

    /// A body sealed with `key`, whatever its fields say: what a holder of
    /// the key could forge.
    fn sealed(body: &[u8], key: &TokenKey) -> String {
        seal(body, key)
    }

    fn body(offset: u64, from: i32, to: i32) -> Vec<u8> {
        let mut body = vec![VERSION];
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&from.to_be_bytes());
        body.extend_from_slice(&to.to_be_bytes());
        body.extend_from_slice(&[0; 32]);
        body
    }

    #[test]
    fn round_trips_and_refuses_other_keys() {
        let text = token().encode(&key());
        assert_eq!(PageToken::decode(&text, &key()), Ok(token()));
        assert_eq!(PageToken::decode(&text, &TokenKey::from_secret("other")), Err(Refusal::NotIssued));
    }

    #[test]
    fn sealed_tokens_with_fields_out_of_range_are_refused() {
        let days = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap().num_days_from_ce();
        let (nov1, nov8) = (days(2026, 11, 1), days(2026, 11, 8));
        assert!(PageToken::decode(&sealed(&body(3, nov1, nov8), &key()), &key()).is_ok());
        let cases = [
            body(3, nov8, nov1),
            body(3, nov1, nov1),
            body(0, nov1, nov8),
            body(MAX_OFFSET + 1, nov1, nov8),
            body(3, days(-261_826, 12, 15), nov8),
            body(3, nov1, days(10_000, 1, 1)),
            body(3, i32::MIN, nov8),
            body(3, nov1, i32::MAX),
        ];
        for case in cases {
            assert!(matches!(PageToken::decode(&sealed(&case, &key()), &key()), Err(Refusal::Invalid(_))), "{case:?}");
        }
    }

    #[test]
    fn tokens_of_the_first_layout_are_named() {
        let mut v1 = body(3, 700_000, 700_007);
        v1[0] = 1;
        v1.truncate(V1_LEN - TAG_LEN);
        assert_eq!(PageToken::decode(&sealed(&v1, &key()), &key()), Err(Refusal::EarlierVersion));
    }

    #[test]
    fn key_files_are_created_private_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/token.key");
        let first = TokenKey::load_or_create(&path).unwrap();
        let again = TokenKey::load_or_create(&path).unwrap();
        assert_eq!(first.0, again.0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 65);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let other = TokenKey::load_or_create(&dir.path().join("other.key")).unwrap();
        assert_ne!(first.0, other.0, "every key file gets its own random key");
        std::fs::write(&path, "not a key\n").unwrap();
        assert!(TokenKey::load_or_create(&path).unwrap_err().chain().contains("64 hex digits"));
        // Only this file's own entries are left: no temporary files.
        let names: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["token.key"]);
    }

    proptest! {
        #[test]
        fn hostile_tokens_are_refused_not_crashed_on(text in ".{0,200}") {
            prop_assert!(PageToken::decode(&text, &key()).is_err());
        }

        #[test]
        fn any_altered_character_is_refused(position in 0usize..88, replacement in "[A-Za-z0-9_-]") {
            let text = token().encode(&key());
            let mut altered: Vec<char> = text.chars().collect();
            let position = position % altered.len();
            let replacement = replacement.chars().next().unwrap();
            prop_assume!(altered[position] != replacement);
            altered[position] = replacement;
            let altered: String = altered.into_iter().collect();
            prop_assert_eq!(PageToken::decode(&altered, &key()), Err(Refusal::NotIssued));
        }

        #[test]
        fn any_sealed_body_decodes_to_a_sane_token_or_is_refused(body in proptest::collection::vec(any::<u8>(), BODY_LEN)) {
            let mut body = body;
            body[0] = VERSION;
            if let Ok(token) = PageToken::decode(&sealed(&body, &key()), &key()) {
                prop_assert!(token.from < token.to);
                prop_assert!((0..=9999).contains(&token.from.year()) && (0..=9999).contains(&token.to.year()));
                prop_assert!(token.offset > 0 && token.offset <= MAX_OFFSET);
            }
        }
    }
}
