//! The `telemeter` binary: parse the command line, run, map the outcome to
//! an exit code (0 done, 1 failed, 2 bad request).

use std::process::ExitCode;

fn main() -> ExitCode {
    telemeter::cli::main()
}
