//! A new user's first hour: shell completions and man pages generated from
//! the CLI definition, help text with examples that run as written and
//! every environment variable, and `accounts set-token` making a
//! generated store servable (a real server on a real port).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory;
use telemeter::cli::Cli;

use crate::common::{self, telemeter};
use crate::server::{basic, get, Server};

/// The visible commands, nested ones too, as (name words, long flags):
/// `("summary", ..)`, `("accounts set-token", ..)`.
fn commands() -> Vec<(String, Vec<String>)> {
    fn add(prefix: &str, parent: &clap::Command, found: &mut Vec<(String, Vec<String>)>) {
        for command in parent.get_subcommands().filter(|c| !c.is_hide_set()) {
            let name = format!("{prefix}{}", command.get_name());
            let mut flags: Vec<String> = command
                .get_arguments()
                .filter(|a| !a.is_hide_set())
                .filter_map(|a| a.get_long())
                .map(String::from)
                .collect();
            flags.retain(|f| f != "help" && f != "version");
            found.push((name.clone(), flags));
            add(&format!("{name} "), command, found);
        }
    }
    let mut found = Vec::new();
    add("", &Cli::command(), &mut found);
    found
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn completion_scripts_are_valid_and_name_every_command_and_flag() {
    let bash = telemeter(&["completions", "bash"]);
    let script = bash.ok();
    let dir = common::temp_dir();
    let path = dir.path().join("telemeter.bash");
    std::fs::write(&path, script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", String::from_utf8_lossy(&check.stderr));
    let commands = commands();
    assert!(commands.len() >= 10, "{commands:?}");
    for (name, flags) in &commands {
        let last = name.rsplit(' ').next().unwrap();
        assert!(script.contains(last), "bash completion lacks {name}");
        for flag in flags {
            assert!(script.contains(&format!("--{flag}")), "bash completion lacks {name} --{flag}");
        }
    }
    assert!(!script.contains("spark-task") && !script.contains("loadtest"), "a hidden command is offered");
    // bash completes with it: a command, a flag of a nested command, a value.
    let complete = |words: &str, cword: usize| -> String {
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _telemeter telemeter \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[*]}}\"",
            path.display()
        );
        let output = Command::new("bash").args(["-c", &program]).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(complete("telemeter acc", 1), "accounts");
    assert_eq!(complete("telemeter accounts set-token --st", 3), "--store");
    let shells = complete("telemeter completions ''", 2);
    assert!(["bash", "zsh", "fish"].iter().all(|s| shells.split(' ').any(|w| w == *s)), "{shells}");
    for shell in ["zsh", "fish"] {
        let text = telemeter(&["completions", shell]).ok().to_owned();
        for (name, _) in &commands {
            assert!(text.contains(name.rsplit(' ').next().unwrap()), "{shell} completion lacks {name}");
        }
        if has(shell) {
            let path = dir.path().join(format!("telemeter.{shell}"));
            std::fs::write(&path, &text).unwrap();
            let check = Command::new(shell).arg("-n").arg(&path).output().unwrap();
            assert!(check.status.success(), "{shell} -n: {}", String::from_utf8_lossy(&check.stderr));
        }
    }
    assert_ne!(telemeter(&["completions", "tcsh"]).code, 0);
}

/// A man page as a reader sees it: `man -l` when man is installed, else
/// the roff with its hyphen escapes undone.
fn rendered(page: &Path) -> String {
    if has("man") {
        let output = Command::new("man")
            .arg("-l")
            .arg(page)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "200")
            .output()
            .unwrap();
        assert!(output.status.success(), "man -l {}: {}", page.display(), String::from_utf8_lossy(&output.stderr));
        // Bold and underline by overstrike, if any.
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut plain = String::new();
        for c in text.chars() {
            if c == '\u{8}' {
                plain.pop();
            } else {
                plain.push(c);
            }
        }
        plain.replace(['\u{2010}', '\u{2212}'], "-")
    } else {
        std::fs::read_to_string(page).unwrap().replace("\\-", "-")
    }
}

#[test]
fn man_pages_render_and_name_every_flag_example_and_variable() {
    let dir = common::temp_dir();
    let out = dir.path().join("man1");
    let written = telemeter(&["man", "--out", out.to_str().unwrap()]);
    written.ok();
    let top = rendered(&out.join("telemeter.1"));
    for heading in ["NAME", "SYNOPSIS", "DATA FOLDER", "ENVIRONMENT"] {
        assert!(top.contains(heading), "telemeter.1 lacks {heading}:\n{top}");
    }
    assert!(top.contains("--threads"), "{top}");
    for (name, flags) in commands() {
        let nested = name.contains(' ');
        assert!(nested || top.contains(&name), "telemeter.1 lacks {name}");
        let path = out.join(format!("telemeter-{}.1", name.replace(' ', "-")));
        assert!(path.exists(), "{} missing; written:\n{}", path.display(), written.stdout);
        let page = rendered(&path);
        for flag in flags {
            assert!(page.contains(&format!("--{flag}")), "{} lacks --{flag}:\n{page}", path.display());
        }
        if nested {
            continue;
        }
        assert!(page.contains("EXAMPLES"), "{name}: no EXAMPLES:\n{page}");
        // Examples are kept line by line, not run into a paragraph.
        let help = telemeter(&[&name, "--help"]).ok().to_owned();
        let example = help.lines().find(|l| l.trim_start().starts_with("$ ")).unwrap().trim();
        assert!(page.lines().any(|l| l.trim() == example), "telemeter-{name}.1 lacks the line {example}:\n{page}");
    }
    // Printed: the top page.
    let printed = telemeter(&["man"]);
    assert_eq!(printed.ok().as_bytes(), std::fs::read(out.join("telemeter.1")).unwrap());
}

/// Every environment variable the sources read (`env::var("X")`,
/// `env::var_os("X")`, clap's `env = "X"`).
fn variables_read() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![common::root().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for marker in ["env::var(\"", "env::var_os(\"", "env = \""] {
                for (at, _) in text.match_indices(marker) {
                    let rest = &text[at + marker.len()..];
                    let name: String = rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                    if !name.is_empty() && rest[name.len()..].starts_with('"') {
                        names.insert(name);
                    }
                }
            }
        }
    }
    names
}

#[test]
fn every_environment_variable_read_is_in_the_help() {
    let names = variables_read();
    for expected in ["TELEMETER_THREADS", "TELEMETER_TOKEN_KEY", "TELEMETER_STATE_DIR", "SPARK_HOME", "HOME"] {
        assert!(names.contains(expected), "the scan missed {expected}: {names:?}");
    }
    let help = telemeter(&["--help"]).ok().to_owned();
    let section = &help[help.find("ENVIRONMENT:").expect("an ENVIRONMENT section")..];
    for name in &names {
        assert!(section.lines().any(|l| l.trim() == name), "{name} is not in --help's ENVIRONMENT:\n{section}");
    }
    // Each command lists the ones it reads.
    let ingest = telemeter(&["ingest", "--help"]).ok().to_owned();
    assert!(ingest.contains("SPARK_HOME"), "{ingest}");
    for command in ["summary", "report", "serve"] {
        let help = telemeter(&[command, "--help"]).ok().to_owned();
        assert!(help.contains("TELEMETER_TOKEN_KEY") && help.contains("TELEMETER_STATE_DIR"), "{command}: {help}");
    }
}

#[test]
fn help_names_no_file_a_user_does_not_have() {
    let mut texts = vec![telemeter(&["--help"]).ok().to_owned()];
    for (name, _) in commands() {
        let words: Vec<&str> = name.split(' ').collect();
        for flag in ["--help", "-h"] {
            let text = telemeter(&[&words[..], &[flag]].concat()).ok().to_owned();
            assert!(words.len() > 1 || text.contains("EXAMPLES:"), "{name} {flag}: no examples:\n{text}");
            texts.push(text);
        }
    }
    for text in &texts {
        for word in text.split_whitespace() {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric());
            assert!(!word.ends_with(".md") && !word.starts_with("docs/"), "help refers to '{word}':\n{text}");
        }
    }
    let top = &texts[0];
    for folder in ["calls/", "messages/", "transcriptions/", "charges/", "accounts.csv", "billed_seconds"] {
        assert!(top.contains(folder), "the data folder's layout lacks {folder}");
    }
}

/// Runs `line` with `sh` in `dir`, the binary first on PATH, HOME in
/// `dir/home` and the tests' state directory.
fn shell(dir: &Path, line: &str) -> std::process::Output {
    let bin = Path::new(common::binary()).parent().unwrap();
    Command::new("sh")
        .args(["-c", line])
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env("HOME", dir.join("home"))
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env_remove("TELEMETER_THREADS")
        .env_remove("TELEMETER_TOKEN_KEY")
        .env("TELEMETER_STATE_DIR", common::state_dir())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every `$ ` line of every command's `--help`, run as written in a folder
/// holding a copy of sample_data/ (in the order of `help::EXAMPLES`), except
/// those that serve or need Spark (parsed by the unit test in `cli::help`).
#[test]
fn every_example_in_the_help_runs() {
    let dir = common::temp_dir();
    let work = dir.path();
    copy_dir(&common::sample_data(), &work.join("sample_data"));
    std::fs::create_dir_all(work.join("home")).unwrap();
    let mut ran = 0;
    for name in telemeter::cli::help::commands_with_examples() {
        let help = telemeter(&[name, "--help"]).ok().to_owned();
        for line in telemeter::cli::help::command_lines(&help) {
            if telemeter::cli::help::NOT_RUN.iter().any(|skip| line.contains(skip)) {
                continue;
            }
            if line.contains("man -l") && !has("man") {
                continue;
            }
            let output = shell(work, line);
            assert!(
                output.status.success(),
                "{name}: `{line}` failed:\n{}\n{}",
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            );
            ran += 1;
        }
    }
    assert!(ran >= 15, "{ran}");
    // What they made is there.
    for made in [
        "demo",
        "store/manifest.json",
        "reports",
        "ma001.csv",
        "mydata/accounts.csv",
        "home/.local/share/man/man1/telemeter-summary.1",
    ] {
        assert!(work.join(made).exists(), "{made}");
    }
    let accounts = std::fs::read_to_string(work.join("mydata/accounts.csv")).unwrap();
    assert!(accounts.contains(&crate::server::sha_hex("another-token")), "{accounts}");
}

fn set_token(token: &str, args: &[&str]) -> common::Run {
    use std::io::Write;
    let mut child = common::command()
        .args(["accounts", "set-token"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(token.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let run = common::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run
}

fn usage_path(account: &str) -> String {
    format!("/v1/Account/{account}/UsageSummary/?from_date=2026-08-01&to_date=2026-08-20")
}

/// The first account of a generated data folder.
fn first_account(data: &Path) -> String {
    let text = std::fs::read_to_string(data.join("accounts.csv")).unwrap();
    text.lines().nth(1).unwrap().split(',').next().unwrap().to_owned()
}

#[test]
fn a_generated_store_is_served_once_an_account_has_a_token() {
    let dir = common::temp_dir();
    let data = dir.path().join("data");
    let store = dir.path().join("store");
    let (data_s, store_s) = (data.to_str().unwrap(), store.to_str().unwrap());
    common::command()
        .args(["generate", "--out", data_s, "--calls", "300", "--messages", "100", "--transcriptions", "20"])
        .args(["--charges", "10", "--accounts", "3", "--start", "2026-08-01", "--days", "10"])
        .output()
        .map(|o| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)))
        .unwrap();
    common::command()
        .args(["ingest", "--data", data_s, "--store", store_s])
        .output()
        .map(|o| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)))
        .unwrap();
    let account = first_account(&data);

    // No token anywhere: listed as such, and the server refuses everything.
    let listed = telemeter(&["accounts", "list", "--store", store_s]).ok().to_owned();
    let row = listed.lines().find(|l| l.starts_with(&account)).unwrap().to_owned();
    assert!(row.split_whitespace().nth(3) == Some("-"), "{listed}");
    let server = Server::start_with(
        "127.0.0.1:0",
        &["--store".into(), store.clone().into(), "--reload-interval".into(), "0.2".into()],
    );
    assert_eq!(get(&mut server.client(), &usage_path(&account), &basic(&account, "s3cret")).status, 401);
    let hint = |logs: &[String]| logs.iter().any(|l| l.contains("401") && l.contains("telemeter accounts set-token"));
    assert!(hint(&server.logs_when(hint)), "serve does not say how to set a token");

    // Refusals change nothing.
    let manifest = std::fs::read(store.join("manifest.json")).unwrap();
    for (token, args) in [("", vec![account.as_str()]), ("a\nb\n", vec![account.as_str()]), ("x\n", vec!["NOSUCH"])] {
        let run = set_token(token, &[&args[..], &["--store", store_s]].concat());
        assert_eq!(run.code, 1, "{token:?} {args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read(store.join("manifest.json")).unwrap(), manifest);

    // Set: a new generation, whose accounts file is new and the old one untouched.
    let old: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    let old_accounts = std::fs::read(store.join(old["accounts_csv"].as_str().unwrap())).unwrap();
    let run = set_token("s3cret\n", &[&account, "--store", store_s]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let new: serde_json::Value = serde_json::from_slice(&std::fs::read(store.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(new["generation"].as_u64(), old["generation"].as_u64().map(|g| g + 1));
    assert_ne!(new["accounts_csv"], old["accounts_csv"]);
    assert_eq!(new["rollups"], old["rollups"]);
    assert_eq!(
        std::fs::read(store.join(old["accounts_csv"].as_str().unwrap())).unwrap(),
        old_accounts,
        "published file edited"
    );
    let stored = std::fs::read_to_string(store.join(new["accounts_csv"].as_str().unwrap())).unwrap();
    assert!(stored.contains(&crate::server::sha_hex("s3cret")) && !stored.contains("s3cret,"), "{stored}");

    // The running server follows: 200 with the token, 401 without or with another.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ok = loop {
        let status = get(&mut server.client(), &usage_path(&account), &basic(&account, "s3cret")).status;
        if status == 200 || Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ok, 200, "the server did not pick up the token");
    let response = get(&mut server.client(), &usage_path(&account), &basic(&account, "s3cret"));
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    assert!(body["usage"].as_array().is_some_and(|rows| !rows.is_empty()), "{body}");
    assert_eq!(get(&mut server.client(), &usage_path(&account), &basic(&account, "wrong")).status, 401);
    let anonymous = server.client().request("GET", &usage_path(&account), &[]).unwrap();
    assert_eq!(anonymous.status, 401);

    // A fresh server on the store: the same, and list shows the token is set (not the hash).
    drop(server);
    let fresh = Server::start_with("127.0.0.1:0", &["--store".into(), store.clone().into()]);
    assert_eq!(get(&mut fresh.client(), &usage_path(&account), &basic(&account, "s3cret")).status, 200);
    assert_eq!(fresh.client().request("GET", &usage_path(&account), &[]).unwrap().status, 401);
    let listed = telemeter(&["accounts", "list", "--store", store_s]).ok().to_owned();
    assert!(listed.lines().any(|l| l.starts_with(&account) && l.split_whitespace().nth(3) == Some("set")), "{listed}");
    assert!(!listed.contains(&crate::server::sha_hex("s3cret")), "{listed}");
    drop(fresh);

    // An ingest of the data folder publishes its accounts.csv (no tokens) and says whose token it removed.
    let again = telemeter(&["ingest", "--data", data_s, "--store", store_s]);
    again.ok();
    assert!(again.stderr.contains("warning:") && again.stderr.contains(&format!("({account})")), "{}", again.stderr);
    let listed = telemeter(&["accounts", "list", "--store", store_s]).ok().to_owned();
    assert!(listed.lines().any(|l| l.starts_with(&account) && l.split_whitespace().nth(3) == Some("-")), "{listed}");

    // A token the data folder gives (none before) is no change to warn of; one
    // rotated in the store and brought back by the data folder's file is.
    assert_eq!(set_token("leaked\n", &[&account, "--add", "--data", data_s]).code, 0);
    let gained = telemeter(&["ingest", "--data", data_s, "--store", store_s]);
    assert!(!gained.ok().is_empty() && !gained.stderr.contains("warning:"), "{}", gained.stderr);
    assert_eq!(set_token("rotated\n", &[&account, "--store", store_s]).code, 0);
    let back = telemeter(&["ingest", "--data", data_s, "--store", store_s]);
    back.ok();
    assert!(
        back.stderr.contains("another token than the store's") && back.stderr.contains(&format!("({account})")),
        "{}",
        back.stderr
    );
}

#[test]
fn set_token_in_a_data_folder_replaces_accounts_csv_and_serve_data_accepts_it() {
    let dir = common::temp_dir();
    let data = dir.path().join("data");
    copy_dir(&common::sample_data(), &data);
    let data_s = data.to_str().unwrap();
    let before = std::fs::read_to_string(data.join("accounts.csv")).unwrap();
    // MA003GM22SVQQT8ZPDNQ has records but no row: refused, then added with --add.
    assert_eq!(set_token("t-c\n", &["MA003GM22SVQQT8ZPDNQ", "--data", data_s]).code, 1);
    assert_eq!(std::fs::read_to_string(data.join("accounts.csv")).unwrap(), before);
    assert_eq!(set_token("t-c\n", &["MA003GM22SVQQT8ZPDNQ", "--data", data_s, "--add"]).code, 0);
    assert_eq!(set_token("t-a\r\n", &["MA001SHGA32ZDQYG9N8T", "--data", data_s]).code, 0);
    let after = std::fs::read_to_string(data.join("accounts.csv")).unwrap();
    // Only MA001SHGA32ZDQYG9N8T's line changed, and one line was added.
    let (old, new): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    assert_eq!(new.len(), old.len() + 1);
    let hash = common::account_cell(&before, "MA001SHGA32ZDQYG9N8T", "auth_token_sha256");
    for (o, n) in old.iter().zip(&new) {
        if o.starts_with("MA001SHGA32ZDQYG9N8T,") {
            assert_eq!(n.replace(&crate::server::sha_hex("t-a"), "X"), o.replace(hash, "X"));
        } else {
            assert_eq!(o, n);
        }
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let db = dir.path().join("resources.sqlite");
    let server = Server::start(&data, &db, "127.0.0.1:0", &[]);
    let path = "/v1/Account/MA001SHGA32ZDQYG9N8T/UsageSummary/?from_date=2026-11-01&to_date=2026-11-20";
    assert_eq!(get(&mut server.client(), path, &basic("MA001SHGA32ZDQYG9N8T", "t-a")).status, 200);
    assert_eq!(get(&mut server.client(), path, &basic("MA001SHGA32ZDQYG9N8T", "old")).status, 401);
    let path = "/v1/Account/MA003GM22SVQQT8ZPDNQ/UsageSummary/?from_date=2026-11-01&to_date=2026-11-20";
    assert_eq!(get(&mut server.client(), path, &basic("MA003GM22SVQQT8ZPDNQ", "t-c")).status, 200);
}
