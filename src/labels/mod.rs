//! `error_reason` labels: error and hangup codes to human-readable text.
//!
//! The tables are the contract's own CSV files (`docs/contracts/`), compiled in
//! so that every report carries the same labels wherever it runs.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The label of a code missing from its table.
pub const UNKNOWN: &str = "Unknown";

const MESSAGE_ERROR_CODES: &str = include_str!("../../docs/contracts/message_error_codes.csv");
const HANGUP_CAUSES: &str = include_str!("../../docs/contracts/hangup_causes.csv");

/// The label of a message `error_code`, `Unknown` when not in the table.
pub fn error_code(code: &str) -> &'static str {
    static TABLE: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    TABLE.get_or_init(|| table(MESSAGE_ERROR_CODES)).get(code).copied().unwrap_or(UNKNOWN)
}

/// The label of a call `hangup_cause`, `Unknown` when not in the table.
pub fn hangup_cause(code: &str) -> &'static str {
    static TABLE: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    TABLE.get_or_init(|| table(HANGUP_CAUSES)).get(code).copied().unwrap_or(UNKNOWN)
}

/// Parses a two-column `code,label` table with a header line.
fn table(text: &'static str) -> HashMap<&'static str, &'static str> {
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_once(','))
        .map(|(code, label)| (code.trim(), label.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_the_shipped_tables() {
        assert_eq!(error_code("30"), "Spam Detected");
        assert_eq!(
            error_code("201"),
            "Outbound Messages from US Toll-Free Numbers to Canadian Destination Numbers Blocked"
        );
        assert_eq!(error_code("31"), UNKNOWN);
        assert_eq!(hangup_cause("4000"), "Normal Hangup");
        assert_eq!(hangup_cause("3010"), "Busy Line");
        assert_eq!(hangup_cause("0"), "Unknown");
        assert_eq!(hangup_cause("NORMAL_CLEARING"), UNKNOWN);
    }
}
