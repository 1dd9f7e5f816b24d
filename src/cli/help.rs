//! The text after each command's options in `--help` and in the man pages:
//! the data folder's layout (top level), `EXAMPLES` that run as written
//! from a folder holding a copy of `sample_data/` (a test runs them), and
//! the `ENVIRONMENT` variables each command reads.
//!
//! Sections are plain text: a heading line ends with `:` and is not
//! indented; `completions::man_page` turns each into a man page section.

/// One environment variable: its name, what it does, and the commands that
/// read it (`"*"`: every command).
struct Var {
    name: &'static str,
    text: &'static str,
    commands: &'static [&'static str],
}

/// Every environment variable telemeter reads (a test checks this list
/// against `env::var` and `env = ` in `src/`).
const ENVIRONMENT: &[Var] = &[
    Var { name: "TELEMETER_THREADS", text: "worker threads, as --threads (default: one per core)", commands: &["*"] },
    Var {
        name: "TELEMETER_TOKEN_KEY",
        text: "the secret that page tokens are sealed with; when unset or empty: STORE/token.key \
               with --store, else token.key in the state directory (created on first use: random, \
               readable by its owner only)",
        commands: &["summary", "report", "serve"],
    },
    Var {
        name: "TELEMETER_STATE_DIR",
        text: "the state directory: the page-token key of commands on --data, and the resources \
               database of serve --data (resources-<hash of DIR>.sqlite)",
        commands: &["summary", "report", "serve"],
    },
    Var {
        name: "XDG_STATE_HOME",
        text: "without TELEMETER_STATE_DIR, the state directory is $XDG_STATE_HOME/telemeter",
        commands: &["summary", "report", "serve"],
    },
    Var {
        name: "HOME",
        text: "without TELEMETER_STATE_DIR and XDG_STATE_HOME, the state directory is \
               $HOME/.local/state/telemeter; without XDG_CACHE_HOME, ingest --engine spark's cache is \
               $HOME/.cache/telemeter",
        commands: &["summary", "report", "serve", "ingest"],
    },
    Var {
        name: "COLUMNS",
        text: "the terminal's width that `summary --format table` fits its table to (default: the \
               terminal's own, when stdout is one)",
        commands: &["summary"],
    },
    Var {
        name: "TELEMETER_PROGRESS_EVERY",
        text: "seconds between two progress lines when stderr is not a terminal (default 2)",
        commands: &["ingest", "generate", "report"],
    },
    Var {
        name: "SPARK_HOME",
        text: "the Apache Spark installation that ingest --engine spark runs (bin/spark-submit)",
        commands: &["ingest"],
    },
    Var {
        name: "XDG_CACHE_HOME",
        text: "ingest --engine spark keeps the Spark driver's class archive (saved by the first job, \
               mapped by the next) in $XDG_CACHE_HOME/telemeter/spark",
        commands: &["ingest"],
    },
    Var {
        name: "JAVA_HOME",
        text: "the Java that Spark runs ($JAVA_HOME/bin/java, else java on PATH): with Spark's jars, \
               it names the class archive",
        commands: &["ingest"],
    },
    Var { name: "PATH", text: "where java is found without JAVA_HOME", commands: &["ingest"] },
    Var {
        name: "SPARK_CONF_DIR",
        text: "Spark's configuration folder (default SPARK_HOME/conf); when it, HADOOP_CONF_DIR or \
               YARN_CONF_DIR holds files, the Spark driver gets no class archive",
        commands: &["ingest"],
    },
    Var { name: "HADOOP_CONF_DIR", text: "see SPARK_CONF_DIR", commands: &["ingest"] },
    Var { name: "YARN_CONF_DIR", text: "see SPARK_CONF_DIR", commands: &["ingest"] },
];

/// The data folder, as the top-level help shows it (no file the user may
/// not have is referred to: this is the layout).
const DATA_FOLDER: &str = "\
DATA FOLDER (--data DIR):
  accounts.csv        one row per account. Columns: auth_id; currency (3 letters,
                      default USD); optional timezone (IANA name: the account's
                      days and months in every answer, when a request names none),
                      auth_token_sha256 (hex SHA-256 of the account's API token:
                      see `telemeter accounts set-token`) and allowed_ips (IPs or
                      CIDR blocks, space-separated; empty: any address)
  calls/              call records
  messages/           message records
  transcriptions/     transcription records
  charges/            other charges
  voids/              withdrawals: kind record_id revision (at least 1) reason
  endpoints.csv, registrations.csv, recordings/
                      the server's other resources (optional)
  Record folders hold any number of .csv, .csv.gz, .csv.zst or .parquet files, in
  sub-folders too. CSV: UTF-8, a header row, columns in any order, extra columns
  ignored. The columns of each kind:
    calls           record_id auth_id subaccount_auth timestamp product (voice,
                    zentrunk) type direction country billed_seconds amount
                    surcharge hangup_cause
    messages        record_id auth_id subaccount_auth timestamp type direction
                    country segments amount surcharge error_code
    transcriptions  record_id auth_id subaccount_auth timestamp type
                    duration_seconds amount
    charges         record_id auth_id timestamp description units amount
  Each kind may add a revision column (0 when missing): of a record_id's
  versions and voids, the highest revision counts, and a void there withdraws
  the record. Timestamps are RFC 3339 (2026-11-20T13:45:01Z; no offset means
  UTC); amounts are decimals with at most 9 digits after the point; direction
  is inbound or outbound; country two upper-case letters or empty;
  subaccount_auth empty means the parent account. Rows with one record_id (and
  revision) and the same content count once.
";

/// The examples of each command: (command, text). Every line starting with
/// `$ ` runs as written (`sh`) in a folder holding a copy of `sample_data/`,
/// in this order; the commands that serve or need Spark are only parsed.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "generate",
        "  A small synthetic data set in demo/ (same seed and flags, same bytes):
    $ telemeter generate --out demo --calls 2000 --messages 1000 --transcriptions 200 --charges 50 --accounts 5
  Parquet files over two months, another seed, replacing demo/'s data:
    $ telemeter generate --out demo --force --format parquet --calls 2000 --messages 500 --transcriptions 0 --charges 0 --start 2026-10-01 --days 61 --seed 7
",
    ),
    (
        "ingest",
        "  Check and deduplicate sample_data/ into the store store/ (created):
    $ telemeter ingest --data sample_data --store store
  demo/ into its own store, setting bad rows aside (in demo-store/rejected/)
  instead of stopping at the first:
    $ telemeter ingest --data demo --store demo-store --on-bad-row set-aside
  The same work as an Apache Spark job (needs SPARK_HOME):
    $ telemeter ingest --data sample_data --store store --engine spark --spark-master 'local[2]'
",
    ),
    (
        "summary",
        "  Account MA001SHGA32ZDQYG9N8T by day over 1-20 November (to_date is excluded), indented (--now fixes the clock):
    $ telemeter summary --data sample_data --auth-id MA001SHGA32ZDQYG9N8T --query 'granularity=day&from_date=2026-11-01&to_date=2026-11-21' --now 2026-11-21T12:00:00Z --pretty
  The same request with flags, voice calls only, by month:
    $ telemeter summary --data sample_data --auth-id MA001SHGA32ZDQYG9N8T --granularity month --from-date 2026-10-01 --to-date 2026-11-21 --product voice --now 2026-11-21T12:00:00Z
  Every page of 5 rows, one JSON document a line:
    $ telemeter summary --data sample_data --auth-id MA001SHGA32ZDQYG9N8T --page-size 5 --all-pages --now 2026-11-21T12:00:00Z
  An aligned table with totals, for a terminal; the rows as CSV, into a file:
    $ telemeter summary --data sample_data --auth-id MA002PCHQ444XLFXQN5B --from-date 2026-11-01 --to-date 2026-11-21 --format table --now 2026-11-21T12:00:00Z
    $ telemeter summary --data sample_data --auth-id MA001SHGA32ZDQYG9N8T --from-date 2026-11-01 --to-date 2026-11-21 --format csv -o ma001.csv --now 2026-11-21T12:00:00Z
  From a store (see ingest's examples), in Berlin's days:
    $ telemeter summary --store store --auth-id MA002PCHQ444XLFXQN5B --from-date 2026-11-01 --to-date 2026-11-21 --timezone Europe/Berlin --now 2026-11-21T12:00:00Z
",
    ),
    (
        "report",
        "  Every account's report of 1-20 November into reports/ (JSON pages, CSV, HTML):
    $ telemeter report --data sample_data --out reports --query 'granularity=day&from_date=2026-11-01&to_date=2026-11-21' --now 2026-11-21T12:00:00Z
  Two accounts from a store, CSV and HTML only:
    $ telemeter report --store store --out reports --accounts MA001SHGA32ZDQYG9N8T,MA002PCHQ444XLFXQN5B --formats csv,html --now 2026-11-21T12:00:00Z
  A large run: each account's pages as one pages.jsonl (one page a line):
    $ telemeter report --store store --out reports --pages jsonl --now 2026-11-21T12:00:00Z
",
    ),
    (
        "accounts",
        "  The accounts of a data folder or a store, and whether each has a token:
    $ telemeter accounts list --data sample_data
  Give MA001SHGA32ZDQYG9N8T an API token in a store (the token is read from stdin; only its
  SHA-256 is kept; a running `serve --store` picks it up):
    $ printf '%s\\n' 'my-secret-token' | telemeter accounts set-token MA001SHGA32ZDQYG9N8T --store store
  In a data folder (its accounts.csv is replaced atomically):
    $ cp -R sample_data mydata
    $ printf '%s\\n' 'another-token' | telemeter accounts set-token MA002PCHQ444XLFXQN5B --data mydata
",
    ),
    (
        "store",
        "  Check every file of store/ against the checksums in its manifest:
    $ telemeter store verify --store store
  Restore a lost or damaged manifest.json from the kept manifests, and
  delete files no generation lists:
    $ telemeter store repair --store store
",
    ),
    (
        "history",
        "  What store/ holds of call c030: where it came from, and its columns:
    $ telemeter history --store store --kind calls --record-id c030
  The same as JSON, one object a stored version:
    $ telemeter history --store store --kind calls --record-id c030 --format jsonl
",
    ),
    (
        "changes",
        "  Everything store/ holds, by account, month and product (every ingest after generation 0):
    $ telemeter changes --store store --since 0
  What moved since the report in reports/ was built, for one account, as CSV:
    $ telemeter changes --store store --since-report reports/manifest.json --account MA001SHGA32ZDQYG9N8T --format csv
",
    ),
    (
        "serve",
        "  Serve a store on port 8080, following each new ingest:
    $ telemeter serve --store store --listen 127.0.0.1:8080
  Then, with the token given by `telemeter accounts set-token`:
    $ curl -u MA001SHGA32ZDQYG9N8T:my-secret-token 'http://127.0.0.1:8080/v1/Account/MA001SHGA32ZDQYG9N8T/UsageSummary/?from_date=2026-11-01&to_date=2026-11-21'
  Serve a data folder (records re-read on every request, tokens read at start; for small data sets):
    $ telemeter serve --data mydata --listen 127.0.0.1:8080
",
    ),
    (
        "completions",
        "  bash (loaded by bash-completion on first use):
    $ mkdir -p ~/.local/share/bash-completion/completions && telemeter completions bash > ~/.local/share/bash-completion/completions/telemeter
  zsh (then add `fpath=(~/.zfunc $fpath)` before `compinit` in ~/.zshrc):
    $ mkdir -p ~/.zfunc && telemeter completions zsh > ~/.zfunc/_telemeter
  fish:
    $ mkdir -p ~/.config/fish/completions && telemeter completions fish > ~/.config/fish/completions/telemeter.fish
",
    ),
    (
        "man",
        "  Read the main page now:
    $ telemeter man > telemeter.1 && man -l telemeter.1
  Install every page (then `man telemeter-summary`; ~/.local/share/man is on
  man's default path):
    $ telemeter man --out ~/.local/share/man/man1
",
    ),
];

/// The commands whose examples are only parsed, never run by the test:
/// they serve until stopped, talk to a server, or need Spark.
pub const NOT_RUN: &[&str] = &["telemeter serve", "curl ", "--engine spark"];

/// The top-level help's text after the commands.
pub fn top() -> String {
    let mut text = String::from(DATA_FOLDER);
    text.push('\n');
    text.push_str(&environment("*"));
    text.push_str("\nEach command's --help has examples that run over sample_data/ of the source tree.\n");
    text
}

/// The help text after `command`'s options: its examples and the
/// environment variables it reads.
pub fn after(command: &str) -> String {
    let mut text = String::from("EXAMPLES:\n");
    text.push_str(examples(command));
    let environment = environment(command);
    if !environment.is_empty() {
        text.push('\n');
        text.push_str(&environment);
    }
    text
}

/// The examples of `command` (empty when it has none).
pub fn examples(command: &str) -> &'static str {
    EXAMPLES.iter().find(|(name, _)| *name == command).map_or("", |(_, text)| text)
}

/// Every command with examples, in the order their examples run.
pub fn commands_with_examples() -> impl Iterator<Item = &'static str> {
    EXAMPLES.iter().map(|(name, _)| *name)
}

/// The `ENVIRONMENT:` section of `command` (`"*"`: every variable); empty
/// when it reads none.
fn environment(command: &str) -> String {
    let vars: Vec<&Var> = ENVIRONMENT
        .iter()
        .filter(|var| command == "*" || var.commands.iter().any(|c| *c == "*" || *c == command))
        .collect();
    if vars.is_empty() {
        return String::new();
    }
    let mut text = String::from("ENVIRONMENT:\n");
    for var in vars {
        text.push_str(&format!("  {}\n", var.name));
        for line in wrap(var.text, 76) {
            text.push_str(&format!("      {line}\n"));
        }
    }
    text
}

/// `text` in lines of at most `width` characters, cut at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The `$ ` lines of `text`, without the prompt.
pub fn command_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| line.trim_start().strip_prefix("$ "))
}

/// Splits a shell command line into words: spaces separate, single quotes
/// keep text as it is; `|`, `>`, `&&` and what follows them are not part of
/// the first command. Enough for the examples above (a test parses each).
pub fn telemeter_words(line: &str) -> Option<Vec<String>> {
    let mut words: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let current = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    current.push(q);
                }
            }
            ' ' => words.extend(word.take()),
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    // The telemeter command of a pipeline or a list.
    let segments = words.split(|w| w == "|" || w == "&&" || w == ">");
    segments.filter(|segment| segment.first().is_some_and(|w| w == "telemeter")).map(<[String]>::to_vec).next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::{CommandFactory, Parser};

    /// Every visible subcommand has examples, and every example line that
    /// runs telemeter parses with the CLI definition.
    #[test]
    fn every_example_parses() {
        let cli = Cli::command();
        for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = sub.get_name();
            let lines: Vec<&str> = command_lines(examples(name)).collect();
            assert!(lines.iter().any(|l| l.contains(&format!("telemeter {name}"))), "{name}: no example of it");
        }
        let mut parsed = 0;
        for name in commands_with_examples() {
            for line in command_lines(examples(name)) {
                let Some(words) = telemeter_words(line) else { continue };
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("{line}: {e}");
                }
                parsed += 1;
            }
        }
        assert!(parsed >= 20, "{parsed}");
    }

    #[test]
    fn words_are_split_like_a_shell() {
        assert_eq!(
            telemeter_words("printf '%s\\n' 'a b' | telemeter x --q 'k=v&w=z' > f"),
            Some(vec!["telemeter".into(), "x".into(), "--q".into(), "k=v&w=z".into()])
        );
        assert_eq!(telemeter_words("cp -R a b"), None);
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
    }
}
