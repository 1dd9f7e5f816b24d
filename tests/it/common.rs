//! Helpers shared by the integration tests: the binary under test, a run with
//! its exit code and both streams, the sample data set, temporary data
//! directories and golden files.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The calls header in the contract's column order, for tests that write
/// calls files of their own.
pub const CALLS_HEADER: &str =
    "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n";

/// "Now" of every golden request over `sample_data/`.
pub const NOW: &str = "2026-11-21T12:00:00Z";

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_telemeter")
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `sample_data/`.
pub fn sample_data() -> PathBuf {
    root().join("sample_data")
}

/// The cell of `column` in the row of `auth_id` of an `accounts.csv` text
/// without quoted fields (as `sample_data/`'s is).
pub fn account_cell<'a>(accounts_csv: &'a str, auth_id: &str, column: &str) -> &'a str {
    let mut lines = accounts_csv.lines();
    let header = lines.next().expect("a header");
    let at = header.split(',').position(|h| h == column).unwrap_or_else(|| panic!("no column {column}"));
    let row = lines.find(|l| l.split(',').next() == Some(auth_id)).unwrap_or_else(|| panic!("no row {auth_id}"));
    row.split(',').nth(at).unwrap_or_else(|| panic!("{auth_id}: no {column}"))
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    /// The exit code (`-1` when killed by a signal).
    pub code: i32,
    /// Standard output, as text.
    pub stdout: String,
    /// Standard error, as text.
    pub stderr: String,
}

impl Run {
    /// Asserts exit 0 and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "expected success; stderr:\n{}\nstdout:\n{}", self.stderr, self.stdout);
        &self.stdout
    }

    /// Asserts exit `code` and returns stdout.
    pub fn exited(&self, code: i32) -> &str {
        assert_eq!(self.code, code, "expected exit {code}; stderr:\n{}\nstdout:\n{}", self.stderr, self.stdout);
        &self.stdout
    }
}

/// The page-token key of the tests' runs (`TELEMETER_TOKEN_KEY`), so that
/// tokens in golden files are the same on every machine.
pub const TOKEN_KEY: &str = "telemeter integration tests";

/// The state directory of every run of the tests (`TELEMETER_STATE_DIR`):
/// under the target folder, never the user's.
pub fn state_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("state")
}

/// The binary, with the tests' state directory, no thread count, no
/// terminal width and no page-token key from the environment (so the key
/// files are used).
pub fn command() -> Command {
    let mut command = Command::new(binary());
    command
        .env_remove("TELEMETER_THREADS")
        .env_remove("TELEMETER_TOKEN_KEY")
        .env_remove("COLUMNS")
        .env("TELEMETER_STATE_DIR", state_dir());
    command
}

/// Runs the binary with `args` and the tests' page-token key. Never accepts
/// a panic, whatever the outcome.
pub fn telemeter(args: &[&str]) -> Run {
    let mut command = command();
    command.env("TELEMETER_TOKEN_KEY", TOKEN_KEY);
    run_command(args, command)
}

/// Runs `command` with `args`, as [`telemeter`] does.
pub fn run_command(args: &[&str], mut command: Command) -> Run {
    let output = command.args(args).output().expect("start telemeter");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    };
    assert!(!run.stderr.contains("panicked"), "telemeter {args:?} panicked:\n{}", run.stderr);
    assert!(run.code >= 0, "telemeter {args:?} was killed by a signal:\n{}", run.stderr);
    run
}

/// Runs `telemeter summary --data DATA --auth-id AUTH_ID --query QUERY
/// --now NOW` followed by `extra`.
pub fn summary(data: &Path, auth_id: &str, query: &str, extra: &[&str]) -> Run {
    let data = data.to_str().expect("UTF-8 path");
    let mut args = vec!["summary", "--data", data, "--auth-id", auth_id, "--query", query, "--now", NOW];
    args.extend_from_slice(extra);
    telemeter(&args)
}

/// A fresh temporary directory.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("create a temporary directory")
}

/// Writes `dir/relative` with `bytes`, creating folders.
pub fn write(dir: &Path, relative: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("a parent folder")).expect("create folders");
    std::fs::write(&path, bytes).expect("write a file");
    path
}

/// Gzip-compresses `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Compares `actual` with `tests/golden/<name>`, or rewrites the file when
/// `UPDATE_GOLDEN=1`.
pub fn golden(name: &str, actual: &str) {
    let path = root().join("tests").join("golden").join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("golden folder")).expect("create tests/golden");
        std::fs::write(&path, actual).expect("write a golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
    if expected != actual {
        let first_difference = expected.bytes().zip(actual.bytes()).take_while(|(a, b)| a == b).count();
        panic!(
            "{} differs from the output at byte {first_difference}\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}

/// Writes a Parquet file of all-string columns: `(name, values)` pairs.
pub fn write_string_parquet(path: &Path, columns: &[(&str, &[&str])]) {
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, Series};
    let height = columns.first().map_or(0, |(_, values)| values.len());
    let columns: Vec<Column> =
        columns.iter().map(|(name, values)| Series::new((*name).into(), *values).into_column()).collect();
    write_frame(path, DataFrame::new(height, columns).expect("a frame"));
}

/// Writes a polars frame as a Parquet file, creating folders.
pub fn write_frame(path: &Path, mut frame: polars::prelude::DataFrame) {
    std::fs::create_dir_all(path.parent().expect("a parent folder")).expect("create folders");
    let file = std::fs::File::create(path).expect("create a Parquet file");
    polars::prelude::ParquetWriter::new(file).finish(&mut frame).expect("write Parquet");
}

/// The built-in page-token key of earlier versions, public in their source:
/// `SHA-256("telemeter page token key v1")`.
pub fn public_key() -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b"telemeter page token key v1").into()
}

/// A page token of the earlier layout (version 1: offset, from and to as
/// days of the common era, the parameters' digest), sealed with `key`: what
/// anyone who read that source could forge.
pub fn forged_v1(key: &[u8; 32], offset: u64, from_days: i32, to_days: i32, digest: [u8; 16]) -> String {
    use base64::Engine;
    use hmac::Mac;
    let mut body = vec![1u8];
    body.extend_from_slice(&offset.to_be_bytes());
    body.extend_from_slice(&from_days.to_be_bytes());
    body.extend_from_slice(&to_days.to_be_bytes());
    body.extend_from_slice(&digest);
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("a key");
    mac.update(&body);
    body.extend_from_slice(&mac.finalize().into_bytes()[..16]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body)
}

/// Copies the folder `from` to `to`, recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// Says that a test is skipped, and why, in the test run's own output: the
/// line is written to the process's stderr directly, past libtest's
/// capture (which takes only `eprintln!`), so a skipped test that passes
/// still shows.
pub fn skipped(reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED ({}): {reason}", std::thread::current().name().unwrap_or("?"));
}

/// The Python of the virtual environment `.venv-NAME` at the repository
/// root, when `imports` (Python's `import` list) import there. Otherwise
/// the test says it is skipped and how to install `requirements`, except
/// under `CI=true`, where it fails (`.ci/run` installs every one).
pub fn venv_python(name: &str, imports: &str, requirements: &str) -> Option<PathBuf> {
    let python = root().join(format!(".venv-{name}/bin/python"));
    let found = python.exists()
        && Command::new(&python).args(["-c", &format!("import {imports}")]).output().is_ok_and(|o| o.status.success());
    let install = format!("python3 -m venv .venv-{name} && .venv-{name}/bin/pip install -r {requirements}");
    match found {
        true => Some(python),
        false if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("CI=true but no {imports}: {install}"),
        false => {
            skipped(&format!("no {imports} ({install})"));
            None
        }
    }
}
