//! The integration tests: one binary, one module per area.

mod differential;
mod generate;
mod report;
mod timezones;
mod store;
