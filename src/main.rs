//! The `telemeter` binary: parse the command line, run, map the outcome to
//! an exit code (0 done, 1 failed, 2 bad request).

use std::process::ExitCode;

/// The system allocator; a failed allocation is reported, not an abort.
#[global_allocator]
static ALLOCATOR: telemeter::cli::memory::Reporting = telemeter::cli::memory::Reporting;

fn main() -> ExitCode {
    telemeter::cli::main()
}
