//! SIP endpoints, registrations and recordings (resources.md): the inputs
//! the server answers from besides usage records.
//!
//! Two ways to hold them:
//!
//! - **A data directory** (`serve --data`): [`load()`] reads
//!   `endpoints.csv`, `registrations.csv` and `recordings/` into one SQLite
//!   database, replacing what it held (the directory is the whole truth;
//!   re-loading the same files is idempotent).
//! - **A store** (`ingest`, `serve --store`): the resources are part of
//!   the store's generations. Each ingest that brings resource inputs
//!   writes `resources/<ingest>.sqlite` ([`generation::build`]: a copy of
//!   the previous generation's database plus this ingest's changes) and
//!   the manifest that publishes the generation lists it; a failed or
//!   killed ingest leaves the published one as it was. Those files are
//!   never modified after publishing and are opened read-only.
//!
//! Deletions are the one thing written at runtime: a recording deleted
//! through the API is written to a `deletions` table (in the database
//! itself for a data directory; in the store's own `deletions.sqlite`,
//! outside the generations, for a store) and every query leaves deleted
//! recordings out, so a delete survives restarts, re-loads and every later
//! generation, whatever was published meanwhile. The database that holds
//! them is synced before a DELETE is answered, counted in a file beside it
//! and checked on open, so that a lost or damaged one is an error, never a
//! deleted recording shown again ([`deletions`]). [`ResourceDb`] answers the
//! server's queries in both cases.

pub mod deletions;
pub mod generation;
pub mod listing;
pub mod load;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::error::{Error, Result};
pub use generation::Changes;
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

impl Endpoint {
    /// The values of [`ENDPOINT_COLUMNS`], in its order: the one list every
    /// insert of an endpoint binds.
    fn sql_values(&self) -> [&dyn rusqlite::ToSql; 7] {
        [
            &self.endpoint_id,
            &self.auth_id,
            &self.sub_account,
            &self.alias,
            &self.username,
            &self.password_md5,
            &self.application_id,
        ]
    }
}

impl Registration {
    /// The values of [`REGISTRATION_COLUMNS`], in its order.
    fn sql_values(&self) -> [&dyn rusqlite::ToSql; 4] {
        [&self.endpoint_id, &self.sip_contact, &self.sip_expires_us, &self.sip_user_agent]
    }
}

impl Recording {
    /// The values of [`RECORDING_COLUMNS`], in its order: the one list every
    /// insert of a recording binds.
    fn sql_values(&self) -> [&dyn rusqlite::ToSql; 16] {
        [
            &self.recording_id,
            &self.auth_id,
            &self.subaccount_auth,
            &self.call_uuid,
            &self.from_number,
            &self.to_number,
            &self.conference_name,
            &self.conference_uuid,
            &self.mpc_name,
            &self.mpc_uuid,
            &self.recording_url,
            &self.recording_format,
            &self.recording_type,
            &self.start,
            &self.end,
            &self.add_time_us,
        ]
    }
}

/// The database of a server: one connection, shared behind a mutex, so
/// that writes (deletes) are serialized; every query is short.
#[derive(Debug)]
pub struct ResourceDb {
    path: PathBuf,
    /// The database the deletions are written to (`path` for a data
    /// directory's database).
    deletions: PathBuf,
    /// Whether deletions can be written (not a store on a read-only mount).
    writable: bool,
    connection: Mutex<Connection>,
    /// The schema that holds the endpoints, registrations and recordings:
    /// `main` (one database), or `generation` (a store's generation,
    /// attached read-only to its deletions database).
    tables: &'static str,
}

/// Where a store's resources are.
enum Source {
    /// The generation's database.
    Generation(PathBuf),
    /// The `resources.sqlite` of a store of the earlier layout.
    Legacy(PathBuf),
    /// None yet.
    Nothing,
}

/// The tables of endpoints, registrations and recordings, in `schema`.
fn resources_schema(schema: &str) -> String {
    format!(
        "
CREATE TABLE IF NOT EXISTS {schema}.endpoints (
    endpoint_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, sub_account TEXT NOT NULL, alias TEXT NOT NULL,
    username TEXT NOT NULL, password_md5 TEXT NOT NULL, application_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS {schema}.registrations (
    endpoint_id TEXT NOT NULL, sip_contact TEXT NOT NULL, sip_expires_us INTEGER NOT NULL,
    sip_user_agent TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS {schema}.registrations_by_endpoint ON registrations (endpoint_id, sip_expires_us);
CREATE TABLE IF NOT EXISTS {schema}.recordings (
    recording_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, subaccount_auth TEXT NOT NULL,
    call_uuid TEXT NOT NULL, from_number TEXT NOT NULL, to_number TEXT NOT NULL,
    conference_name TEXT NOT NULL, conference_uuid TEXT NOT NULL, mpc_name TEXT NOT NULL,
    mpc_uuid TEXT NOT NULL, recording_url TEXT NOT NULL, recording_format TEXT NOT NULL,
    recording_type TEXT NOT NULL, start_units INTEGER NOT NULL, end_units INTEGER NOT NULL,
    add_time_us INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS {schema}.recordings_by_account_time ON recordings (auth_id, add_time_us DESC, recording_id);
"
    )
}

/// The table of recordings deleted through the API.
const DELETIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS main.deletions (
    recording_id TEXT PRIMARY KEY, auth_id TEXT NOT NULL, deleted_at_us INTEGER NOT NULL);
";

/// The schema name a store's generation database is attached under.
const GENERATION: &str = "generation";

/// [`deletions::check`] of a store's deletions database, for `store verify`
/// and `store repair`.
pub(crate) fn check_deletions(path: &Path) -> Result<()> {
    deletions::check(path, DELETIONS_SCHEMA)
}

/// Opens (creating when needed) the database at `path` with every table:
/// the database of a data directory, which holds its deletions too (so it
/// is opened and checked as a deletions database, [`deletions::open`]).
pub(crate) fn connect(path: &Path) -> Result<Connection> {
    deletions::open(path, &format!("{}{DELETIONS_SCHEMA}", resources_schema("main")))
}

/// Opens (creating when needed) a store's deletions database, checked
/// ([`deletions::open`]).
pub(crate) fn connect_deletions(path: &Path) -> Result<Connection> {
    deletions::open(path, DELETIONS_SCHEMA)
}

/// Opens the database at `path` (creating it and its folder when needed)
/// in the given journal and synchronous modes.
pub(crate) fn connect_with(path: &Path, journal_mode: &str, synchronous: &str) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let connection = Connection::open(path).map_err(|e| db_error(path, e))?;
    connection.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| db_error(path, e))?;
    connection.pragma_update(None, "journal_mode", journal_mode).map_err(|e| db_error(path, e))?;
    connection.pragma_update(None, "synchronous", synchronous).map_err(|e| db_error(path, e))?;
    Ok(connection)
}

/// Why the folder of `path` takes no new byte now (a full disk, a spent
/// quota, a read-only mount, no permission: `store::lease::unwritable`),
/// found by writing one byte to a file of its own there; `None` when it
/// takes them.
fn folder_refuses_writes(path: &Path) -> Option<String> {
    use std::io::Write;
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = folder.join(format!(".write-probe-{}", std::process::id()));
    let written = std::fs::File::create(&probe).and_then(|mut file| file.write_all(b"\n"));
    let _ = std::fs::remove_file(&probe);
    match written {
        Err(e) if crate::store::lease::unwritable(&e) => Some(format!("{}: {e}", folder.display())),
        _ => None,
    }
}

/// An SQLite URI that opens `path` read-only and trusts it not to change
/// (a published generation's file is never modified).
pub(crate) fn immutable_uri(path: &Path) -> Result<String> {
    let text = path.to_str().ok_or_else(|| Error::io(path, "the path is not UTF-8"))?;
    let mut uri = String::from("file:");
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?mode=ro&immutable=1");
    Ok(uri)
}

/// An SQLite failure on the database at `path`.
pub(crate) fn db_error(path: &Path, error: rusqlite::Error) -> Error {
    Error::io(path, format!("database error: {error}"))
}

/// The condition that leaves deleted recordings out (recordings as `r`).
const NOT_DELETED: &str = "NOT EXISTS (SELECT 1 FROM main.deletions AS d WHERE d.recording_id = r.recording_id)";

/// The columns of an endpoint row: every select and insert of one names
/// these, and [`endpoint_from_row`] and `Endpoint::sql_values` follow
/// their order.
const ENDPOINT_COLUMNS: &str = "endpoint_id, auth_id, sub_account, alias, username, password_md5, application_id";

fn endpoint_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Endpoint> {
    Ok(Endpoint {
        endpoint_id: row.get(0)?,
        auth_id: row.get(1)?,
        sub_account: row.get(2)?,
        alias: row.get(3)?,
        username: row.get(4)?,
        password_md5: row.get(5)?,
        application_id: row.get(6)?,
    })
}

/// The columns of a registration row, in the order of
/// [`registration_from_row`] and `Registration::sql_values`.
const REGISTRATION_COLUMNS: &str = "endpoint_id, sip_contact, sip_expires_us, sip_user_agent";

fn registration_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Registration> {
    Ok(Registration {
        endpoint_id: row.get(0)?,
        sip_contact: row.get(1)?,
        sip_expires_us: row.get(2)?,
        sip_user_agent: row.get(3)?,
    })
}

/// `INSERT INTO table (columns) VALUES (?1, ?2, ...)`, one parameter a
/// column of the comma-separated `columns`.
fn insert_sql(table: &str, columns: &str) -> String {
    let n = columns.split(',').count();
    let parameters: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
    format!("INSERT INTO {table} ({columns}) VALUES ({})", parameters.join(", "))
}

/// The columns of a recording row, in the order of [`recording_from_row`]
/// and `Recording::sql_values`.
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

impl ResourceDb {
    /// Opens the database of a data directory at `path` (written by
    /// [`load()`]), creating an empty one when missing.
    pub fn open(path: &Path) -> Result<ResourceDb> {
        let connection = Mutex::new(connect(path)?);
        Ok(ResourceDb { path: path.to_owned(), deletions: path.to_owned(), writable: true, connection, tables: "main" })
    }

    /// The resources of the generation `store` answers from: its
    /// generation's database (read-only), and the store's deletions. A
    /// store written before resources were part of its generations still
    /// answers from its `resources.sqlite`.
    pub fn open_for_store(store: &crate::store::Store) -> Result<ResourceDb> {
        let deletions = store.dir.join(crate::store::DELETIONS_DB);
        match ResourceDb::source_of(store) {
            Source::Generation(path) => {
                // Checked against its sum before SQLite reads a page of it.
                store.check_resources()?;
                ResourceDb::open_generation(Some(&path), &deletions)
            }
            Source::Legacy(path) => ResourceDb::open(&path),
            Source::Nothing => ResourceDb::open_generation(None, &deletions),
        }
    }

    /// The file [`ResourceDb::path`] of the store that [`ResourceDb::open_for_store`]
    /// opens for `store`: equal for two generations that share their
    /// resources (an ingest of records only), so a server following the
    /// store keeps its connection.
    pub fn path_for_store(store: &crate::store::Store) -> PathBuf {
        match ResourceDb::source_of(store) {
            Source::Generation(path) | Source::Legacy(path) => path,
            Source::Nothing => store.dir.join(crate::store::DELETIONS_DB),
        }
    }

    fn source_of(store: &crate::store::Store) -> Source {
        match &store.manifest.resources {
            Some(name) => Source::Generation(store.dir.join(name)),
            None => {
                let legacy = store.dir.join(crate::store::LEGACY_RESOURCES_DB);
                if legacy.exists() {
                    Source::Legacy(legacy)
                } else {
                    Source::Nothing
                }
            }
        }
    }

    /// Opens a generation's database `resources` (`None`: a generation
    /// without resources, so no rows) read-only, with the deletions
    /// database `deletions` (created when missing) for runtime writes.
    ///
    /// When the deletions database cannot be opened for writing because
    /// the store's folder takes no new byte (a full disk, a spent quota, a
    /// read-only mount: `folder_refuses_writes`), it is read as it is
    /// (read-only, checked as ever) and new deletions are refused
    /// ([`ResourceDb::writable`]): reading never needs free space.
    pub fn open_generation(resources: Option<&Path>, deletions: &Path) -> Result<ResourceDb> {
        let side_files = ["-wal", "-shm"].map(|suffix| {
            let mut name = deletions.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        });
        let existed = side_files.clone().map(|path| path.exists());
        let (connection, writable) = match connect_deletions(deletions) {
            Ok(connection) => (connection, true),
            Err(error) => {
                // SQLite's files of the failed attempt go with it: the
                // log it made while empty, the shared-memory index it
                // made (sized, never filled: only a live connection's
                // is worth keeping).
                let [log, index] = &side_files;
                let [log_existed, index_existed] = existed;
                if !log_existed && std::fs::metadata(log).is_ok_and(|m| m.len() == 0) {
                    let _ = std::fs::remove_file(log);
                }
                if !index_existed {
                    let _ = std::fs::remove_file(index);
                }
                match folder_refuses_writes(deletions) {
                    Some(_) => (deletions::open_read_only(deletions, DELETIONS_SCHEMA)?, false),
                    None => return Err(error),
                }
            }
        };
        let path = resources.unwrap_or(deletions);
        let attached = match resources {
            Some(resources) => connection.execute("ATTACH DATABASE ?1 AS generation", [immutable_uri(resources)?]),
            None => connection
                .execute("ATTACH DATABASE ':memory:' AS generation", [])
                .and_then(|_| connection.execute_batch(&resources_schema(GENERATION)).map(|()| 0)),
        };
        attached.map_err(|e| db_error(path, e))?;
        // Read once now, so that a missing or unreadable file is an error
        // at startup rather than at the first request.
        connection
            .query_row("SELECT COUNT(*) FROM generation.endpoints", [], |row| row.get::<_, i64>(0))
            .map_err(|e| db_error(path, e))?;
        let connection = Mutex::new(connection);
        let deletions = deletions.to_owned();
        Ok(ResourceDb { path: path.to_owned(), deletions, writable, connection, tables: GENERATION })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The deletions database: the folder of the runtime state that
    /// servers of one store (or data folder) share.
    pub fn deletions_path(&self) -> &Path {
        &self.deletions
    }

    /// Whether deletions can be recorded: `false` for a store on a
    /// read-only mount (or one this process may not write), where
    /// [`ResourceDb::delete_recording`] is refused.
    pub fn writable(&self) -> bool {
        self.writable
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let mut connection =
            self.connection.lock().map_err(|_| Error::Internal("the database lock is poisoned".into()))?;
        f(&mut connection).map_err(|e| db_error(&self.path, e))
    }

    /// The endpoint `endpoint_id` of account `auth_id`, if there is one.
    pub fn endpoint(&self, auth_id: &str, endpoint_id: &str) -> Result<Option<Endpoint>> {
        let tables = self.tables;
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {ENDPOINT_COLUMNS} FROM {tables}.endpoints WHERE endpoint_id = ?1 AND auth_id = ?2",
            ))?
            .query_row(params![endpoint_id, auth_id], endpoint_from_row)
            .optional()
        })
    }

    /// The registration of `endpoint_id` that expires last, if it expires
    /// after `now_us`.
    pub fn active_registration(&self, endpoint_id: &str, now_us: i64) -> Result<Option<Registration>> {
        let tables = self.tables;
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {REGISTRATION_COLUMNS} FROM {tables}.registrations \
                 WHERE endpoint_id = ?1 AND sip_expires_us > ?2 \
                 ORDER BY sip_expires_us DESC, sip_contact, sip_user_agent LIMIT 1",
            ))?
            .query_row(params![endpoint_id, now_us], registration_from_row)
            .optional()
        })
    }

    /// The recording `recording_id` of account `auth_id`, if there is one.
    pub fn recording(&self, auth_id: &str, recording_id: &str) -> Result<Option<Recording>> {
        let tables = self.tables;
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {RECORDING_COLUMNS} FROM {tables}.recordings AS r \
                 WHERE recording_id = ?1 AND auth_id = ?2 AND {NOT_DELETED}"
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
        conditions.push(NOT_DELETED.to_owned());
        let filter = conditions.join(" AND ");
        let tables = self.tables;
        self.with(|c| {
            // One read transaction: the count and the page see the same
            // recordings, though another server deletes one between them.
            let c = c.transaction()?;
            let total: i64 = c
                .prepare_cached(&format!("SELECT COUNT(*) FROM {tables}.recordings AS r WHERE {filter}"))?
                .query_row(params_from_iter(values.iter()), |row| row.get(0))?;
            let mut page_values = values.clone();
            page_values.push(Value::Integer(i64::from(query.limit)));
            page_values.push(Value::Integer(i64::try_from(query.offset).unwrap_or(i64::MAX)));
            let mut statement = c.prepare_cached(&format!(
                "SELECT {RECORDING_COLUMNS} FROM {tables}.recordings AS r WHERE {filter} \
                 ORDER BY add_time_us DESC, recording_id ASC LIMIT ? OFFSET ?"
            ))?;
            let rows = statement
                .query_map(params_from_iter(page_values.iter()), recording_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(statement);
            c.finish()?;
            Ok((total.max(0) as u64, rows))
        })
    }

    /// Deletes recording `recording_id` of account `auth_id` for good: the
    /// deletion is recorded (so every query, later load and later
    /// generation leaves the id out) and, in a data directory's database,
    /// the row goes. `false` when there was no such recording (absent or
    /// already deleted). The deletion is on disk, and counted in the count
    /// file ([`deletions`]), when this returns.
    pub fn delete_recording(&self, auth_id: &str, recording_id: &str, now_us: i64) -> Result<bool> {
        if !self.writable {
            return Err(Error::io(&self.deletions, "the store cannot be written: a deletion cannot be recorded"));
        }
        let tables = self.tables;
        let mut connection =
            self.connection.lock().map_err(|_| Error::Internal("the database lock is poisoned".into()))?;
        let deleted = ResourceDb::delete_in(&mut connection, tables, auth_id, recording_id, now_us)
            .map_err(|e| db_error(&self.deletions, e))?;
        if deleted {
            deletions::record_count(&connection, &self.deletions)?;
        }
        Ok(deleted)
    }

    /// The transaction of [`ResourceDb::delete_recording`].
    fn delete_in(
        c: &mut Connection,
        tables: &str,
        auth_id: &str,
        recording_id: &str,
        now_us: i64,
    ) -> rusqlite::Result<bool> {
        // IMMEDIATE: the write lock is taken (waiting up to the busy
        // timeout) before the read. A deferred transaction that reads and
        // then writes fails at once, without waiting, when another process
        // (a second server, an ingest) has written since its read.
        let transaction = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let visible: bool = transaction
            .prepare_cached(&format!(
                "SELECT EXISTS (SELECT 1 FROM {tables}.recordings AS r \
                 WHERE recording_id = ?1 AND auth_id = ?2 AND {NOT_DELETED})"
            ))?
            .query_row(params![recording_id, auth_id], |row| row.get(0))?;
        if visible {
            transaction.execute(
                "INSERT OR IGNORE INTO main.deletions (recording_id, auth_id, deleted_at_us) VALUES (?1, ?2, ?3)",
                params![recording_id, auth_id, now_us],
            )?;
            if tables == "main" {
                transaction.execute(
                    "DELETE FROM main.recordings WHERE recording_id = ?1 AND auth_id = ?2",
                    params![recording_id, auth_id],
                )?;
            }
        }
        transaction.commit()?;
        Ok(visible)
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

    #[test]
    fn each_table_binds_one_value_a_column() {
        assert_eq!(insert_sql("t", "a, b, c"), "INSERT INTO t (a, b, c) VALUES (?1, ?2, ?3)");
        let endpoint = Endpoint {
            endpoint_id: "E".into(),
            auth_id: "A".into(),
            sub_account: String::new(),
            alias: String::new(),
            username: "u".into(),
            password_md5: String::new(),
            application_id: String::new(),
        };
        let registration = Registration {
            endpoint_id: "E".into(),
            sip_contact: "c".into(),
            sip_expires_us: 1,
            sip_user_agent: String::new(),
        };
        assert_eq!(ENDPOINT_COLUMNS.split(',').count(), endpoint.sql_values().len());
        assert_eq!(REGISTRATION_COLUMNS.split(',').count(), registration.sql_values().len());
        assert_eq!(RECORDING_COLUMNS.split(',').count(), 16);
    }
}
