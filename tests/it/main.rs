//! The integration tests: one binary, one module per area.

// Helpers: the binary under test, runs with exit code and streams, golden files.
mod common;
// The analyst's examples (DuckDB, polars) against the report's own sums.
mod analyst;
// `changes`: each ingest's ledger of account months, and its sums.
mod changes;
// Revisions and voids: current versions, counts, conflicts, ingest's refusal.
mod corrections;
// The binary against the independent Python implementation of the contract.
mod differential;
// Docs: no development history, sizes, links that resolve.
mod docs;
// `history`: a stored record's versions, where each came from.
mod history;
// One row check: `summary`, `report` and `ingest` accept and refuse the same rows.
mod edges;
// A full disk under a store (a tmpfs, as root): ingest fails cleanly, readers answer.
mod faults;
// Output formats: summary --format table|csv, -o FILE, report --pages jsonl.
mod formats;
// Bad requests (exit 2, the 400 body) and bad records (exit 1, file:line:column).
mod errors;
// `serve --store` following the generations `ingest` publishes.
mod follow;
// CSV framing: every physical line is one row or one bad row.
mod framing;
// The fuzz targets' seed corpus and properties, in plain `cargo test`.
mod fuzzing;
// `telemeter generate`: deterministic, valid, duplicates counted once.
mod generate;
// report.html and index.html: formatted money, sorting, size, Chromium layout.
mod html;
// Damage at rest: checksums found on every read, a lost manifest refused and repaired.
mod integrity;
// `ingest` at its memory limits, crash safety and idempotence.
mod ingest;
// Inputs at their limits: files changing under a read, endless lines, ulimit -v, FIFOs.
mod inputs;
// The architecture: module docs, layer order, no file cycles.
mod layers;
// Warnings on stderr for surprising runs (stdout unchanged, --quiet), precise messages.
mod notices;
// Completions, man pages, help examples that run, `accounts set-token`.
mod onboard;
// Progress on stderr of `generate`, `ingest` and `report`: lines, counts, `--quiet`.
mod progress;
// `telemeter report`: pages, CSV, HTML, manifest, atomic output.
mod report;
// Runtime state at rest: deletions lost or damaged, a read-only store, a lost key.
mod runtime_state;
// /openapi.json against the server: schemathesis finds them in agreement.
mod schema;
// `telemeter serve` over HTTP: the API, auth, allowlists, resources.
mod server;
// `serve` at its socket edges: timeouts, connection cap, shaped refusals.
mod server_edges;
// Plivo's Python SDK as a client of `serve`.
mod sdk;
// `ingest --engine spark` against a real Apache Spark.
mod spark;
// `summary --store` byte-identical to `summary --data`.
mod store;
// Golden tests of `telemeter summary` over `sample_data/`.
mod summary;
// Local time zones: DST days, historical offsets.
mod timezones;
// Page tokens bound to their data and their key.
mod tokens;
