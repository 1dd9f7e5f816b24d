//! `accounts.csv`: one row per parent account.

use std::collections::BTreeMap;
use std::path::Path;

use chrono_tz::Tz;

use super::allowlist::Allowlist;
use crate::error::{BadRecord, Error, Location, Result};

/// The currency of an account with no row, or an empty `currency` cell.
pub const DEFAULT_CURRENCY: &str = "USD";

/// One parent account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// The account id.
    pub auth_id: String,
    /// Three upper-case letters.
    pub currency: String,
    /// The name a person knows the account by (the optional `name`
    /// column), for the HTML report; never part of an API answer.
    pub name: Option<String>,
    /// Reporting time zone, when the row names one.
    pub timezone: Option<Tz>,
    /// SHA-256 of the auth token (the `auth_token_sha256` cell's 64 hex
    /// digits), for the server.
    pub auth_token_sha256: Option<[u8; 32]>,
    /// The addresses that may call (the `allowed_ips` cell: IPs or CIDR
    /// blocks), for the server; empty = any.
    pub allowlist: Allowlist,
}

/// Every account of a data set, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accounts {
    by_id: BTreeMap<String, Account>,
}

impl Accounts {
    /// Reads `DATA/accounts.csv`; a missing file means no rows.
    pub fn load(data: &Path) -> Result<Accounts> {
        let path = data.join("accounts.csv");
        if !path.exists() {
            return Ok(Accounts::default());
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        Accounts::parse(&bytes, "accounts.csv")
    }

    /// Parses the bytes of an accounts file named `name` in messages: one
    /// row a line, RFC 4180 quoting within it (no field spans lines here: a
    /// small file people edit), so a stray quote is an error naming its
    /// line and never merges the rows after it (which would give those
    /// accounts the default currency silently).
    pub fn parse(bytes: &[u8], name: &str) -> Result<Accounts> {
        let bytes = crate::records::decode::strip_bom(bytes);
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let mut lines = body.split(|b| *b == b'\n');
        let header_line = lines.next().unwrap_or_default();
        let header_line = header_line.strip_suffix(b"\r").unwrap_or(header_line);
        let headers = crate::records::csv::split_line(header_line)
            .map_err(|reason| Error::bad_file(name, format!("unreadable header (line 1): {reason}")))?;
        // A header that is not what it seems would default every account's
        // currency to USD without a word: a carriage return inside it (a
        // file of `\r` line endings is one line), or a column given twice.
        for (k, header) in headers.iter().enumerate() {
            if header.contains(&b'\r') {
                return Err(Error::bad_file(name, crate::records::csv::CR_IN_HEADER));
            }
            if headers[..k].contains(header) {
                let shown = String::from_utf8_lossy(header);
                let why = format!("column '{}' appears more than once in the header", crate::error::printable(&shown));
                return Err(Error::bad_file(name, why));
            }
        }
        let index = |column: &str| headers.iter().position(|h| h == column.as_bytes());
        let Some(auth_column) = index("auth_id") else {
            return Err(Error::bad_file(name, "missing required column 'auth_id'"));
        };
        let currency_column = index("currency");
        let timezone_column = index("timezone");
        let name_column = index("name");
        let token_column = index("auth_token_sha256");
        let ips_column = index("allowed_ips");
        let mut accounts = Accounts::default();
        let mut places: BTreeMap<String, u64> = BTreeMap::new();
        for (line, text) in (2u64..).zip(lines) {
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let location = Location { file: name.to_owned(), line, is_row: false };
            let shown = || String::from_utf8_lossy(text).chars().take(80).collect::<String>();
            let record =
                crate::records::csv::split_line(text).map_err(|reason| bad(&location, "-", &shown(), &reason))?;
            if record.len() != headers.len() {
                if text.is_empty() {
                    let reason =
                        format!("is an empty line; every line after the header is a row of {} fields", headers.len());
                    return Err(bad(&location, "-", &shown(), &reason));
                }
                let names: Vec<String> = headers.iter().map(|h| String::from_utf8_lossy(h).into_owned()).collect();
                let (column, reason) = crate::records::csv::wrong_width(&names, record.len());
                return Err(bad(&location, column, &shown(), &reason));
            }
            let cell = |column: Option<usize>, label: &str| -> Result<String> {
                let Some(column) = column else { return Ok(String::new()) };
                let bytes = record.get(column).ok_or_else(|| bad(&location, label, "", "is missing (short row)"))?;
                String::from_utf8(bytes.clone())
                    .map_err(|_| bad(&location, label, &String::from_utf8_lossy(bytes), "is not valid UTF-8"))
            };
            let auth_id = cell(Some(auth_column), "auth_id")?;
            if auth_id.is_empty() {
                return Err(bad(&location, "auth_id", &auth_id, "is empty; expected an id"));
            }
            crate::records::check_id(&auth_id).map_err(|reason| bad(&location, "auth_id", &auth_id, reason))?;
            let mut currency = cell(currency_column, "currency")?;
            if currency.is_empty() {
                currency = DEFAULT_CURRENCY.to_owned();
            } else if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
                return Err(bad(&location, "currency", &currency, "is not a currency (three upper-case letters)"));
            }
            let timezone_text = cell(timezone_column, "timezone")?;
            let timezone = match timezone_text.as_str() {
                "" => None,
                zone => {
                    Some(zone.parse::<Tz>().map_err(|_| bad(&location, "timezone", zone, "is not an IANA time zone"))?)
                }
            };
            // The credentials are checked here, where the row is named,
            // so that no store publishes an accounts.csv a server refuses.
            let token = cell(token_column, "auth_token_sha256")?;
            let auth_token_sha256 = match token.as_str() {
                "" => None,
                hex => Some(decode_hex32(hex).ok_or_else(|| {
                    let reason = "is not 64 hex digits (the SHA-256 of the account's API token)";
                    bad(&location, "auth_token_sha256", hex, reason)
                })?),
            };
            let allowed_ips = cell(ips_column, "allowed_ips")?;
            let allowlist = Allowlist::parse(&allowed_ips)
                .map_err(|reason| bad(&location, "allowed_ips", &allowed_ips, &reason))?;
            let known_as = cell(name_column, "name")?;
            let account = Account {
                auth_id: auth_id.clone(),
                currency,
                name: (!known_as.trim().is_empty()).then(|| known_as.trim().to_owned()),
                timezone,
                auth_token_sha256,
                allowlist,
            };
            if let Some(previous) = accounts.by_id.get(&auth_id) {
                if let Some((column, earlier, later)) = first_difference(previous, &account) {
                    let first = places.get(&auth_id).copied().unwrap_or(0);
                    let reason =
                        format!("conflicts with line {first}, another row of account '{auth_id}' ('{earlier}')");
                    return Err(bad(&location, column, &later, &reason));
                }
                continue;
            }
            places.insert(auth_id.clone(), line);
            accounts.by_id.insert(auth_id, account);
        }
        Ok(accounts)
    }

    /// The account's row, if it has one.
    pub fn get(&self, auth_id: &str) -> Option<&Account> {
        self.by_id.get(auth_id)
    }

    /// The currency of an account: its row's, or `USD`.
    pub fn currency(&self, auth_id: &str) -> &str {
        self.get(auth_id).map_or(DEFAULT_CURRENCY, |a| a.currency.as_str())
    }

    /// The account's name, when its row gives one.
    pub fn name(&self, auth_id: &str) -> Option<&str> {
        self.get(auth_id).and_then(|a| a.name.as_deref())
    }

    /// Every account with a row, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Account> {
        self.by_id.values()
    }
}

/// The first column in which two rows of one account differ: its name, and
/// its value in `earlier` and in `later`.
fn first_difference(earlier: &Account, later: &Account) -> Option<(&'static str, String, String)> {
    let zone = |account: &Account| account.timezone.map(|tz| tz.name().to_owned()).unwrap_or_default();
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    let hash = |account: &Account| {
        account.auth_token_sha256.map(|hash| hash.iter().map(|b| format!("{b:02x}")).collect()).unwrap_or_default()
    };
    let ips = |account: &Account| account.allowlist.text().to_owned();
    [
        ("currency", earlier.currency.clone(), later.currency.clone()),
        ("timezone", zone(earlier), zone(later)),
        ("name", text(&earlier.name), text(&later.name)),
        ("auth_token_sha256", hash(earlier), hash(later)),
        ("allowed_ips", ips(earlier), ips(later)),
    ]
    .into_iter()
    .find(|(_, a, b)| a != b)
}

/// The 32 bytes of 64 hex digits (either case); `None` for anything else.
pub fn decode_hex32(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (slot, pair) in out.iter_mut().zip(bytes.chunks(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

fn bad(location: &Location, column: &str, value: &str, reason: &str) -> Error {
    Error::from(BadRecord {
        location: location.clone(),
        column: column.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_currencies_with_defaults() {
        let accounts = Accounts::parse(b"auth_id,currency,extra\nA1,EUR,x\nA2,,y\nA1,EUR,z\n", "accounts.csv").unwrap();
        assert_eq!(accounts.currency("A1"), "EUR");
        assert_eq!(accounts.currency("A2"), "USD");
        assert_eq!(accounts.currency("nobody"), "USD");
        assert_eq!(accounts.name("A1"), None);
    }

    /// A header that would leave every currency at its default is refused:
    /// `\r` line endings (one line), a `\r` in a cell, a column twice.
    /// CRLF is read as LF; a value that is not UTF-8 is shown.
    #[test]
    fn a_damaged_header_is_refused_not_read_as_no_currency() {
        for (bytes, said) in [
            (&b"auth_id,currency\rA1,EUR\rA2,GBP\r"[..], "carriage return"),
            (b"auth_id,curr\rency\nA1,EUR\n", "carriage return"),
            (b"auth_id,currency,currency\nA2,GBP,EUR\n", "appears more than once"),
        ] {
            let error = Accounts::parse(bytes, "accounts.csv").expect_err("refused").to_string();
            assert!(error.contains("accounts.csv") && error.contains(said), "{error}");
        }
        let crlf = Accounts::parse(b"auth_id,allowed_ips\r\nA1,10.0.0.1\r\n", "accounts.csv").unwrap();
        assert!(crlf.get("A1").is_some_and(|a| !a.allowlist.is_open()));
        let error = Accounts::parse(b"auth_id,currency\nA1,E\xffR\n", "accounts.csv").expect_err("not UTF-8");
        assert!(error.to_string().contains("'E\u{fffd}R'"), "{error}");
    }

    /// Two rows of one account must agree: the second names the file, its
    /// line, the first column that differs and both values; identical
    /// rows are one account.
    #[test]
    fn conflicting_rows_of_an_account_name_file_line_column_and_values() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"auth_id,currency\nMA001,EUR\nMA001,USD\n",
                "accounts.csv:3: column 'currency': 'USD' conflicts with line 2, another row of account 'MA001' ('EUR')",
            ),
            (
                b"auth_id,name,timezone\nA,x,UTC\nB,y,\nA,x,Europe/Paris\n",
                "accounts.csv:4: column 'timezone': 'Europe/Paris' conflicts with line 2, another row of account 'A' ('UTC')",
            ),
            (
                b"auth_id,name\nA,North\nA,\n",
                "accounts.csv:3: column 'name': '' conflicts with line 2, another row of account 'A' ('North')",
            ),
        ];
        for (bytes, message) in cases {
            let error = Accounts::parse(bytes, "accounts.csv").unwrap_err().to_string();
            assert_eq!(error, message);
        }
    }

    /// A token hash or an allowlist a server could not read is the file's
    /// error, named by line, column and value, before anything is
    /// published.
    #[test]
    fn unreadable_credentials_name_line_column_and_value() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"auth_id,auth_token_sha256\nA,\nB,xyz\n",
                "accounts.csv:3: column 'auth_token_sha256': 'xyz' is not 64 hex digits",
            ),
            (
                b"auth_id,allowed_ips\nA,10.0.0.0/8 ::1\nB,10.0.0.1 300.1.1.1\n",
                "accounts.csv:3: column 'allowed_ips': '10.0.0.1 300.1.1.1' '300.1.1.1' is not an IP address",
            ),
            (b"auth_id,allowed_ips\nA,10.0.0.0/33\n", "accounts.csv:2: column 'allowed_ips': '10.0.0.0/33'"),
        ];
        for (bytes, message) in cases {
            let error = Accounts::parse(bytes, "accounts.csv").unwrap_err().to_string();
            assert!(error.starts_with(message), "{error}");
        }
        let hash = "4F35504B9BFC58AC6EB51F0F238CFC5DC70D36ED12357AC29CCA2569555E95F5";
        let file = format!("auth_id,auth_token_sha256,allowed_ips\nA,{hash},203.0.113.0/24 2001:db8::/32\n");
        let accounts = Accounts::parse(file.as_bytes(), "accounts.csv").unwrap();
        let account = accounts.iter().next().expect("an account");
        assert_eq!(account.auth_token_sha256, decode_hex32(&hash.to_lowercase()));
        assert!(account.auth_token_sha256.is_some() && !account.allowlist.is_open());
    }

    #[test]
    fn reads_names_trimmed_and_empty_as_none() {
        let file = b"auth_id,name,currency\nA1,\" Northwind, Inc. \",EUR\nA2,,\nA3,  ,\n";
        let accounts = Accounts::parse(file, "accounts.csv").unwrap();
        assert_eq!(accounts.name("A1"), Some("Northwind, Inc."));
        assert_eq!((accounts.name("A2"), accounts.name("A3"), accounts.name("nobody")), (None, None, None));
    }

    #[test]
    fn a_stray_quote_is_its_line_s_error_and_merges_no_rows() {
        let cases: [(&[u8], &str); 5] = [
            (
                b"auth_id,currency,note\nA1,EUR,\"n\nA2,GBP,x\nA3,GBP,y\"\n",
                "accounts.csv:2: column '-': 'A1,EUR,\"n' has a quote that opens field 3",
            ),
            (b"auth_id,currency\nA1,\"EUR\nA2,GBP\nA3,EUR\"\n", "accounts.csv:2: column '-': 'A1,\"EUR' has a quote"),
            (b"auth_id,currency\nA1,EUR\nA2,GB\"P\n", "accounts.csv:3: column '-': 'A2,GB\"P' has a stray quote"),
            (b"auth_id,currency\r\nA1,EUR\r\n\r\nA2,GBP\r\n", "accounts.csv:3: column '-': '' is an empty line"),
            (b"auth_id,currency\nA1,EUR,x\n", "accounts.csv:2: column '-': 'A1,EUR,x' has 3 fields, the header has 2: field 3 and after have no column"),
        ];
        for (bytes, message) in cases {
            let error = Accounts::parse(bytes, "accounts.csv").unwrap_err().to_string();
            assert!(error.starts_with(message), "{error}");
        }
        let accounts =
            Accounts::parse(b"auth_id,currency,note\r\n\"A1\",EUR,\"a, \"\"b\"\"\"\r\nA2,,\r\n", "accounts.csv")
                .unwrap();
        assert_eq!((accounts.currency("A1"), accounts.currency("A2")), ("EUR", "USD"));
    }

    #[test]
    fn refuses_a_bad_currency() {
        let error = Accounts::parse(b"auth_id,currency\nA1,eur\n", "accounts.csv").unwrap_err();
        assert_eq!(
            error.to_string(),
            "accounts.csv:2: column 'currency': 'eur' is not a currency (three upper-case letters)"
        );
    }
}
