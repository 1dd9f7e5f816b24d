//! The resources of a store generation: what an ingest makes of the
//! previous generation's database and the resource inputs of its data
//! directory ("resources ingest like records").
//!
//! - `endpoints.csv` and `registrations.csv` are the current view: a file
//!   that is there replaces its table; a file that is not leaves the table
//!   as it was.
//! - `recordings/` adds up, like records: a new `recording_id` is added; one
//!   already stored with the same content is a duplicate (counted, stored
//!   once); one with different content is a conflict (an error naming the
//!   place, as for records); one deleted through the API is skipped.
//!
//! [`build`] writes the new database under its own name (a copy of the
//! previous one, changed in one transaction), never touching the previous
//! one: the ingest's manifest publishes it, so a failed or killed ingest
//! leaves the published resources exactly as they were.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use super::load::{self, Inputs};
use super::{
    connect_deletions, connect_with, db_error, endpoint_from_row, insert_sql, recording_from_row,
    registration_from_row, resources_schema, Endpoint, Registration, ENDPOINT_COLUMNS, RECORDING_COLUMNS,
    REGISTRATION_COLUMNS,
};
use crate::error::{Error, Result};

pub use crate::store::{PreviousResources as Previous, ResourceChanges as Changes};

/// Builds the resources of a new generation at `out` from `previous` and
/// the inputs of `data`, skipping recordings deleted in `deletions` (the
/// store's deletions database). `None` when `data` has no resource input
/// (nothing is written); otherwise what changed, and `out` exists exactly
/// when something did.
pub fn build(data: &Path, previous: Previous<'_>, deletions: &Path, out: &Path) -> Result<Option<Changes>> {
    let inputs = load::read_inputs(data)?;
    if inputs.is_empty() {
        return Ok(None);
    }
    let deleted = deleted_ids(deletions, previous)?;
    match std::fs::remove_file(out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(out, e)),
    }
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    match previous {
        Previous::Nothing => {}
        Previous::Generation(path) => {
            std::fs::copy(path, out).map_err(|e| Error::io(path, format!("cannot copy to {}: {e}", out.display())))?;
        }
        Previous::Legacy(path) => {
            let connection = Connection::open(path).map_err(|e| db_error(path, e))?;
            connection.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| db_error(path, e))?;
            let target = out.to_str().ok_or_else(|| Error::io(out, "the path is not UTF-8"))?;
            connection.execute("VACUUM INTO ?1", [target]).map_err(|e| db_error(path, e))?;
        }
    }
    // A rollback journal (not WAL): the file alone is the database, so it
    // can be copied and opened read-only once published.
    let mut connection = connect_with(out, "DELETE", "FULL")?;
    connection.execute_batch(&resources_schema("main")).map_err(|e| db_error(out, e))?;
    let changes = apply(&mut connection, inputs, &deleted).map_err(|e| match e {
        Applied::Db(e) => db_error(out, e),
        Applied::Input(e) => e,
    })?;
    drop(connection);
    if !changes.changed {
        std::fs::remove_file(out).map_err(|e| Error::io(out, e))?;
    }
    Ok(Some(changes))
}

/// The recording ids deleted through the API; from a legacy database, its
/// deletions are first copied into `deletions`.
fn deleted_ids(deletions: &Path, previous: Previous<'_>) -> Result<HashSet<String>> {
    let connection = connect_deletions(deletions)?;
    if let Previous::Legacy(legacy) = previous {
        let path = legacy.to_str().ok_or_else(|| Error::io(legacy, "the path is not UTF-8"))?;
        let migrate = connection
            .execute("ATTACH DATABASE ?1 AS legacy", [path])
            .and_then(|_| {
                connection.execute(
                    "INSERT OR IGNORE INTO main.deletions (recording_id, auth_id, deleted_at_us) \
                     SELECT recording_id, auth_id, deleted_at_us FROM legacy.deletions",
                    [],
                )
            })
            .and_then(|_| connection.execute("DETACH DATABASE legacy", []));
        migrate.map_err(|e| db_error(legacy, e))?;
        super::deletions::record_count(&connection, deletions)?;
    }
    let mut statement = connection.prepare("SELECT recording_id FROM deletions").map_err(|e| db_error(deletions, e))?;
    let ids = statement
        .query_map([], |row| row.get(0))
        .and_then(|rows| rows.collect::<rusqlite::Result<HashSet<String>>>())
        .map_err(|e| db_error(deletions, e))?;
    Ok(ids)
}

/// A failure while applying: the database's, or an input's (a conflict).
enum Applied {
    Db(rusqlite::Error),
    Input(Error),
}

impl From<rusqlite::Error> for Applied {
    fn from(e: rusqlite::Error) -> Applied {
        Applied::Db(e)
    }
}

/// Applies `inputs` to the database in one transaction.
fn apply(connection: &mut Connection, inputs: Inputs, deleted: &HashSet<String>) -> Result<Changes, Applied> {
    let mut changes = Changes::default();
    let transaction = connection.transaction()?;
    if let Some(endpoints) = inputs.endpoints {
        changes.endpoints = Some(endpoints.len() as u64);
        if stored_endpoints(&transaction)? != endpoints {
            changes.changed = true;
            transaction.execute("DELETE FROM endpoints", [])?;
            let mut insert = transaction.prepare(&insert_sql("endpoints", ENDPOINT_COLUMNS))?;
            for e in endpoints.values() {
                insert.execute(e.sql_values().as_slice())?;
            }
        }
    }
    if let Some(mut registrations) = inputs.registrations {
        changes.registrations = Some(registrations.len() as u64);
        registrations.sort_by(|a, b| registration_order(a).cmp(&registration_order(b)));
        if stored_registrations(&transaction)? != registrations {
            changes.changed = true;
            transaction.execute("DELETE FROM registrations", [])?;
            let mut insert = transaction.prepare(&insert_sql("registrations", REGISTRATION_COLUMNS))?;
            for r in &registrations {
                insert.execute(r.sql_values().as_slice())?;
            }
        }
    }
    if let Some((recordings, files)) = inputs.recordings {
        changes.recording_files = files;
        let mut find =
            transaction.prepare(&format!("SELECT {RECORDING_COLUMNS} FROM recordings WHERE recording_id = ?1"))?;
        let mut insert = transaction.prepare(&insert_sql("recordings", RECORDING_COLUMNS))?;
        for (id, (r, place)) in &recordings {
            if deleted.contains(id) {
                changes.deleted_skipped += 1;
                continue;
            }
            match find.query_row([id], recording_from_row).optional()? {
                Some(stored) if stored == *r => changes.recordings_duplicates += 1,
                Some(_) => {
                    return Err(Applied::Input(Error::bad_file(
                        &place.file,
                        format!(
                            "conflicting duplicate recording_id '{id}': {place} differs from the recording \
                             an earlier ingest stored"
                        ),
                    )))
                }
                None => {
                    insert.execute(r.sql_values().as_slice())?;
                    changes.recordings_added += 1;
                    changes.changed = true;
                }
            }
        }
    }
    transaction.commit()?;
    Ok(changes)
}

/// The order registrations are stored and listed in.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct RegistrationOrder<'r> {
    endpoint_id: &'r str,
    sip_expires_us: i64,
    sip_contact: &'r str,
    sip_user_agent: &'r str,
}

fn registration_order(r: &Registration) -> RegistrationOrder<'_> {
    RegistrationOrder {
        endpoint_id: &r.endpoint_id,
        sip_expires_us: r.sip_expires_us,
        sip_contact: &r.sip_contact,
        sip_user_agent: &r.sip_user_agent,
    }
}

fn stored_endpoints(connection: &Connection) -> rusqlite::Result<BTreeMap<String, Endpoint>> {
    let mut statement = connection.prepare(&format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints"))?;
    let rows = statement.query_map([], endpoint_from_row)?;
    rows.map(|e| e.map(|e| (e.endpoint_id.clone(), e))).collect()
}

fn stored_registrations(connection: &Connection) -> rusqlite::Result<Vec<Registration>> {
    let mut statement = connection.prepare(&format!("SELECT {REGISTRATION_COLUMNS} FROM registrations"))?;
    let rows = statement.query_map([], registration_from_row)?;
    let mut registrations = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    registrations.sort_by(|a, b| registration_order(a).cmp(&registration_order(b)));
    Ok(registrations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::load::tests::write;
    use crate::resources::{ListQuery, ResourceDb};

    const HEADER: &str = "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,\
conference_uuid,mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,add_time\n";

    fn recording(id: &str, url: &str) -> String {
        format!("{id},A,,C{id},+1,+2,,,,,{url},mp3,normal,1763646301000,1763646302000,2026-11-20T10:00:00Z\n")
    }

    fn ids(db: &Path, deletions: &Path) -> Vec<String> {
        let store = ResourceDb::open_generation(Some(db), deletions).unwrap();
        let all = ListQuery { limit: 20, ..ListQuery::default() };
        store.list_recordings("A", &all).unwrap().1.into_iter().map(|r| r.recording_id).collect()
    }

    #[test]
    fn each_generation_is_the_previous_plus_its_inputs() {
        let temp = tempfile::tempdir().unwrap();
        let (day1, day2, day3) = (temp.path().join("d1"), temp.path().join("d2"), temp.path().join("d3"));
        let deletions = temp.path().join("deletions.sqlite");
        write(&day1, "endpoints.csv", "endpoint_id,auth_id,alias,username,password\nE1,A,Desk,desk,pw\n");
        write(
            &day1,
            "registrations.csv",
            "endpoint_id,sip_contact,sip_expires,sip_user_agent\nE1,sip:x,2026-11-21T00:00:00Z,X\n",
        );
        write(&day1, "recordings/r.csv", &format!("{HEADER}{}{}", recording("R1", "u1"), recording("R2", "u2")));
        let first = temp.path().join("g1.sqlite");
        let changes = build(&day1, Previous::Nothing, &deletions, &first).unwrap().unwrap();
        assert_eq!((changes.endpoints, changes.registrations, changes.recordings_added), (Some(1), Some(1), 2));
        assert!(changes.changed);

        // Recordings only: one new, one already stored; R2 deleted meanwhile.
        let store = ResourceDb::open_generation(Some(&first), &deletions).unwrap();
        assert!(store.delete_recording("A", "R2", 0).unwrap());
        assert!(!store.delete_recording("A", "R2", 0).unwrap());
        assert_eq!(ids(&first, &deletions), ["R1"], "a deletion hides the row of a published generation");
        write(
            &day2,
            "recordings/r.csv",
            &format!("{HEADER}{}{}{}", recording("R1", "u1"), recording("R2", "u2"), recording("R3", "u3")),
        );
        let second = temp.path().join("g2.sqlite");
        let changes = build(&day2, Previous::Generation(&first), &deletions, &second).unwrap().unwrap();
        assert_eq!((changes.endpoints, changes.registrations), (None, None));
        assert_eq!((changes.recordings_added, changes.recordings_duplicates, changes.deleted_skipped), (1, 1, 1));
        assert_eq!(ids(&second, &deletions), ["R1", "R3"]);
        let kept = ResourceDb::open_generation(Some(&second), &deletions).unwrap();
        assert_eq!(kept.endpoint("A", "E1").unwrap().map(|e| e.alias).as_deref(), Some("Desk"));
        assert!(kept.active_registration("E1", 0).unwrap().is_some());
        assert_eq!(ids(&first, &deletions), ["R1"], "the previous generation is untouched");

        // The same files again: nothing changes, nothing is written.
        let third = temp.path().join("g3.sqlite");
        let changes = build(&day2, Previous::Generation(&second), &deletions, &third).unwrap().unwrap();
        assert!(!changes.changed);
        assert!(!third.exists());
        // No resource input at all: nothing to do.
        std::fs::create_dir_all(&day3).unwrap();
        assert_eq!(build(&day3, Previous::Generation(&second), &deletions, &third).unwrap(), None);

        // A stored id with other content is a conflict naming the place.
        write(&day3, "recordings/late.csv", &format!("{HEADER}{}", recording("R3", "elsewhere")));
        let error = build(&day3, Previous::Generation(&second), &deletions, &third).unwrap_err().to_string();
        assert!(error.contains("conflicting duplicate recording_id 'R3': recordings/late.csv:2"), "{error}");
    }

    #[test]
    fn a_store_of_the_earlier_layout_is_carried_over_with_its_deletions() {
        let temp = tempfile::tempdir().unwrap();
        let (data, later) = (temp.path().join("data"), temp.path().join("later"));
        write(&data, "endpoints.csv", "endpoint_id,auth_id,alias,username,password\nE1,A,Desk,desk,pw\n");
        write(&data, "recordings/r.csv", &format!("{HEADER}{}{}", recording("R1", "u1"), recording("R2", "u2")));
        let legacy = temp.path().join("resources.sqlite");
        crate::resources::load(&data, &legacy).unwrap();
        assert!(ResourceDb::open(&legacy).unwrap().delete_recording("A", "R1", 0).unwrap());
        write(&later, "recordings/r.csv", &format!("{HEADER}{}", recording("R3", "u3")));
        let (deletions, out) = (temp.path().join("deletions.sqlite"), temp.path().join("g.sqlite"));
        let changes = build(&later, Previous::Legacy(&legacy), &deletions, &out).unwrap().unwrap();
        assert_eq!(changes.recordings_added, 1);
        assert_eq!(ids(&out, &deletions), ["R2", "R3"]);
        let store = ResourceDb::open_generation(Some(&out), &deletions).unwrap();
        assert!(store.endpoint("A", "E1").unwrap().is_some());
    }
}
