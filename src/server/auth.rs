//! Who may call: HTTP Basic credentials (user = auth_id, password = auth
//! token) checked against accounts.csv `auth_token_sha256`, and the
//! account's `allowed_ips` (resources.md, "Credentials and limits").

use std::collections::HashMap;
use std::net::IpAddr;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::records::accounts::{Account, Accounts};
use crate::records::allowlist::Allowlist;

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401: missing, malformed or wrong credentials, or another account's.
    Unauthorized,
    /// 403: the client address is not on the account's allowlist.
    Forbidden,
}

/// One account's credentials.
#[derive(Clone, Debug)]
struct Credential {
    token_sha256: Option<[u8; 32]>,
    allowlist: Allowlist,
}

/// Every account's credentials, parsed once at startup.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    by_id: HashMap<String, Credential>,
}

impl Credentials {
    /// The credential columns of `accounts` (checked when the file was
    /// parsed).
    pub fn from_accounts(accounts: &Accounts) -> Credentials {
        let credential = |account: &Account| Credential {
            token_sha256: account.auth_token_sha256,
            allowlist: account.allowlist.clone(),
        };
        Credentials { by_id: accounts.iter().map(|account| (account.auth_id.clone(), credential(account))).collect() }
    }

    /// Number of accounts that can sign in (those with a token hash).
    pub fn n_with_tokens(&self) -> usize {
        self.by_id.values().filter(|c| c.token_sha256.is_some()).count()
    }

    /// Checks a request for account `auth_id` (the path's) with the
    /// `Authorization` header `authorization`, from `client`.
    pub fn check(&self, auth_id: &str, authorization: Option<&[u8]>, client: Option<IpAddr>) -> Result<(), Refusal> {
        let Basic { user, password: token } = authorization.and_then(parse_basic).ok_or(Refusal::Unauthorized)?;
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let credential = self.by_id.get(auth_id);
        let expected = credential.and_then(|c| c.token_sha256);
        // Compare whatever happens, so that timing tells nothing about
        // which part was wrong.
        let token_ok = constant_time_eq(&presented, &expected.unwrap_or([0; 32])) && expected.is_some();
        if !(token_ok && user == auth_id) {
            return Err(Refusal::Unauthorized);
        }
        let allowed =
            credential.is_some_and(|c| c.allowlist.is_open() || client.is_some_and(|ip| c.allowlist.allows(ip)));
        if !allowed {
            return Err(Refusal::Forbidden);
        }
        Ok(())
    }
}

/// The two parts of a `Basic` authorization.
struct Basic {
    user: String,
    password: String,
}

/// `Basic base64(user:password)` into its two parts.
fn parse_basic(header: &[u8]) -> Option<Basic> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some(Basic { user: user.to_owned(), password: password.to_owned() })
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The hex SHA-256 of a token: what accounts.csv stores.
pub fn token_sha256_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> Credentials {
        let csv = format!(
            "auth_id,currency,auth_token_sha256,allowed_ips\nA,USD,{},\nB,USD,{},10.0.0.0/8 ::1\nC,USD,,\n",
            token_sha256_hex("tokA"),
            token_sha256_hex("tokB").to_uppercase()
        );
        Credentials::from_accounts(&Accounts::parse(csv.as_bytes(), "accounts.csv").unwrap())
    }

    fn basic(user_password: &str) -> Vec<u8> {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password)).into_bytes()
    }

    #[test]
    fn basic_auth_edge_cases() {
        let c = credentials();
        let local: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        assert_eq!(c.check("A", Some(&basic("A:tokA")), local), Ok(()));
        assert_eq!(c.check("A", Some(b"basic QTp0b2tB"), local), Ok(()));
        let unauthorized = Err(Refusal::Unauthorized);
        assert_eq!(c.check("A", None, local), unauthorized);
        assert_eq!(c.check("A", Some(&basic("A:wrong")), local), unauthorized);
        assert_eq!(c.check("A", Some(&basic("A:")), local), unauthorized);
        assert_eq!(c.check("A", Some(&basic("AtokA")), local), unauthorized);
        assert_eq!(c.check("A", Some(&basic("B:tokB")), local), unauthorized);
        assert_eq!(c.check("A", Some(b"Bearer tokA"), local), unauthorized);
        assert_eq!(c.check("A", Some(b"Basic !!!"), local), unauthorized);
        assert_eq!(c.check("C", Some(&basic("C:")), local), unauthorized);
        assert_eq!(c.check("nobody", Some(&basic("nobody:x")), local), unauthorized);
        // The token may contain ':'; the user may not.
        assert_eq!(c.check("B", Some(&basic("B:tokB")), Some("10.9.8.7".parse().unwrap())), Ok(()));
        assert_eq!(c.check("B", Some(&basic("B:tokB")), Some("::1".parse().unwrap())), Ok(()));
        assert_eq!(c.check("B", Some(&basic("B:tokB")), local), Err(Refusal::Forbidden));
        assert_eq!(c.check("B", Some(&basic("B:tokB")), None), Err(Refusal::Forbidden));
    }

    /// Unreadable hashes and allowlists are refused where accounts.csv is
    /// parsed (file:line, column, value), so no server meets one.
    #[test]
    fn refuses_unreadable_hashes_and_allowlists() {
        let bad = Accounts::parse(b"auth_id,auth_token_sha256\nA,abc\n", "accounts.csv").unwrap_err().to_string();
        assert!(bad.starts_with("accounts.csv:2: column 'auth_token_sha256': 'abc'"), "{bad}");
        let bad = Accounts::parse(b"auth_id,allowed_ips\nA,300.0.0.1\n", "accounts.csv").unwrap_err().to_string();
        assert!(bad.contains("'300.0.0.1'"), "{bad}");
    }
}
