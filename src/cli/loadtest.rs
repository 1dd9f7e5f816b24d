//! `telemeter loadtest` (hidden): a bounded load test of a running server,
//! on loopback only.
//!
//! `loadtest prepare --data DIR` adds what the server needs to a generated
//! data set (tokens in accounts.csv, endpoints, registrations, recordings);
//! `loadtest run` sends a fixed number of requests from a fixed number of
//! client threads, with a time limit, and prints the status counts,
//! latency percentiles and throughput. It fails when any answer is a 5xx or
//! when an account got more usage summaries than the rate limit allows.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use base64::Engine;
use chrono::{DateTime, Utc};

use crate::server::auth::token_sha256_hex;
use crate::server::client::Client;
use crate::threads;

/// Arguments of `loadtest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The two steps.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Add tokens, endpoints, registrations and recordings to a data set.
    Prepare(PrepareArgs),
    /// Send the requests and report.
    Run(RunArgs),
}

/// Arguments of `loadtest prepare`.
#[derive(Debug, clap::Args)]
pub struct PrepareArgs {
    /// The data directory (e.g. written by `telemeter generate`); its
    /// accounts.csv is rewritten with tokens.
    #[arg(long)]
    pub data: PathBuf,
    /// Recordings per account.
    #[arg(long, default_value_t = 200)]
    pub recordings: u32,
    /// Endpoints per account.
    #[arg(long, default_value_t = 10)]
    pub endpoints: u32,
    /// "Now" for add_time and registration expiries, RFC 3339.
    #[arg(long, value_parser = super::parse_now)]
    pub now: Option<DateTime<Utc>>,
}

/// Arguments of `loadtest run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The server, a loopback address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// `auth_id:token` lines (written by `prepare`).
    #[arg(long)]
    pub credentials: PathBuf,
    /// Requests in all (at most 1000000).
    #[arg(long, default_value_t = 5000)]
    pub requests: u64,
    /// Concurrent clients, one connection each (at most 256).
    #[arg(long, default_value_t = 32)]
    pub clients: u32,
    /// Stop after this many seconds even if requests remain (at most 600).
    #[arg(long, default_value_t = 120)]
    pub max_seconds: u64,
}

/// Runs `loadtest`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Prepare(args) => prepare(args),
        Action::Run(args) => run_load(args),
    }
}

fn prepare(args: PrepareArgs) -> anyhow::Result<ExitCode> {
    let now = args.now.unwrap_or_else(Utc::now);
    let accounts_path = args.data.join("accounts.csv");
    let mut reader =
        csv::Reader::from_path(&accounts_path).with_context(|| format!("cannot read {}", accounts_path.display()))?;
    let mut header: Vec<String> = reader.headers()?.iter().map(str::to_owned).collect();
    let auth_column = header.iter().position(|h| h == "auth_id").context("accounts.csv has no auth_id column")?;
    let mut rows: Vec<Vec<String>> =
        reader.records().map(|r| r.map(|r| r.iter().map(str::to_owned).collect())).collect::<Result<_, _>>()?;
    let mut column = |name: &str, rows: &mut Vec<Vec<String>>| {
        header.iter().position(|h| h == name).unwrap_or_else(|| {
            header.push(name.to_owned());
            rows.iter_mut().for_each(|r| r.push(String::new()));
            header.len() - 1
        })
    };
    let token_column = column("auth_token_sha256", &mut rows);
    let ips_column = column("allowed_ips", &mut rows);
    let mut credentials = String::new();
    let mut ids = Vec::new();
    for row in &mut rows {
        let auth_id = row[auth_column].clone();
        let token = format!("token-{auth_id}");
        row[token_column] = token_sha256_hex(&token);
        row[ips_column] = String::new();
        credentials.push_str(&format!("{auth_id}:{token}\n"));
        ids.push(auth_id);
    }
    let mut writer = csv::Writer::from_path(&accounts_path)?;
    writer.write_record(&header)?;
    for row in &rows {
        writer.write_record(row)?;
    }
    writer.flush()?;
    let mut endpoints = String::from("endpoint_id,auth_id,sub_account,alias,username,password,application_id\n");
    let mut registrations = String::from("endpoint_id,sip_contact,sip_expires,sip_user_agent\n");
    let mut recordings = String::from(
        "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,conference_uuid,\
         mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,add_time\n",
    );
    let expires = (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ");
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for auth_id in &ids {
        for i in 0..args.endpoints {
            let id = format!("EP{auth_id}{i}");
            endpoints.push_str(&format!("{id},{auth_id},,desk {i},user{i}{auth_id},pw{i},APP{i}\n"));
            if i % 2 == 0 {
                registrations.push_str(&format!("{id},sip:user{i}@192.0.2.{i},{expires},loadtest/1.0\n"));
            }
        }
        for i in 0..args.recordings {
            let back_us = (next() % (6 * 86_400_000_000)) as i64;
            let add = now - chrono::Duration::microseconds(back_us);
            let start_ms = add.timestamp_millis() - 600_000;
            let length_ms = 1_000 + (next() % 1_800_000) as i64;
            let (kind, conference) =
                if i % 5 == 0 { ("conference", format!("room{}", i % 7)) } else { ("normal", String::new()) };
            recordings.push_str(&format!(
                "RC{auth_id}{i:06},{auth_id},,CALL{auth_id}{},+1555{:07},+1666{:07},{conference},,,,https://rec.example/{auth_id}/{i}.mp3,mp3,{kind},{start_ms},{},{}\n",
                i / 2,
                next() % 10_000_000,
                next() % 10_000_000,
                start_ms + length_ms,
                add.format("%Y-%m-%dT%H:%M:%S%.6fZ"),
            ));
        }
    }
    std::fs::write(args.data.join("endpoints.csv"), endpoints)?;
    std::fs::write(args.data.join("registrations.csv"), registrations)?;
    std::fs::create_dir_all(args.data.join("recordings"))?;
    std::fs::write(args.data.join("recordings/recordings.csv"), recordings)?;
    let credentials_path = args.data.join("loadtest-credentials.txt");
    std::fs::write(&credentials_path, credentials)?;
    eprintln!(
        "prepared {} accounts ({} endpoints, {} recordings each); credentials in {}",
        ids.len(),
        args.endpoints,
        args.recordings,
        credentials_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What one client saw.
#[derive(Default)]
struct Tally {
    latencies: Vec<(&'static str, Duration)>,
    statuses: BTreeMap<(&'static str, u16), u64>,
    summaries_ok: BTreeMap<String, u64>,
    bad_429: u64,
    errors: Vec<String>,
}

fn run_load(args: RunArgs) -> anyhow::Result<ExitCode> {
    if !args.addr.ip().is_loopback() {
        bail!("loadtest talks to loopback addresses only, not {}", args.addr);
    }
    if args.requests > 1_000_000 || args.clients == 0 || args.clients > 256 || args.max_seconds > 600 {
        bail!("--requests at most 1000000, --clients 1 to 256, --max-seconds at most 600");
    }
    let text = std::fs::read_to_string(&args.credentials)?;
    let accounts: Vec<Credentials> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(a, t)| Credentials { auth_id: a.to_owned(), token: t.to_owned() })
        .collect();
    if accounts.is_empty() {
        bail!("no auth_id:token lines in {}", args.credentials.display());
    }
    let accounts = Arc::new(accounts);
    let issued = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.max_seconds);
    let handles = (0..args.clients)
        .map(|n| {
            let accounts = accounts.clone();
            let issued = issued.clone();
            let total = args.requests;
            let addr = args.addr;
            threads::spawn("telemeter-client", move || {
                client_loop(n as usize, addr, &accounts, &issued, total, deadline)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut all = Tally::default();
    for handle in handles {
        let tally = handle.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
        all.latencies.extend(tally.latencies);
        for (k, v) in tally.statuses {
            *all.statuses.entry(k).or_default() += v;
        }
        for (k, v) in tally.summaries_ok {
            *all.summaries_ok.entry(k).or_default() += v;
        }
        all.bad_429 += tally.bad_429;
        all.errors.extend(tally.errors);
    }
    let elapsed = started.elapsed();
    let mut out = std::io::stdout().lock();
    let n = all.latencies.len();
    writeln!(
        out,
        "requests: {n} in {:.2} s from {} clients, {:.0} requests/s",
        elapsed.as_secs_f64(),
        args.clients,
        n as f64 / elapsed.as_secs_f64()
    )?;
    let mut by_op: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for (op, d) in &all.latencies {
        by_op.entry(op).or_default().push(*d);
        by_op.entry("all").or_default().push(*d);
    }
    for (op, mut times) in by_op {
        times.sort();
        let pick = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
        writeln!(
            out,
            "{op:>10}: n={:<6} p50={:>8.2} ms  p99={:>8.2} ms  max={:>8.2} ms",
            times.len(),
            pick(0.50).as_secs_f64() * 1e3,
            pick(0.99).as_secs_f64() * 1e3,
            pick(1.0).as_secs_f64() * 1e3
        )?;
    }
    for ((op, status), count) in &all.statuses {
        writeln!(out, "status {status} {op}: {count}")?;
    }
    let windows = elapsed.as_secs() / 60 + 1;
    let over: Vec<_> = all.summaries_ok.iter().filter(|(_, n)| **n > 20 * windows).collect();
    let n_5xx: u64 = all.statuses.iter().filter(|((_, s), _)| *s >= 500).map(|(_, c)| c).sum();
    writeln!(
        out,
        "5xx: {n_5xx}; 429 without Retry-After: {}; accounts over the rate limit: {}; client errors: {}",
        all.bad_429,
        over.len(),
        all.errors.len()
    )?;
    for error in all.errors.iter().take(5) {
        writeln!(out, "  client error: {error}")?;
    }
    let ok = n_5xx == 0 && all.bad_429 == 0 && over.is_empty() && all.errors.is_empty();
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// One line of the credentials file: an account and its token.
struct Credentials {
    auth_id: String,
    token: String,
}

fn client_loop(
    n: usize,
    addr: SocketAddr,
    accounts: &[Credentials],
    issued: &AtomicU64,
    total: u64,
    deadline: Instant,
) -> Tally {
    let Credentials { auth_id, token } = &accounts[n % accounts.len()];
    let authorization =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{auth_id}:{token}")));
    let headers = [("Authorization", authorization.as_str())];
    let mut client = Client::new(addr);
    let mut tally = Tally::default();
    let mut known: Vec<String> = Vec::new();
    loop {
        let i = issued.fetch_add(1, Ordering::Relaxed);
        if i >= total || Instant::now() >= deadline {
            break;
        }
        let (op, method, path): (&'static str, &str, String) = match i % 10 {
            0..=2 => ("list", "GET", format!("/v1/Account/{auth_id}/Recording/?offset={}", (i / 10) % 3 * 20)),
            3..=5 if !known.is_empty() => {
                ("recording", "GET", format!("/v1/Account/{auth_id}/Recording/{}/", known[(i as usize) % known.len()]))
            }
            3..=5 => ("list", "GET", format!("/v1/Account/{auth_id}/Recording/?limit=20")),
            6 | 7 => ("endpoint", "GET", format!("/v1/Account/{auth_id}/Endpoint/EP{auth_id}{}/", i % 12)),
            8 => (
                "summary",
                "GET",
                format!(
                    "/v1/Account/{auth_id}/UsageSummary/?granularity=month&from_date=2026-01-01&to_date=2027-01-01"
                ),
            ),
            _ => ("delete", "DELETE", format!("/v1/Account/{auth_id}/Recording/NOPE{i}/")),
        };
        let sent = Instant::now();
        match client.request(method, &path, &headers) {
            Ok(response) => {
                tally.latencies.push((op, sent.elapsed()));
                *tally.statuses.entry((op, response.status)).or_default() += 1;
                if op == "summary" && response.status == 200 {
                    *tally.summaries_ok.entry(auth_id.clone()).or_default() += 1;
                }
                if response.status == 429
                    && response.header("retry-after").and_then(|v| v.parse::<u64>().ok()).is_none()
                {
                    tally.bad_429 += 1;
                }
                if op == "list" && response.status == 200 && known.len() < 100 {
                    let text = response.text();
                    for piece in text.split("\"recording_id\":\"").skip(1) {
                        if let Some(id) = piece.split('"').next() {
                            known.push(id.to_owned());
                        }
                    }
                }
            }
            Err(e) => tally.errors.push(format!("{method} {path}: {e}")),
        }
    }
    tally
}
