//! The docs and the code speak to users and the next engineer, not about
//! how they were made: no development history (issue numbers, rounds of
//! work, sessions) in README.md, ARCHITECTURE.md, docs/, src/ or bench/,
//! the README short, no doc file past 40 KB, and every link between the
//! repository's own files resolving.

use std::path::{Path, PathBuf};

/// The README's budget: what telemeter is, install, run, test, a tour,
/// and links.
const README_MAX_BYTES: u64 = 15 * 1024;

/// Any other doc file's budget.
const DOC_MAX_BYTES: u64 = 40 * 1024;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Text files under `dir` (recursively) with one of `extensions`.
fn files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.expect("directory entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, extensions, out);
        } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)) {
            out.push(path);
        }
    }
}

/// Every file the history rule covers.
fn product_files() -> Vec<PathBuf> {
    let root = root();
    let mut all = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    files(&root.join("docs"), &["md"], &mut all);
    files(&root.join("src"), &["rs", "md", "css"], &mut all);
    files(&root.join("bench"), &["sh", "py"], &mut all);
    all
}

/// The words after `at` in `lower`, as the next token (letters and
/// digits, after optional spaces and a `#`).
fn next_token(lower: &str, at: usize) -> &str {
    let rest = lower[at..].trim_start_matches([' ', '#']);
    let end = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
    &rest[..end]
}

/// Why `line` speaks of the development history, if it does.
fn history(line: &str) -> Option<&'static str> {
    let lower = line.to_ascii_lowercase();
    let words_at = |word: &str| -> Vec<usize> {
        lower
            .match_indices(word)
            .filter_map(|(i, _)| {
                let before = lower[..i].chars().next_back();
                let starts = before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
                starts.then_some(i + word.len())
            })
            .collect()
    };
    for (word, why) in [("issue", "an issue number"), ("issues", "an issue number"), ("round", "a numbered round")] {
        for end in words_at(word) {
            let token = next_token(&lower, end);
            let spaced =
                lower[end..].starts_with(' ') || lower[end..].starts_with(" #") || lower[end..].starts_with('#');
            if spaced && token.starts_with(|c: char| c.is_ascii_digit()) {
                return Some(why);
            }
        }
    }
    for word in ["session", "sessions"] {
        for end in words_at(word) {
            let after = &lower[end..];
            let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            let code = after.starts_with('.') && after[1..].starts_with(|c: char| c.is_ascii_alphanumeric());
            let spark = lower[..end - word.len()].trim_end().ends_with("spark");
            if whole && !code && !spark {
                return Some("a work session");
            }
        }
    }
    None
}

#[test]
fn no_development_history_in_the_docs_or_the_code() {
    let mut found = Vec::new();
    for path in product_files() {
        let text = std::fs::read_to_string(&path).expect("readable text");
        for (n, line) in text.lines().enumerate() {
            if let Some(why) = history(line) {
                let shown = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
                found.push(format!("{shown}:{}: {why}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "development history belongs in git:\n{}", found.join("\n"));
}

#[test]
fn the_history_check_finds_what_it_looks_for() {
    for line in [
        "see Issue 13's targets",
        "(issue #48)",
        "Round 20 measured",
        "the tenth session did it",
        "a session.",
        "earlier sessions",
    ] {
        assert!(history(line).is_some(), "{line}");
    }
    for line in [
        "rounded half up",
        "3 rounds, alternating",
        "ROUNDS=3 bench/run.sh",
        "the issues of a release",
        "spark.sql.session.timeZone",
        "a SparkSession",
        "issue a token",
    ] {
        assert!(history(line).is_none(), "{line}");
    }
}

#[test]
fn the_readme_is_short_and_no_doc_is_long() {
    let root = root();
    let size = |path: &Path| std::fs::metadata(path).expect("doc file").len();
    let readme = size(&root.join("README.md"));
    assert!(readme <= README_MAX_BYTES, "README.md is {readme} bytes, at most {README_MAX_BYTES}");
    let mut docs = vec![root.join("ARCHITECTURE.md")];
    files(&root.join("docs"), &["md"], &mut docs);
    for doc in docs {
        let bytes = size(&doc);
        assert!(bytes <= DOC_MAX_BYTES, "{} is {bytes} bytes, at most {DOC_MAX_BYTES}", doc.display());
    }
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn links_between_the_repository_files_resolve() {
    let root = root();
    let mut docs = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["docs", "sample_data", "sample_corrections", "tools", "bench"] {
        files(&root.join(dir), &["md"], &mut docs);
    }
    let mut broken = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).expect("readable doc");
        for target in link_targets(&text) {
            let path = target.split('#').next().unwrap_or_default();
            // The web and anchors in the same page are not files of the
            // repository.
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            let dir = doc.parent().expect("a doc has a folder");
            if !dir.join(path).exists() {
                broken.push(format!("{}: {target}", doc.strip_prefix(&root).unwrap_or(&doc).display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to missing files:\n{}", broken.join("\n"));
}
