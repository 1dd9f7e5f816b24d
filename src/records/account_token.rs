//! Setting an account's credentials in `accounts.csv`: the
//! `auth_token_sha256` cell of its row rewritten (the column added when the
//! file has none), every other byte of the file kept as it was.
//! `telemeter accounts set-token` uses it for a data folder (the file
//! replaced atomically, [`set_in_folder`]) and for a store (the new file
//! published as a new generation, `store::accounts`).

use std::path::Path;

use super::accounts::{decode_hex32, Accounts};
use crate::error::{Error, Result};

/// The column of the token's hash (resources.md).
pub const TOKEN_COLUMN: &str = "auth_token_sha256";

/// What to do when `accounts.csv` has no row for the account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Refuse (a misspelled id must not create an account).
    Refuse,
    /// Add a row: the account id and the hash, other cells empty
    /// (currency `USD`).
    Add,
}

/// `bytes` of an accounts file (`None`: there is none) with `auth_id`'s
/// `auth_token_sha256` set to `sha256_hex` (64 hex digits). Only the
/// account's rows change (and, when the column is new, the header and an
/// empty cell at the end of every row). The result is checked: it parses,
/// the account has the hash, every other account is as it was.
pub fn with_token(bytes: Option<&[u8]>, auth_id: &str, sha256_hex: &str, missing: Missing) -> Result<Vec<u8>> {
    if sha256_hex.len() != 64 || !sha256_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Internal(format!("not a SHA-256 in hex: '{sha256_hex}'")));
    }
    crate::records::check_id(auth_id).map_err(|reason| Error::Usage(format!("account '{auth_id}' {reason}")))?;
    let Some(bytes) = bytes else {
        return match missing {
            Missing::Add => Ok(format!("auth_id,{TOKEN_COLUMN}\n{auth_id},{sha256_hex}\n").into_bytes()),
            Missing::Refuse => Err(Error::Usage(format!(
                "there is no accounts.csv, so no account '{auth_id}'; give --add to create it with a row for '{auth_id}'"
            ))),
        };
    };
    let before = Accounts::parse(bytes, "accounts.csv")?;
    let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF".as_slice()) {
        Some(body) => (&bytes[..3], body),
        None => (&bytes[..0], bytes),
    };
    let mut lines: Vec<&[u8]> = body.split(|b| *b == b'\n').collect();
    let ends_with_newline = lines.last().is_some_and(|last| last.is_empty());
    if ends_with_newline {
        lines.pop();
    }
    let crlf = lines.first().is_some_and(|header| header.ends_with(b"\r"));
    let header = super::csv::split_line(lines.first().copied().unwrap_or_default())
        .map_err(|reason| Error::bad_file("accounts.csv", format!("unreadable header (line 1): {reason}")))?;
    let column = |name: &str| header.iter().position(|h| h == name.as_bytes());
    let auth_column =
        column("auth_id").ok_or_else(|| Error::bad_file("accounts.csv", "missing required column 'auth_id'"))?;
    let token_column = column(TOKEN_COLUMN);
    let width = header.len() + usize::from(token_column.is_none());
    let token_at = token_column.unwrap_or(header.len());

    let mut out: Vec<u8> = bom.to_vec();
    let mut found = false;
    for (index, line) in lines.iter().enumerate() {
        let (text, cr) = match line.strip_suffix(b"\r") {
            Some(text) => (text, &b"\r"[..]),
            None => (*line, &b""[..]),
        };
        if index == 0 {
            out.extend_from_slice(text);
            if token_column.is_none() {
                out.extend_from_slice(format!(",{TOKEN_COLUMN}").as_bytes());
            }
        } else {
            // Parsed above: every row splits and has the header's width.
            let mut fields = super::csv::split_line(text).map_err(|reason| Error::Internal(reason.to_string()))?;
            if fields.get(auth_column).is_some_and(|id| id == auth_id.as_bytes()) {
                found = true;
                fields.resize(width, Vec::new());
                fields[token_at] = sha256_hex.as_bytes().to_vec();
                out.extend_from_slice(&join(&fields));
            } else {
                out.extend_from_slice(text);
                if token_column.is_none() {
                    out.push(b',');
                }
            }
        }
        out.extend_from_slice(cr);
        if index + 1 < lines.len() || ends_with_newline {
            out.push(b'\n');
        }
    }
    if !found {
        if missing == Missing::Refuse {
            let known: Vec<&str> = before.iter().map(|a| a.auth_id.as_str()).collect();
            return Err(Error::Usage(format!(
                "accounts.csv has no account '{auth_id}' (it has: {}); give --add to add a row for it",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
        let mut fields = vec![Vec::new(); width];
        fields[auth_column] = auth_id.as_bytes().to_vec();
        fields[token_at] = sha256_hex.as_bytes().to_vec();
        out.extend_from_slice(&join(&fields));
        out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    }
    check(&before, &out, auth_id, sha256_hex)?;
    Ok(out)
}

/// Sets the token hash of `auth_id` in `DATA/accounts.csv` ([`with_token`]),
/// replacing the file atomically (a reader sees the old file or the new
/// one, never a part). Returns the new file's bytes.
pub fn set_in_folder(data: &Path, auth_id: &str, sha256_hex: &str, missing: Missing) -> Result<Vec<u8>> {
    if !data.is_dir() {
        return Err(Error::io(data, "not a data folder (no such directory)"));
    }
    let path = data.join("accounts.csv");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(&path, e)),
    };
    let new = with_token(bytes.as_deref(), auth_id, sha256_hex, missing)?;
    let mut file = crate::durable::AtomicFile::create(&path)?;
    std::io::Write::write_all(&mut file, &new).map_err(|e| Error::io(&path, e))?;
    file.commit()?;
    Ok(new)
}

/// One CSV row: fields quoted where they must be (RFC 4180).
fn join(fields: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        if field.iter().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n')) {
            line.push(b'"');
            for &b in field {
                if b == b'"' {
                    line.push(b'"');
                }
                line.push(b);
            }
            line.push(b'"');
        } else {
            line.extend_from_slice(field);
        }
    }
    line
}

/// The rewritten file parses, `auth_id` has the hash, and every other
/// account is unchanged (a bug here must not touch another account's
/// credentials).
fn check(before: &Accounts, bytes: &[u8], auth_id: &str, sha256_hex: &str) -> Result<()> {
    let after = Accounts::parse(bytes, "accounts.csv")?;
    let wrong = |what: &str| Err(Error::Internal(format!("accounts.csv rewritten for '{auth_id}': {what}")));
    match after.get(auth_id) {
        Some(account) if account.auth_token_sha256.is_some_and(|hash| Some(hash) == decode_hex32(sha256_hex)) => {}
        _ => return wrong("the account lacks the new hash"),
    }
    let others = |accounts: &Accounts| -> Vec<super::accounts::Account> {
        accounts.iter().filter(|a| a.auth_id != auth_id).cloned().collect()
    };
    if others(before) != others(&after) {
        return wrong("another account changed");
    }
    if let (Some(old), Some(new)) = (before.get(auth_id), after.get(auth_id)) {
        let same = |a: &super::accounts::Account| (a.currency.clone(), a.timezone, a.allowlist.clone());
        if same(old) != same(new) {
            return wrong("the account's other columns changed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(c: char) -> String {
        std::iter::repeat_n(c, 64).collect()
    }

    #[test]
    fn sets_the_cell_of_the_account_and_keeps_every_other_byte() {
        let file = format!(
            "auth_id,currency,note,auth_token_sha256,allowed_ips\nA,USD,\"x, y\",,\nB,EUR,\"q\"\"\",{},::1\n",
            hash('0')
        );
        let new = with_token(Some(file.as_bytes()), "B", &hash('b'), Missing::Refuse).unwrap();
        let expected = format!(
            "auth_id,currency,note,auth_token_sha256,allowed_ips\nA,USD,\"x, y\",,\nB,EUR,\"q\"\"\",{},::1\n",
            hash('b')
        );
        assert_eq!(String::from_utf8(new).unwrap(), expected);
    }

    #[test]
    fn adds_the_column_when_missing_keeping_line_ends_and_bom() {
        let file = b"\xEF\xBB\xBFauth_id,currency\r\nA,USD\r\nB,EUR\r\n";
        let new = with_token(Some(file), "A", &hash('a'), Missing::Refuse).unwrap();
        let expected = format!("\u{feff}auth_id,currency,auth_token_sha256\r\nA,USD,{}\r\nB,EUR,\r\n", hash('a'));
        assert_eq!(String::from_utf8(new).unwrap(), expected);
        // No final newline: none added after the last row.
        let new = with_token(Some(b"auth_id\nA"), "A", &hash('c'), Missing::Refuse).unwrap();
        assert_eq!(String::from_utf8(new).unwrap(), format!("auth_id,auth_token_sha256\nA,{}", hash('c')));
    }

    #[test]
    fn an_unknown_account_is_refused_unless_added() {
        let file = b"auth_id,currency\nA,USD\n";
        let error = with_token(Some(file), "NOSUCH", &hash('a'), Missing::Refuse).unwrap_err().to_string();
        assert_eq!(error, "accounts.csv has no account 'NOSUCH' (it has: A); give --add to add a row for it");
        let new = with_token(Some(file), "N", &hash('d'), Missing::Add).unwrap();
        assert_eq!(
            String::from_utf8(new).unwrap(),
            format!("auth_id,currency,auth_token_sha256\nA,USD,\nN,,{}\n", hash('d'))
        );
        assert!(with_token(None, "N", &hash('d'), Missing::Refuse).is_err());
        let new = with_token(None, "N", &hash('d'), Missing::Add).unwrap();
        assert_eq!(Accounts::parse(&new, "a").unwrap().get("N").unwrap().auth_token_sha256, decode_hex32(&hash('d')));
    }

    #[test]
    fn duplicate_rows_of_the_account_all_change_and_bad_files_are_refused() {
        let new = with_token(Some(b"auth_id,currency\nA,USD\nA,USD\n"), "A", &hash('e'), Missing::Refuse).unwrap();
        assert_eq!(Accounts::parse(&new, "a").unwrap().get("A").unwrap().auth_token_sha256, decode_hex32(&hash('e')));
        assert!(with_token(Some(b"auth_id,currency\nA,usd\n"), "A", &hash('e'), Missing::Refuse).is_err());
        assert!(with_token(Some(b"currency\nUSD\n"), "A", &hash('e'), Missing::Add).is_err());
        assert!(with_token(Some(b"auth_id\nA\n"), "A", "abc", Missing::Refuse).is_err());
    }
}
