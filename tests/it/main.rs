//! The integration tests: one binary, one module per area.

mod common;
mod differential;
mod edges;
mod errors;
mod follow;
mod framing;
mod fuzzing;
mod generate;
mod ingest;
mod report;
mod server;
mod server_edges;
mod spark;
mod store;
mod summary;
mod timezones;
mod tokens;
