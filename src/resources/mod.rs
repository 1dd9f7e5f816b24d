//! SIP endpoints, registrations and recordings (resources.md): the inputs
//! the server answers from besides usage records.
//!
//! [`load`] reads `endpoints.csv`, `registrations.csv` and `recordings/`
//! from a data directory into an SQLite database; [`Store`] answers the
//! server's queries from it. SQLite gives durable, atomic deletes: a
//! recording deleted through the API is written to a `deletions` table, and
//! every later load skips deleted ids, so a delete survives restarts and
//! re-loads of the same files. Re-loading the same files is idempotent: a
//! load replaces the endpoints, registrations and recordings with what the
//! files hold (minus deletions) in one transaction.

pub mod listing;
pub mod load;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::error::{Error, Result};
pub use listing::ListQuery;
pub use load::{load, LoadStats};

/// Microseconds in a day.
pub const DAY_US: i64 = 86_400_000_000;

/// One SIP endpoint, as stored (the password only as its MD5 hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Identifier.
    pub endpoint_id: String,
    /// Owning account.
    pub auth_id: String,
    /// Subaccount auth ID, or empty.
    pub sub_account: String,
    /// Name of the endpoint.
    pub alias: String,
    /// SIP username.
    pub username: String,
    /// Lower-case hex MD5 of the password.
    pub password_md5: String,
    /// Bound application, or empty.
    pub application_id: String,
}

/// One registration of the registrar's current view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The endpoint registered.
    pub endpoint_id: String,
    /// Contact URI of the client.
    pub sip_contact: String,
    /// Expiry, microseconds since the epoch (UTC).
    pub sip_expires_us: i64,
    /// User agent of the client.
    pub sip_user_agent: String,
}

/// One recording, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// Identifier.
    pub recording_id: String,
    /// Owning account.
    pub auth_id: String,
    /// Subaccount auth ID, or empty for the parent.
    pub subaccount_auth: String,
    /// The recorded call.
    pub call_uuid: String,
    /// Source number or SIP endpoint.
    pub from_number: String,
    /// Destination number or SIP endpoint.
    pub to_number: String,
    /// Conference name, or empty for a regular call.
    pub conference_name: String,
    /// Conference UUID, or empty.
    pub conference_uuid: String,
    /// Multiparty call name, or empty.
    pub mpc_name: String,
    /// Multiparty call UUID, or empty.
    pub mpc_uuid: String,
    /// Where the file is.
    pub recording_url: String,
    /// `wav` or `mp3`.
    pub recording_format: String,
    /// `conference` or `normal`.
    pub recording_type: String,
    /// Start, epoch milliseconds in units of 1e-5 ms.
    pub start: i64,
    /// End, epoch milliseconds in units of 1e-5 ms.
    pub end: i64,
    /// Creation instant, microseconds since the epoch (UTC).
    pub add_time_us: i64,
}

/// The database of a server: one connection, shared behind a mutex, so
/// that writes (deletes) are serialized; every query is short.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    connection: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS endpoints (
    endpoint_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, sub_account TEXT NOT NULL, alias TEXT NOT NULL,
    username TEXT NOT NULL, password_md5 TEXT NOT NULL, application_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS registrations (
    endpoint_id TEXT NOT NULL, sip_contact TEXT NOT NULL, sip_expires_us INTEGER NOT NULL,
    sip_user_agent TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS registrations_by_endpoint ON registrations (endpoint_id, sip_expires_us);
CREATE TABLE IF NOT EXISTS recordings (
    recording_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, subaccount_auth TEXT NOT NULL,
    call_uuid TEXT NOT NULL, from_number TEXT NOT NULL, to_number TEXT NOT NULL,
    conference_name TEXT NOT NULL, conference_uuid TEXT NOT NULL, mpc_name TEXT NOT NULL,
    mpc_uuid TEXT NOT NULL, recording_url TEXT NOT NULL, recording_format TEXT NOT NULL,
    recording_type TEXT NOT NULL, start_units INTEGER NOT NULL, end_units INTEGER NOT NULL,
    add_time_us INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS recordings_by_account_time ON recordings (auth_id, add_time_us DESC, recording_id);
CREATE TABLE IF NOT EXISTS deletions (
    recording_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, deleted_at_us INTEGER NOT NULL);
";

/// Opens (creating when needed) the database at `path` with the schema.
pub(crate) fn connect(path: &Path) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let connection = Connection::open(path).map_err(|e| db_error(path, e))?;
    connection.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| db_error(path, e))?;
    connection.pragma_update(None, "journal_mode", "WAL").map_err(|e| db_error(path, e))?;
    connection.pragma_update(None, "synchronous", "NORMAL").map_err(|e| db_error(path, e))?;
    connection.execute_batch(SCHEMA).map_err(|e| db_error(path, e))?;
    Ok(connection)
}

/// An SQLite failure on the database at `path`.
pub(crate) fn db_error(path: &Path, error: rusqlite::Error) -> Error {
    Error::io(path, format!("database error: {error}"))
}

const RECORDING_COLUMNS: &str = "recording_id, auth_id, subaccount_auth, call_uuid, from_number, to_number, \
     conference_name, conference_uuid, mpc_name, mpc_uuid, recording_url, recording_format, recording_type, \
     start_units, end_units, add_time_us";

fn recording_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Recording> {
    Ok(Recording {
        recording_id: row.get(0)?,
        auth_id: row.get(1)?,
        subaccount_auth: row.get(2)?,
        call_uuid: row.get(3)?,
        from_number: row.get(4)?,
        to_number: row.get(5)?,
        conference_name: row.get(6)?,
        conference_uuid: row.get(7)?,
        mpc_name: row.get(8)?,
        mpc_uuid: row.get(9)?,
        recording_url: row.get(10)?,
        recording_format: row.get(11)?,
        recording_type: row.get(12)?,
        start: row.get(13)?,
        end: row.get(14)?,
        add_time_us: row.get(15)?,
    })
}

impl Store {
    /// Opens the database at `path`, creating an empty one when missing.
    pub fn open(path: &Path) -> Result<Store> {
        Ok(Store { path: path.to_owned(), connection: Mutex::new(connect(path)?) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let mut connection =
            self.connection.lock().map_err(|_| Error::Internal("the database lock is poisoned".into()))?;
        f(&mut connection).map_err(|e| db_error(&self.path, e))
    }

    /// The endpoint `endpoint_id` of account `auth_id`, if there is one.
    pub fn endpoint(&self, auth_id: &str, endpoint_id: &str) -> Result<Option<Endpoint>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT endpoint_id, auth_id, sub_account, alias, username, password_md5, application_id \
                 FROM endpoints WHERE endpoint_id = ?1 AND auth_id = ?2",
            )?
            .query_row(params![endpoint_id, auth_id], |row| {
                Ok(Endpoint {
                    endpoint_id: row.get(0)?,
                    auth_id: row.get(1)?,
                    sub_account: row.get(2)?,
                    alias: row.get(3)?,
                    username: row.get(4)?,
                    password_md5: row.get(5)?,
                    application_id: row.get(6)?,
                })
            })
            .optional()
        })
    }

    /// The registration of `endpoint_id` that expires last, if it expires
    /// after `now_us`.
    pub fn active_registration(&self, endpoint_id: &str, now_us: i64) -> Result<Option<Registration>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT endpoint_id, sip_contact, sip_expires_us, sip_user_agent FROM registrations \
                 WHERE endpoint_id = ?1 AND sip_expires_us > ?2 \
                 ORDER BY sip_expires_us DESC, sip_contact, sip_user_agent LIMIT 1",
            )?
            .query_row(params![endpoint_id, now_us], |row| {
                Ok(Registration {
                    endpoint_id: row.get(0)?,
                    sip_contact: row.get(1)?,
                    sip_expires_us: row.get(2)?,
                    sip_user_agent: row.get(3)?,
                })
            })
            .optional()
        })
    }

    /// The recording `recording_id` of account `auth_id`, if there is one.
    pub fn recording(&self, auth_id: &str, recording_id: &str) -> Result<Option<Recording>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {RECORDING_COLUMNS} FROM recordings WHERE recording_id = ?1 AND auth_id = ?2"
            ))?
            .query_row(params![recording_id, auth_id], recording_from_row)
            .optional()
        })
    }

    /// One page of account `auth_id`'s recordings matching `query`, newest
    /// first, and the number of matches over all pages.
    pub fn list_recordings(&self, auth_id: &str, query: &ListQuery) -> Result<(u64, Vec<Recording>)> {
        let mut conditions = vec!["auth_id = ?".to_owned()];
        let mut values: Vec<Value> = vec![Value::Text(auth_id.to_owned())];
        for (column, value) in &query.exact {
            conditions.push(format!("{column} = ?"));
            values.push(Value::Text(value.clone()));
        }
        if let Some(lower) = query.lower_us {
            conditions.push("add_time_us >= ?".to_owned());
            values.push(Value::Integer(lower));
        }
        if let Some(upper) = query.upper_us {
            conditions.push("add_time_us < ?".to_owned());
            values.push(Value::Integer(upper));
        }
        let filter = conditions.join(" AND ");
        self.with(|c| {
            let total: i64 = c
                .prepare_cached(&format!("SELECT COUNT(*) FROM recordings WHERE {filter}"))?
                .query_row(params_from_iter(values.iter()), |row| row.get(0))?;
            let mut page_values = values.clone();
            page_values.push(Value::Integer(i64::from(query.limit)));
            page_values.push(Value::Integer(i64::try_from(query.offset).unwrap_or(i64::MAX)));
            let mut statement = c.prepare_cached(&format!(
                "SELECT {RECORDING_COLUMNS} FROM recordings WHERE {filter} \
                 ORDER BY add_time_us DESC, recording_id ASC LIMIT ? OFFSET ?"
            ))?;
            let rows = statement
                .query_map(params_from_iter(page_values.iter()), recording_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((total.max(0) as u64, rows))
        })
    }

    /// Deletes recording `recording_id` of account `auth_id` for good: the
    /// row goes and the deletion is recorded, so later loads skip the id.
    /// `false` when there was no such recording (absent or already deleted).
    pub fn delete_recording(&self, auth_id: &str, recording_id: &str, now_us: i64) -> Result<bool> {
        self.with(|c| {
            let transaction = c.transaction()?;
            let removed = transaction.execute(
                "DELETE FROM recordings WHERE recording_id = ?1 AND auth_id = ?2",
                params![recording_id, auth_id],
            )?;
            if removed > 0 {
                transaction.execute(
                    "INSERT OR IGNORE INTO deletions (recording_id, auth_id, deleted_at_us) VALUES (?1, ?2, ?3)",
                    params![recording_id, auth_id, now_us],
                )?;
            }
            transaction.commit()?;
            Ok(removed > 0)
        })
    }

    /// A trivial query: whether the database answers.
    pub fn ping(&self) -> Result<()> {
        self.with(|c| c.query_row("SELECT 1", [], |_| Ok(())))
    }
}

/// Formats `units` (1e-5 ms) as a decimal string with five fractional
/// digits: `345100.00000`.
pub fn format_ms(units: i64) -> String {
    let sign = if units < 0 { "-" } else { "" };
    let magnitude = units.unsigned_abs();
    format!("{sign}{}.{:05}", magnitude / 100_000, magnitude % 100_000)
}

/// Parses epoch milliseconds with at most five fractional digits into
/// units of 1e-5 ms; `None` for anything else.
pub fn parse_ms(text: &str) -> Option<i64> {
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (text, ""),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || (text.contains('.') && !digits(fraction)) || whole.len() > 13 {
        return None;
    }
    let significant = fraction.trim_end_matches('0');
    if significant.len() > 5 {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    let mut units: i64 = 0;
    for (i, b) in significant.bytes().enumerate() {
        units += i64::from(b - b'0') * 10i64.pow(4 - i as u32);
    }
    whole.checked_mul(100_000)?.checked_add(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_round_trip_with_five_digits() {
        assert_eq!(parse_ms("1763646301000"), Some(176_364_630_100_000_000));
        assert_eq!(parse_ms("345100.5"), Some(34_510_050_000));
        assert_eq!(format_ms(34_510_050_000), "345100.50000");
        assert_eq!(parse_ms("1.123450000"), Some(112_345));
        assert_eq!(parse_ms("1.123456"), None);
        assert_eq!(parse_ms("-1"), None);
        assert_eq!(parse_ms("1e3"), None);
        assert_eq!(parse_ms("1."), None);
        assert_eq!(parse_ms(""), None);
        assert_eq!(format_ms(0), "0.00000");
    }
}
