//! `telemeter accounts`: the accounts of a data folder or a store, and
//! their API credentials. `list` shows each account's id, currency, time
//! zone, whether a token is set (never the hash), allowed addresses and name;
//! `set-token ACCOUNT` reads a token from stdin and stores its SHA-256 as
//! the account's `auth_token_sha256` (the token itself is never kept):
//! in a data folder, `accounts.csv` is replaced atomically; in a store, a
//! new generation is published (a running `serve --store` follows it).

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};

use crate::records::account_token::{self, Missing};
use crate::records::accounts::Accounts;

/// Arguments of `accounts`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `accounts` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List the accounts: id, currency, time zone, whether a token is set,
    /// allowed addresses, name.
    List {
        /// `--data` or `--store`.
        #[command(flatten)]
        source: super::SourceArgs,
    },
    /// Set an account's API token: read one line from stdin (the trailing
    /// newline removed; empty refused) and store its SHA-256 in
    /// accounts.csv.
    SetToken {
        /// The account id (auth_id).
        account: String,
        /// `--data` or `--store`.
        #[command(flatten)]
        source: super::SourceArgs,
        /// Add a row for an account accounts.csv does not have (currency
        /// USD), instead of refusing.
        #[arg(long)]
        add: bool,
    },
}

/// Runs `accounts`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::List { source } => list(&source),
        Action::SetToken { account, source, add } => set_token(&account, &source, add),
    }
}

fn list(source: &super::SourceArgs) -> anyhow::Result<ExitCode> {
    let accounts = match (&source.data, &source.store) {
        (_, Some(store)) => {
            let store = crate::store::Store::open(store).context("cannot open the store")?;
            store.accounts()?
        }
        (Some(data), None) => Accounts::load(data)?,
        (None, None) => bail!("give --data DIR or --store STORE"),
    };
    let mut rows = vec![["auth_id", "currency", "timezone", "token", "allowed_ips", "name"].map(str::to_owned)];
    for account in accounts.iter() {
        rows.push([
            account.auth_id.clone(),
            account.currency.clone(),
            account.timezone.map_or_else(|| "-".to_owned(), |zone| zone.name().to_owned()),
            if account.auth_token_sha256.is_some() { "set" } else { "-" }.to_owned(),
            if account.allowlist.is_open() { "any".to_owned() } else { account.allowlist.text().to_owned() },
            account.name.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    let mut widths = [0usize; 6];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        super::write_line(&mut out, &line)?;
    }
    out.flush()?;
    if rows.len() == 1 {
        super::warn("no accounts.csv rows: no account can be served until one is given a token");
    }
    Ok(ExitCode::SUCCESS)
}

fn set_token(account: &str, source: &super::SourceArgs, add: bool) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("token for {account} (one line, shown as typed): ");
    }
    let token = read_token(stdin.lock())?;
    let hash = crate::server::auth::token_sha256_hex(&token);
    let missing = if add { Missing::Add } else { Missing::Refuse };
    match (&source.data, &source.store) {
        (_, Some(store)) => {
            let generation = crate::store::accounts::publish_accounts(store, |current| {
                account_token::with_token(current, account, &hash, missing)
            })
            .with_context(|| format!("cannot set the token of '{account}' in the store {}", store.display()))?;
            note(&format!(
                "token of {account} set: published generation {generation} of {} (a running `serve --store` \
                 follows it within its --reload-interval). A later ingest of a data folder with its own \
                 accounts.csv publishes that file instead: set the token there too for it to last.",
                store.display()
            ));
        }
        (Some(data), None) => {
            account_token::set_in_folder(data, account, &hash, missing)
                .with_context(|| format!("cannot set the token of '{account}' in {}", data.display()))?;
            note(&format!(
                "token of {account} set in {} (a running `serve --data` reads it at its next start)",
                data.join("accounts.csv").display()
            ));
        }
        (None, None) => bail!("give --data DIR or --store STORE"),
    }
    Ok(ExitCode::SUCCESS)
}

/// What was done, on stderr (stdout stays empty), unless `--quiet`.
fn note(text: &str) {
    if !super::quiet() {
        eprintln!("{text}");
    }
}

/// The token on `input`: one line, its `\n` or `\r\n` removed; refused when
/// empty, when more lines follow, or when it holds a control character
/// (an HTTP header cannot carry one).
fn read_token(input: impl Read) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    input.take(64 * 1024).read_to_end(&mut bytes).context("cannot read the token from stdin")?;
    let text = String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("the token on stdin is not UTF-8"))?;
    let line = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    if line.contains('\n') {
        bail!("stdin holds more than one line; give the token alone on one line");
    }
    if line.is_empty() {
        bail!("no token on stdin (an empty line); give it as one line, e.g. printf '%s\\n' \"$TOKEN\" | telemeter accounts set-token ...");
    }
    if line.chars().any(char::is_control) {
        bail!("the token holds a control character; an HTTP Authorization header cannot carry it");
    }
    Ok(line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_one_line_without_its_newline() {
        assert_eq!(read_token(&b"s3cret\n"[..]).unwrap(), "s3cret");
        assert_eq!(read_token(&b"s3cret\r\n"[..]).unwrap(), "s3cret");
        assert_eq!(read_token(&b"with space:colon"[..]).unwrap(), "with space:colon");
        for bad in [&b""[..], b"\n", b"\r\n", b"a\nb\n", b"a\tb\n", b"\xff\n"] {
            assert!(read_token(bad).is_err(), "{bad:?}");
        }
    }
}
