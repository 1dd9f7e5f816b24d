//! The server's resources for a generated data set: `endpoints.csv`,
//! `registrations.csv` and `recordings/recordings.csv` (resources.md), so
//! that `serve` over generated data answers every resource, not only the
//! usage summary.
//!
//! Like the records, everything is a pure function of the seed and the
//! plan's accounts:
//! - each account has one endpoint on the account and one on each of its
//!   first two subaccounts; every other endpoint is registered until a year
//!   after the window, so the registered and unregistered shapes both show;
//! - each account has [`RECORDINGS_PER_DAY`] recordings a day over the
//!   window's last 7 days (the recordings list's default window when the
//!   clock is the window's end), a tenth of them conference recordings.

use std::fmt::Write as _;
use std::path::Path;

use chrono::DateTime;
use rand::Rng;
use rand_pcg::Pcg64Mcg;

use super::plan::{mix128, uuid, Plan};
use crate::error::{Error, Result};

/// Recordings per account and day, over the window's last 7 days.
pub const RECORDINGS_PER_DAY: u32 = 3;

/// The generator stream of the resources (apart from the records').
const STREAM: u64 = 0x5E50_0CE5;

/// The files written, relative to the output folder, with their sizes.
pub type Files = Vec<(String, u64)>;

/// Writes the resource files of `plan` under `out` (which must exist).
pub fn write(plan: &Plan, out: &Path) -> Result<Files> {
    let files = [
        ("endpoints.csv", endpoints(plan)),
        ("registrations.csv", registrations(plan)),
        ("recordings/recordings.csv", recordings(plan)),
    ];
    let folder = out.join("recordings");
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
    let mut written = Vec::with_capacity(files.len());
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, &text).map_err(|e| Error::io(&path, e))?;
        written.push((name.to_owned(), text.len() as u64));
    }
    Ok(written)
}

/// One endpoint of the plan: its id, account, subaccount and username.
struct Endpoint<'a> {
    id: String,
    auth_id: &'a str,
    subaccount: &'a str,
    username: String,
}

/// Every account's endpoints, in account order.
fn endpoint_list(plan: &Plan) -> Vec<Endpoint<'_>> {
    let mut list = Vec::new();
    for (a, account) in plan.accounts.iter().enumerate() {
        let owners = std::iter::once("").chain(account.subaccounts.iter().take(2).map(String::as_str));
        for (e, subaccount) in owners.enumerate() {
            let id = format!("EP{a:05}{e}");
            let username = format!("user{a:05}{e}");
            list.push(Endpoint { id, auth_id: &account.auth_id, subaccount, username });
        }
    }
    list
}

fn endpoints(plan: &Plan) -> String {
    let mut text = String::from("endpoint_id,auth_id,sub_account,alias,username,password,application_id\n");
    for (i, endpoint) in endpoint_list(plan).iter().enumerate() {
        let Endpoint { id, auth_id, subaccount, username } = endpoint;
        let application = if i % 2 == 0 { format!("APP{i:06}") } else { String::new() };
        let _ = writeln!(text, "{id},{auth_id},{subaccount},Desk {i},{username},secret-{username},{application}");
    }
    text
}

fn registrations(plan: &Plan) -> String {
    let mut text = String::from("endpoint_id,sip_contact,sip_expires,sip_user_agent\n");
    let expires = plan.start_secs + (i64::from(plan.spec.days) + 365) * 86_400;
    let expires = DateTime::from_timestamp(expires, 0).map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    let expires = expires.unwrap_or_default();
    for (i, endpoint) in endpoint_list(plan).iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let host = 10 + i % 240;
        let _ = writeln!(
            text,
            "{},sip:{}@192.0.2.{host}:5060,{expires},telemeter-generate/1",
            endpoint.id, endpoint.username
        );
    }
    text
}

fn recordings(plan: &Plan) -> String {
    let mut text = String::from(
        "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,conference_uuid,\
         mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,\
         add_time\n",
    );
    let days = plan.spec.days.min(7);
    let first_day = plan.start_secs + i64::from(plan.spec.days - days) * 86_400;
    let mut rng = Pcg64Mcg::new(mix128(plan.spec.seed, STREAM, 0));
    let mut call = [0u8; 36];
    let mut conference = [0u8; 36];
    for (a, account) in plan.accounts.iter().enumerate() {
        for n in 0..days * RECORDINGS_PER_DAY {
            let day = i64::from(n / RECORDINGS_PER_DAY);
            let start_ms = (first_day + day * 86_400) * 1000 + i64::from(rng.next_u32() % 86_000_000);
            let length_ms = 5_000 + i64::from(rng.next_u32() % 600_000);
            let end_ms = start_ms + length_ms;
            uuid(rng.next_u64(), rng.next_u64(), &mut call);
            let call = std::str::from_utf8(&call).unwrap_or_default();
            let id = format!("REC{a:05}{n:04}");
            let subaccount = match n % 3 {
                1 => account.subaccounts.first().map_or("", String::as_str),
                _ => "",
            };
            let (conference_name, conference_uuid, kind) = if n % 10 == 9 {
                uuid(rng.next_u64(), rng.next_u64(), &mut conference);
                (format!("standup-{a}"), std::str::from_utf8(&conference).unwrap_or_default().to_owned(), "conference")
            } else {
                (String::new(), String::new(), "normal")
            };
            let format = if n % 4 == 0 { "wav" } else { "mp3" };
            let from = 14_155_550_000u64 + u64::from(rng.next_u32() % 10_000);
            let to = 14_155_560_000u64 + u64::from(rng.next_u32() % 10_000);
            let add_time = DateTime::from_timestamp_millis(end_ms + 500)
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
                .unwrap_or_default();
            let _ = writeln!(
                text,
                "{id},{auth},{subaccount},{call},+{from},+{to},{conference_name},{conference_uuid},,,\
                 https://media.example.com/{auth}/{id}.{format},{format},{kind},{start_ms},{end_ms},{add_time}",
                auth = account.auth_id,
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{OutputFormat, Spec};

    fn plan(seed: u64) -> Plan {
        let spec = Spec {
            rows: [10, 0, 0, 0],
            accounts: 3,
            subaccounts: 2,
            start: chrono::NaiveDate::from_ymd_opt(2026, 11, 1).expect("a date"),
            days: 10,
            seed,
            format: OutputFormat::Csv,
            files: 1,
            duplicates: 0.0,
        };
        Plan::new(&spec).expect("a plan")
    }

    #[test]
    fn every_account_has_endpoints_and_a_week_of_recordings() {
        let plan = plan(1);
        let endpoints = endpoints(&plan);
        assert_eq!(endpoints.lines().count(), 1 + 3 * 3);
        let recordings = recordings(&plan);
        assert_eq!(recordings.lines().count(), 1 + 3 * 7 * RECORDINGS_PER_DAY as usize);
        // The last 7 days of the window: 2026-11-04 to 2026-11-10.
        for line in recordings.lines().skip(1) {
            let add_time = line.rsplit(',').next().expect("add_time");
            assert!(("2026-11-04".."2026-11-11").contains(&&add_time[..10]), "{line}");
        }
        assert_eq!(registrations(&plan).lines().count(), 1 + 5);
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes() {
        assert_eq!(recordings(&plan(4)), recordings(&plan(4)));
        assert_ne!(recordings(&plan(4)), recordings(&plan(5)));
    }
}
