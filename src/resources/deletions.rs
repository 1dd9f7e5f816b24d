//! The database that holds the recordings deleted through the API: the
//! one state a server writes at runtime that must last (its rate-limit
//! log, `server::rate`, may be lost). A lost deletion is a deleted
//! recording shown again, so the file is written durably and a lost or
//! damaged one is found, never silently forgotten.
//!
//! - **On disk before the answer.** The database is in WAL mode with
//!   `synchronous = FULL`: a DELETE's commit syncs the log before it
//!   returns, so the 204 follows the sync. SQLite syncs the folder when it
//!   creates the log; `open` syncs it when it creates the database.
//! - **Counted.** `<database>.count` beside the database says how many
//!   deletions the database held after the last one (`record_count`:
//!   written whole, synced and renamed into place after each commit).
//!   `open` refuses a database that is missing while its count file is
//!   there, or that holds fewer deletions than the count says (an older
//!   copy). The error names both files and the two ways out: restore the
//!   database, or remove the count file to accept the loss.
//! - **Checked.** `open` runs `PRAGMA integrity_check`. A recording id is
//!   kept twice (the row and its primary-key index), so a flipped byte in
//!   either is a mismatch; a damaged page or header is an error too.

use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{connect_with, db_error};
use crate::error::{Error, Result};

/// Opens (creating when needed) the database at `path` holding a
/// `deletions` table, runs `schema` in it, and checks it against its count
/// file and for damage.
pub(crate) fn open(path: &Path, schema: &str) -> Result<Connection> {
    let count_file = count_path(path);
    let counted = read_count(&count_file)?;
    let existed = std::fs::symlink_metadata(path).is_ok();
    if !existed {
        refuse_missing(path, counted)?;
    }
    let connection = connect_with(path, "WAL", "FULL").map_err(|e| damaged(path, &e.to_string()))?;
    check_integrity(&connection, path)?;
    connection.execute_batch(schema).map_err(|e| db_error(path, e))?;
    check_columns(&connection, path)?;
    if !existed {
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::durable::sync_dir(folder)?;
    }
    let held = count(&connection, path)?;
    refuse_fewer(path, held, counted)?;
    // More than counted: a database of an earlier version (no count file
    // yet), or a process killed between a commit and its count.
    if counted.map_or(held > 0, |counted| held > counted) {
        write_count(&count_file, held)?;
    }
    Ok(connection)
}

/// Opens the deletions database at `path` of a store this process cannot
/// write (a read-only mount): read-only, checked like [`open`]. No file
/// (and no count file) is no deletions: an empty table in memory. A file
/// with a write-ahead log left (its last writer was killed) is refused:
/// reading it without the log would miss deletions.
pub(crate) fn open_read_only(path: &Path, schema: &str) -> Result<Connection> {
    let counted = read_count(&count_path(path))?;
    if std::fs::symlink_metadata(path).is_err() {
        refuse_missing(path, counted)?;
        let connection = Connection::open_in_memory().map_err(|e| db_error(path, e))?;
        connection.execute_batch(schema).map_err(|e| db_error(path, e))?;
        return Ok(connection);
    }
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
        return Err(Error::io(
            path,
            "has a write-ahead log left by a killed process and the store cannot be written: open the store \
             once with write access (any `telemeter serve --store`) so that the log is folded in",
        ));
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    let connection =
        Connection::open_with_flags(super::immutable_uri(path)?, flags).map_err(|e| damaged(path, &e.to_string()))?;
    check_integrity(&connection, path)?;
    check_columns(&connection, path)?;
    let held = count(&connection, path)?;
    refuse_fewer(path, held, counted)?;
    Ok(connection)
}

/// Checks the database at `path` as [`open_read_only`] does, for `store
/// verify`: missing while its count file says it held deletions, damaged,
/// or holding fewer than counted. One with a write-ahead log (a server
/// has it open, or its last writer was killed, and the next server folds
/// the log in) is only checked for being there.
pub(crate) fn check(path: &Path, schema: &str) -> Result<()> {
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if std::fs::symlink_metadata(path).is_ok() && std::fs::metadata(&log).is_ok_and(|m| m.len() > 0) {
        return Ok(());
    }
    open_read_only(path, schema).map(|_| ())
}

/// The error for a missing database whose count file says it held
/// deletions.
fn refuse_missing(path: &Path, counted: Option<u64>) -> Result<()> {
    match counted {
        Some(counted) if counted > 0 => {
            let count_file = count_path(path);
            Err(Error::io(
                path,
                format!(
                    "missing, but {} says {counted} recordings were deleted through the API: without this \
                     file they would show again. Restore it from a backup; or, to accept that they show \
                     again, remove {}",
                    count_file.display(),
                    count_file.display()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The error for a database holding fewer deletions than counted.
fn refuse_fewer(path: &Path, held: u64, counted: Option<u64>) -> Result<()> {
    match counted {
        Some(counted) if held < counted => {
            let count_file = count_path(path);
            Err(Error::io(
                path,
                format!(
                    "holds {held} deletions but {} says {counted}: deletions were lost (an older copy of \
                     the file?). Restore the latest copy; or, to accept that the lost ones show again, \
                     remove {}",
                    count_file.display(),
                    count_file.display()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Writes the count file of the database at `path` from what it holds now;
/// called after each commit that adds deletions. One write at a time in a
/// process: connections of two generations of one server share the
/// count file's temporary name (it is the process's), and the later count
/// is written last. (Another process's write may land after a later
/// count: the file then says fewer than the database holds, which `open`
/// takes as a commit whose count was not written yet.)
pub(crate) fn record_count(connection: &Connection, path: &Path) -> Result<()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let held = count(connection, path)?;
    write_count(&count_path(path), held)
}

/// The count file of the database at `path`: `deletions.sqlite.count`.
pub fn count_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".count");
    path.with_file_name(name)
}

/// The body of a count file.
#[derive(serde::Serialize, serde::Deserialize)]
struct CountFile {
    /// Deletions the database held at the last write.
    deletions: u64,
}

fn read_count(count_file: &Path) -> Result<Option<u64>> {
    let bytes = match std::fs::read(count_file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(count_file, e)),
    };
    let parsed: CountFile = serde_json::from_slice(&bytes).map_err(|e| {
        Error::io(
            count_file,
            format!(
                "damaged ({e}): it says how many recordings were deleted through the API. Check the database \
                 beside it against a backup, then remove this file (it is written again from the database)"
            ),
        )
    })?;
    Ok(Some(parsed.deletions))
}

fn write_count(count_file: &Path, deletions: u64) -> Result<()> {
    let body = serde_json::to_vec(&CountFile { deletions }).map_err(|e| Error::Internal(e.to_string()))?;
    let mut file = crate::durable::AtomicFile::create(count_file)?;
    file.write_all(&body).and_then(|()| file.write_all(b"\n")).map_err(|e| Error::io(count_file, e))?;
    file.commit()
}

fn count(connection: &Connection, path: &Path) -> Result<u64> {
    let n: i64 = connection
        .query_row("SELECT COUNT(*) FROM main.deletions", [], |row| row.get(0))
        .map_err(|e| db_error(path, e))?;
    Ok(n.max(0) as u64)
}

/// `PRAGMA integrity_check` of the main database: `ok`, or an error naming
/// the file with SQLite's first finding.
fn check_integrity(connection: &Connection, path: &Path) -> Result<()> {
    let mut statement =
        connection.prepare("PRAGMA main.integrity_check(10)").map_err(|e| damaged(path, &e.to_string()))?;
    let findings = statement
        .query_map([], |row| row.get::<_, String>(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
        .map_err(|e| damaged(path, &e.to_string()))?;
    match findings.as_slice() {
        [ok] if ok == "ok" => Ok(()),
        _ => Err(damaged(path, &findings.join("; "))),
    }
}

/// The columns of the `deletions` table, as [`super::DELETIONS_SCHEMA`]
/// makes them: the table's text in the schema is not covered by
/// `integrity_check`, and a flip there would rename a column.
const COLUMNS: [&str; 3] = ["recording_id", "auth_id", "deleted_at_us"];

fn check_columns(connection: &Connection, path: &Path) -> Result<()> {
    let columns = connection
        .prepare("SELECT name FROM pragma_table_info('deletions', 'main') ORDER BY cid")
        .and_then(|mut statement| {
            statement.query_map([], |row| row.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(|e| damaged(path, &e.to_string()))?;
    if columns != COLUMNS {
        return Err(damaged(path, &format!("the deletions table has the columns {}", columns.join(", "))));
    }
    Ok(())
}

/// A database that fails its check.
fn damaged(path: &Path, finding: &str) -> Error {
    Error::io(
        path,
        format!(
            "damaged ({finding}): it holds the recordings deleted through the API. Restore it from a backup \
             (or salvage what is left with `sqlite3 {} .recover`)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{ListQuery, ResourceDb};

    /// A generation database with recordings R0..R9 of account A.
    fn generation(dir: &Path) -> PathBuf {
        generation_of(dir, 10)
    }

    /// A generation database with recordings R0..R`n-1` of account A.
    fn generation_of(dir: &Path, n: usize) -> PathBuf {
        let data = dir.join("data");
        let mut csv = String::from(
            "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,conference_uuid,\
             mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,\
             add_time\n",
        );
        for i in 0..n {
            csv.push_str(&format!(
                "R{i},A,,C{i},+1,+2,,,,,u{i},mp3,normal,1763646301000,1763646302000,2026-11-20T10:{:02}:{:02}Z\n",
                i / 60 % 60,
                i % 60
            ));
        }
        crate::resources::load::tests::write(&data, "recordings/r.csv", &csv);
        let out = dir.join("g.sqlite");
        crate::resources::generation::build(
            &data,
            crate::resources::generation::Previous::Nothing,
            &dir.join("x"),
            &out,
        )
        .unwrap();
        out
    }

    fn visible(resources: &Path, deletions: &Path) -> Result<Vec<String>> {
        let store = ResourceDb::open_generation(Some(resources), deletions)?;
        let all = ListQuery { limit: 20, ..ListQuery::default() };
        Ok(store.list_recordings("A", &all)?.1.into_iter().map(|r| r.recording_id).collect())
    }

    /// Two servers on one store (two connections to its deletions file;
    /// here in one process, as two generations of one server are) deleting
    /// at once: each deletion waits for the other's write lock, none fails
    /// with "database is locked", and the count file is written whole.
    #[test]
    fn deletions_through_two_connections_at_once_all_succeed() {
        let temp = tempfile::tempdir().unwrap();
        let resources = generation_of(temp.path(), 400);
        let deletions = temp.path().join("deletions.sqlite");
        let servers = [0, 1].map(|_| ResourceDb::open_generation(Some(&resources), &deletions).unwrap());
        std::thread::scope(|scope| {
            for (n, server) in servers.iter().enumerate() {
                // Two threads a server, each its share of the ids.
                for half in 0..2 {
                    scope.spawn(move || {
                        for i in (n * 2 + half..400).step_by(4) {
                            let deleted = server.delete_recording("A", &format!("R{i}"), 0);
                            assert!(deleted.as_ref().is_ok_and(|d| *d), "R{i}: {deleted:?}");
                        }
                    });
                }
            }
        });
        assert_eq!(visible(&resources, &deletions).unwrap(), Vec::<String>::new());
        assert_eq!(read_count(&count_path(&deletions)).unwrap(), Some(400));
    }

    #[test]
    fn a_lost_or_older_deletions_file_is_an_error_naming_it() {
        let temp = tempfile::tempdir().unwrap();
        let resources = generation(temp.path());
        let deletions = temp.path().join("deletions.sqlite");
        let store = ResourceDb::open_generation(Some(&resources), &deletions).unwrap();
        assert!(store.delete_recording("A", "R1", 0).unwrap());
        drop(store);
        let older = temp.path().join("older.sqlite");
        std::fs::copy(&deletions, &older).unwrap();
        let store = ResourceDb::open_generation(Some(&resources), &deletions).unwrap();
        assert!(store.delete_recording("A", "R2", 0).unwrap());
        drop(store);
        assert_eq!(std::fs::read_to_string(count_path(&deletions)).unwrap(), "{\"deletions\":2}\n");

        std::fs::rename(&deletions, temp.path().join("aside.sqlite")).unwrap();
        let error = visible(&resources, &deletions).unwrap_err().chain();
        assert!(error.contains("deletions.sqlite: missing, but"), "{error}");
        assert!(error.contains("says 2 recordings were deleted"), "{error}");
        assert!(!deletions.exists(), "nothing is created in its place");

        std::fs::copy(&older, &deletions).unwrap();
        let error = visible(&resources, &deletions).unwrap_err().chain();
        assert!(error.contains("holds 1 deletions but"), "{error}");

        // Accepting the loss: the count file goes, the older copy answers.
        std::fs::remove_file(count_path(&deletions)).unwrap();
        assert_eq!(visible(&resources, &deletions).unwrap().len(), 9);
        assert_eq!(std::fs::read_to_string(count_path(&deletions)).unwrap(), "{\"deletions\":1}\n");
    }

    /// A flip of any byte of a deletions database that holds something is
    /// an error or leaves the answer as it was.
    #[test]
    fn a_flipped_byte_in_the_deletions_file_is_an_error_or_changes_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let resources = generation(temp.path());
        let deletions = temp.path().join("deletions.sqlite");
        let store = ResourceDb::open_generation(Some(&resources), &deletions).unwrap();
        for id in ["R1", "R4", "R7"] {
            assert!(store.delete_recording("A", id, 1_700_000_000_000_000).unwrap());
        }
        drop(store);
        let clean = visible(&resources, &deletions).unwrap();
        assert_eq!(clean.len(), 7);
        let bytes = std::fs::read(&deletions).unwrap();
        let count = std::fs::read(count_path(&deletions)).unwrap();
        let (mut errors, mut same) = (0, 0);
        // Every byte that holds something, and one in 64 of the empty ones.
        for offset in (0..bytes.len()).filter(|&o| bytes[o] != 0 || o % 64 == 0) {
            let mut flipped = bytes.clone();
            flipped[offset] ^= 0x5a;
            std::fs::write(&deletions, &flipped).unwrap();
            std::fs::write(count_path(&deletions), &count).unwrap();
            for side in ["deletions.sqlite-wal", "deletions.sqlite-shm"] {
                let _ = std::fs::remove_file(temp.path().join(side));
            }
            match visible(&resources, &deletions) {
                Ok(answer) => {
                    assert_eq!(answer, clean, "a flip at byte {offset} changed the answer");
                    same += 1;
                }
                Err(e) => {
                    assert!(e.chain().contains("deletions.sqlite"), "flip at {offset}: {}", e.chain());
                    errors += 1;
                }
            }
        }
        assert!(errors > 0 && same > 0, "{errors} errors, {same} unchanged");
    }
}
