//! The integration tests: one binary, one module per area.

mod differential;
mod generate;
mod report;
mod server;
mod timezones;
mod store;
