//! Loading `endpoints.csv`, `registrations.csv` and `recordings/` into the
//! database (resources.md, "Inputs").
//!
//! Every file is read and checked before the database is touched; then one
//! transaction replaces the three tables with the files' rows, skipping the
//! recordings of the `deletions` table. Loading the same files twice gives
//! the same database; a deleted recording never comes back.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use md5::{Digest, Md5};

use super::{
    connect, db_error, insert_sql, parse_ms, Endpoint, Recording, Registration, ENDPOINT_COLUMNS, RECORDING_COLUMNS,
    REGISTRATION_COLUMNS,
};
use crate::error::{BadRecord, Error, Location, Result};
use crate::records::decode;
use crate::records::files::Format;
use crate::time::Instant;

/// What a load read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Endpoints stored.
    pub endpoints: u64,
    /// Registrations stored.
    pub registrations: u64,
    /// Recordings stored.
    pub recordings: u64,
    /// Recordings in the files that were skipped because they were deleted.
    pub deleted_skipped: u64,
    /// Files read under `recordings/`.
    pub recording_files: u64,
}

/// The resource inputs of a data directory, read and checked; `None` for
/// an input the directory does not have (no `endpoints.csv`, no
/// `registrations.csv`, no `recordings/` folder).
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    /// `endpoints.csv`, by id.
    pub endpoints: Option<BTreeMap<String, Endpoint>>,
    /// `registrations.csv`, sorted, without repeats.
    pub registrations: Option<Vec<Registration>>,
    /// `recordings/`: every recording by id, where it was read, and the
    /// number of files read.
    pub recordings: Option<(RecordingsById, u64)>,
}

impl Inputs {
    /// Whether the directory has no resource input at all.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_none() && self.registrations.is_none() && self.recordings.is_none()
    }
}

/// Reads and checks every resource input of `data`.
pub(crate) fn read_inputs(data: &Path) -> Result<Inputs> {
    let meta = std::fs::metadata(data).map_err(|e| Error::io(data, e))?;
    if !meta.is_dir() {
        return Err(Error::io(data, "not a directory"));
    }
    Ok(Inputs {
        endpoints: if data.join("endpoints.csv").exists() { Some(read_endpoints(data)?) } else { None },
        registrations: if data.join("registrations.csv").exists() { Some(read_registrations(data)?) } else { None },
        recordings: if data.join("recordings").is_dir() { Some(read_recordings(data)?) } else { None },
    })
}

/// Loads the resources of data directory `data` into the database `db`
/// (created when missing), replacing what it held: the directory is the
/// whole truth, so a missing input holds no rows (`serve --data`; a store
/// builds each generation's resources with `generation::build` instead).
pub fn load(data: &Path, db: &Path) -> Result<LoadStats> {
    let inputs = read_inputs(data)?;
    let endpoints = inputs.endpoints.unwrap_or_default();
    let registrations = inputs.registrations.unwrap_or_default();
    let (recordings, recording_files) = inputs.recordings.unwrap_or_default();
    let mut connection = connect(db)?;
    let mut stats = LoadStats { recording_files, ..LoadStats::default() };
    let write = |c: &mut rusqlite::Connection, stats: &mut LoadStats| -> rusqlite::Result<()> {
        // IMMEDIATE, as a deletion's (`ResourceDb::delete_recording`): a
        // server may be deleting meanwhile.
        let transaction = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let deleted: HashSet<String> = transaction
            .prepare("SELECT recording_id FROM deletions")?
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        transaction.execute_batch("DELETE FROM endpoints; DELETE FROM registrations; DELETE FROM recordings;")?;
        {
            let mut insert = transaction.prepare(&insert_sql("endpoints", ENDPOINT_COLUMNS))?;
            for e in endpoints.values() {
                insert.execute(e.sql_values().as_slice())?;
                stats.endpoints += 1;
            }
            let mut insert = transaction.prepare(&insert_sql("registrations", REGISTRATION_COLUMNS))?;
            for r in &registrations {
                insert.execute(r.sql_values().as_slice())?;
                stats.registrations += 1;
            }
            let mut insert = transaction.prepare(&insert_sql("recordings", RECORDING_COLUMNS))?;
            for r in recordings.values().map(|(r, _)| r) {
                if deleted.contains(&r.recording_id) {
                    stats.deleted_skipped += 1;
                    continue;
                }
                insert.execute(r.sql_values().as_slice())?;
                stats.recordings += 1;
            }
        }
        transaction.commit()
    };
    write(&mut connection, &mut stats).map_err(|e| db_error(db, e))?;
    Ok(stats)
}

/// The rows of one input table: header names and cells, with line numbers.
struct Table {
    name: String,
    header: Vec<String>,
    rows: Vec<(u64, Vec<String>)>,
    is_parquet: bool,
}

impl Table {
    fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    fn required(&self, name: &str) -> Result<usize> {
        self.column(name).ok_or_else(|| {
            Error::bad_file(
                &self.name,
                format!("missing required column '{name}' (the file has: {})", self.header.join(", ")),
            )
        })
    }

    fn location(&self, line: u64) -> Location {
        Location { file: self.name.clone(), line, is_row: self.is_parquet }
    }
}

fn bad(location: Location, column: &str, value: &str, reason: &str) -> Error {
    Error::from(BadRecord { location, column: column.to_owned(), value: value.to_owned(), reason: reason.to_owned() })
}

fn read_csv(path: &Path, name: &str, format: Format) -> Result<Table> {
    let bytes = decode::read(path, format)?;
    let bytes = decode::strip_bom(&bytes);
    let mut reader = csv::ReaderBuilder::new().from_reader(bytes);
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| Error::bad_file(path, format!("unreadable header: {e}")))?
        .iter()
        .map(|h| h.trim().to_owned())
        .collect();
    let mut rows = Vec::new();
    // Lines counted from the record's byte offset: after a CRLF line the
    // reader puts the record at the line's `\n` (its own count is one
    // short), so the record starts after it.
    let (mut counted_to, mut line) = (0usize, 1u64);
    for record in reader.records() {
        let record = record.map_err(|e| Error::io(path, e))?;
        let at = record.position().map_or(0, |p| p.byte() as usize).min(bytes.len());
        let at = if bytes.get(at) == Some(&b'\n') { at + 1 } else { at };
        line += memchr::memchr_iter(b'\n', &bytes[counted_to.min(at)..at]).count() as u64;
        counted_to = at;
        rows.push((line, record.iter().map(str::to_owned).collect()));
    }
    Ok(Table { name: name.to_owned(), header, rows, is_parquet: false })
}

fn read_parquet(path: &Path, name: &str) -> Result<Table> {
    use polars::prelude::DataType;
    let frame = crate::parquet::read_frame(path, None, crate::parquet::Rows::All)?;
    let polars = |e: polars::prelude::PolarsError| Error::io(path, e);
    let mut header = Vec::new();
    let mut columns: Vec<Vec<String>> = Vec::new();
    for column in frame.columns() {
        header.push(column.name().to_string());
        let values: Vec<String> = match column.dtype() {
            DataType::Datetime(unit, _) => {
                let per_unit = crate::records::parquet::nanos_per_unit(*unit);
                let times = column.datetime().map_err(polars)?;
                times
                    .physical()
                    .iter()
                    .map(|t| {
                        t.and_then(|t| Instant::from_epoch_nanos(t as i128 * per_unit).to_datetime())
                            .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string())
                            .unwrap_or_default()
                    })
                    .collect()
            }
            DataType::Float32 | DataType::Float64 => {
                return Err(Error::io(
                    path,
                    format!("column '{}' holds floating point values; expected decimals or strings", column.name()),
                ))
            }
            _ => {
                let text = column.cast(&DataType::String).map_err(polars)?;
                text.str().map_err(polars)?.iter().map(|v| v.unwrap_or_default().to_owned()).collect()
            }
        };
        columns.push(values);
    }
    let rows = (0..frame.height()).map(|i| (i as u64 + 1, columns.iter().map(|c| c[i].clone()).collect())).collect();
    Ok(Table { name: name.to_owned(), header, rows, is_parquet: true })
}

fn optional_table(data: &Path, file: &str) -> Result<Option<Table>> {
    let path = data.join(file);
    if !path.exists() {
        return Ok(None);
    }
    read_csv(&path, file, Format::Csv).map(Some)
}

fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn read_endpoints(data: &Path) -> Result<BTreeMap<String, Endpoint>> {
    let mut endpoints: BTreeMap<String, (Endpoint, u64)> = BTreeMap::new();
    let Some(table) = optional_table(data, "endpoints.csv")? else { return Ok(BTreeMap::new()) };
    let id = table.required("endpoint_id")?;
    let auth = table.required("auth_id")?;
    let username = table.required("username")?;
    let sub_account = table.column("sub_account");
    let alias = table.column("alias");
    let application = table.column("application_id");
    let password = table.column("password");
    let password_md5 = table.column("password_md5");
    if password.is_none() && password_md5.is_none() {
        return Err(Error::bad_file(&table.name, "missing required column 'password' or 'password_md5'"));
    }
    for (line, row) in &table.rows {
        let cell = |c: Option<usize>| c.and_then(|c| row.get(c)).map_or("", String::as_str);
        let location = || table.location(*line);
        let endpoint_id = cell(Some(id));
        let auth_id = cell(Some(auth));
        for (column, value) in [("endpoint_id", endpoint_id), ("auth_id", auth_id), ("username", cell(Some(username)))]
        {
            if value.is_empty() {
                return Err(bad(location(), column, value, "is empty; expected a value"));
            }
        }
        // Ids are records.md's ids (resources.md: its column types).
        for (column, value) in [("endpoint_id", endpoint_id), ("auth_id", auth_id)] {
            crate::records::check_id(value).map_err(|reason| bad(location(), column, value, reason))?;
        }
        let hash = match (password, password_md5) {
            (Some(p), None) => md5_hex(cell(Some(p))),
            (Some(p), Some(_)) if !cell(Some(p)).is_empty() => md5_hex(cell(Some(p))),
            (_, Some(m)) => {
                let given = cell(Some(m));
                if given.len() != 32 || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(location(), "password_md5", given, "is not an MD5 hash (32 hex digits)"));
                }
                given.to_ascii_lowercase()
            }
            (None, None) => String::new(),
        };
        let endpoint = Endpoint {
            endpoint_id: endpoint_id.to_owned(),
            auth_id: auth_id.to_owned(),
            sub_account: cell(sub_account).to_owned(),
            alias: cell(alias).to_owned(),
            username: cell(Some(username)).to_owned(),
            password_md5: hash,
            application_id: cell(application).to_owned(),
        };
        if let Some((previous, previous_line)) = endpoints.get(endpoint_id) {
            if *previous != endpoint {
                return Err(Error::io(
                    &table.name,
                    format!("endpoint '{endpoint_id}' has conflicting rows at lines {previous_line} and {line}"),
                ));
            }
            continue;
        }
        endpoints.insert(endpoint_id.to_owned(), (endpoint, *line));
    }
    Ok(endpoints.into_iter().map(|(k, (e, _))| (k, e)).collect())
}

fn instant_us(location: Location, column: &str, value: &str) -> Result<i64> {
    let instant = Instant::parse(value.as_bytes()).map_err(|e| bad(location.clone(), column, value, &e.to_string()))?;
    if instant.nanos % 1000 != 0 {
        return Err(bad(location, column, value, "has a precision finer than a microsecond"));
    }
    instant
        .secs
        .checked_mul(1_000_000)
        .and_then(|s| s.checked_add(i64::from(instant.nanos / 1000)))
        .ok_or_else(|| bad(location, column, value, "is out of range"))
}

fn read_registrations(data: &Path) -> Result<Vec<Registration>> {
    let Some(table) = optional_table(data, "registrations.csv")? else { return Ok(Vec::new()) };
    let id = table.required("endpoint_id")?;
    let contact = table.required("sip_contact")?;
    let expires = table.required("sip_expires")?;
    let agent = table.column("sip_user_agent");
    let mut out = Vec::with_capacity(table.rows.len());
    for (line, row) in &table.rows {
        let cell = |c: Option<usize>| c.and_then(|c| row.get(c)).map_or("", String::as_str);
        let endpoint_id = cell(Some(id));
        if endpoint_id.is_empty() {
            return Err(bad(table.location(*line), "endpoint_id", "", "is empty; expected a value"));
        }
        crate::records::check_id(endpoint_id)
            .map_err(|reason| bad(table.location(*line), "endpoint_id", endpoint_id, reason))?;
        out.push(Registration {
            endpoint_id: endpoint_id.to_owned(),
            sip_contact: cell(Some(contact)).to_owned(),
            sip_expires_us: instant_us(table.location(*line), "sip_expires", cell(Some(expires)))?,
            sip_user_agent: cell(agent).to_owned(),
        });
    }
    out.sort_by(|a, b| {
        (&a.endpoint_id, a.sip_expires_us, &a.sip_contact).cmp(&(&b.endpoint_id, b.sip_expires_us, &b.sip_contact))
    });
    out.dedup();
    Ok(out)
}

/// The columns of a recordings file; `true` = required.
const RECORDING_INPUT: [(&str, bool); 16] = [
    ("recording_id", true),
    ("auth_id", true),
    ("subaccount_auth", false),
    ("call_uuid", true),
    ("from_number", false),
    ("to_number", false),
    ("conference_name", false),
    ("conference_uuid", false),
    ("mpc_name", false),
    ("mpc_uuid", false),
    ("recording_url", true),
    ("recording_format", true),
    ("recording_type", true),
    ("recording_start_ms", true),
    ("recording_end_ms", true),
    ("add_time", true),
];

/// Recordings by id, with the place each was first read.
pub(crate) type RecordingsById = BTreeMap<String, (Recording, Location)>;

fn read_recordings(data: &Path) -> Result<(RecordingsById, u64)> {
    let folder = data.join("recordings");
    let mut files = Vec::new();
    if folder.is_dir() {
        crate::records::files::walk(&folder, &mut files)?;
    }
    files.sort();
    let mut out: RecordingsById = BTreeMap::new();
    let mut n_files = 0;
    for path in files {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(format) = Format::of(&file_name).filter(|_| !file_name.starts_with('.')) else { continue };
        let relative = path.strip_prefix(data).unwrap_or(&path);
        let name = relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        let table = match format {
            Format::Parquet => read_parquet(&path, &name)?,
            _ => read_csv(&path, &name, format)?,
        };
        n_files += 1;
        let mut index = [None; 16];
        for (slot, (column, required)) in index.iter_mut().zip(RECORDING_INPUT) {
            *slot = if required { Some(table.required(column)?) } else { table.column(column) };
        }
        for (line, row) in &table.rows {
            let location = table.location(*line);
            let recording = recording_row(&index, row, &location)?;
            if let Some((previous, place)) = out.get(&recording.recording_id) {
                if *previous != recording {
                    return Err(Error::bad_file(
                        &table.name,
                        format!(
                            "conflicting duplicate recording_id '{}': {place} and {location} differ",
                            recording.recording_id
                        ),
                    ));
                }
                continue;
            }
            out.insert(recording.recording_id.clone(), (recording, location));
        }
    }
    Ok((out, n_files))
}

fn recording_row(index: &[Option<usize>; 16], row: &[String], location: &Location) -> Result<Recording> {
    let cell = |i: usize| index[i].and_then(|c| row.get(c)).map_or("", String::as_str);
    for (i, (column, required)) in RECORDING_INPUT.iter().enumerate() {
        if *required && cell(i).is_empty() && !matches!(*column, "recording_url") {
            return Err(bad(location.clone(), column, "", "is empty; expected a value"));
        }
    }
    // Ids are records.md's ids (resources.md: its column types).
    for (i, column) in [(0, "recording_id"), (1, "auth_id")] {
        crate::records::check_id(cell(i)).map_err(|reason| bad(location.clone(), column, cell(i), reason))?;
    }
    let format = cell(11);
    if !matches!(format, "wav" | "mp3") {
        return Err(bad(location.clone(), "recording_format", format, "is not a recording format (wav or mp3)"));
    }
    let kind = cell(12);
    if !matches!(kind, "conference" | "normal") {
        return Err(bad(location.clone(), "recording_type", kind, "is not a recording type (conference or normal)"));
    }
    let ms = |i: usize, column: &str| {
        parse_ms(cell(i)).ok_or_else(|| {
            bad(
                location.clone(),
                column,
                cell(i),
                "is not epoch milliseconds (a decimal, at most five fractional digits)",
            )
        })
    };
    let start = ms(13, "recording_start_ms")?;
    let end = ms(14, "recording_end_ms")?;
    if end < start {
        return Err(bad(location.clone(), "recording_end_ms", cell(14), "is before recording_start_ms"));
    }
    Ok(Recording {
        recording_id: cell(0).to_owned(),
        auth_id: cell(1).to_owned(),
        subaccount_auth: cell(2).to_owned(),
        call_uuid: cell(3).to_owned(),
        from_number: cell(4).to_owned(),
        to_number: cell(5).to_owned(),
        conference_name: cell(6).to_owned(),
        conference_uuid: cell(7).to_owned(),
        mpc_name: cell(8).to_owned(),
        mpc_uuid: cell(9).to_owned(),
        recording_url: cell(10).to_owned(),
        recording_format: format.to_owned(),
        recording_type: kind.to_owned(),
        start,
        end,
        add_time_us: instant_us(location.clone(), "add_time", cell(15))?,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::resources::{ListQuery, ResourceDb};

    /// Writes `text` to `dir/name`, creating folders.
    pub(in crate::resources) fn write(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    const RECORDINGS: &str = "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,\
conference_uuid,mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,add_time
R1,A,,C1,+1555,+1666,,,,,https://r/1.mp3,mp3,normal,1763646301000,1763646646100,2026-11-20T13:45:01.123456Z
R2,A,SA,C2,+1555,+1666,room,CU,,,https://r/2.wav,wav,conference,1763646301000,1763646302000,2026-11-19 10:00:00
";

    #[test]
    fn loads_idempotently_and_keeps_deletions() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path();
        write(
            dir,
            "endpoints.csv",
            "endpoint_id,auth_id,sub_account,alias,username,password,application_id\nE1,A,,Desk,desk1,secret,APP\n",
        );
        write(
            dir,
            "registrations.csv",
            "endpoint_id,sip_contact,sip_expires,sip_user_agent\nE1,sip:desk1@10.0.0.1,2026-11-21T00:00:00Z,X\n",
        );
        write(dir, "recordings/2026/rec.csv", RECORDINGS);
        let db = dir.join("state/resources.sqlite");
        let first = load(dir, &db).unwrap();
        assert_eq!((first.endpoints, first.registrations, first.recordings, first.recording_files), (1, 1, 2, 1));
        assert_eq!(load(dir, &db).unwrap(), first);
        let store = ResourceDb::open(&db).unwrap();
        let endpoint = store.endpoint("A", "E1").unwrap().unwrap();
        assert_eq!(endpoint.password_md5, "5ebe2294ecd0e0f08eab7690d2a6ee69");
        assert!(store.endpoint("B", "E1").unwrap().is_none());
        assert!(store.delete_recording("A", "R1", 0).unwrap());
        assert!(!store.delete_recording("A", "R1", 0).unwrap());
        let again = load(dir, &db).unwrap();
        assert_eq!((again.recordings, again.deleted_skipped), (1, 1));
        assert!(store.recording("A", "R1").unwrap().is_none());
        let all = ListQuery { limit: 20, ..ListQuery::default() };
        let (total, rows) = store.list_recordings("A", &all).unwrap();
        assert_eq!((total, rows[0].recording_id.as_str()), (1, "R2"));
    }

    #[test]
    fn refuses_bad_rows_naming_file_line_and_column() {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path();
        write(dir, "recordings/r.csv", &RECORDINGS.replace("mp3,normal", "ogg,normal"));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert_eq!(
            error,
            "recordings/r.csv:2: column 'recording_format': 'ogg' is not a recording format (wav or mp3)"
        );
        // The same row as line 3 of a CRLF file, after a good one.
        let crlf = RECORDINGS.replace("mp3,normal", "ogg,normal").replace('\n', "\r\n");
        let (header, row) = crlf.split_once("\r\n").unwrap();
        let good = RECORDINGS.lines().nth(1).unwrap().replace("R1", "R0");
        write(dir, "recordings/r.csv", &format!("{header}\r\n{good}\r\n{row}"));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert!(error.starts_with("recordings/r.csv:3: column 'recording_format'"), "{error}");
        // Ids are checked as records.md's: at most 128 bytes, no control
        // character.
        write(dir, "recordings/r.csv", &RECORDINGS.replace("R1,", &format!("{},", "R".repeat(129))));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert!(error.contains("column 'recording_id'") && error.contains("longer than 128 bytes"), "{error}");
        write(dir, "recordings/r.csv", &RECORDINGS.replace("R1,A,", "R1,A\u{1}B,"));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert!(error.contains("recordings/r.csv:2: column 'auth_id'"), "{error}");
        write(dir, "recordings/r.csv", &RECORDINGS.replace("1763646646100", "1.5e3"));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert!(error.contains("column 'recording_end_ms': '1.5e3'"), "{error}");
        write(dir, "recordings/r.csv", RECORDINGS);
        write(dir, "recordings/s.csv", &RECORDINGS.replace("https://r/1.mp3", "https://other"));
        let error = load(dir, &dir.join("db.sqlite")).unwrap_err().to_string();
        assert!(error.contains("conflicting duplicate recording_id 'R1'"), "{error}");
    }
}
