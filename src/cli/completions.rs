//! `telemeter completions SHELL` and `telemeter man`: shell completion
//! scripts (clap_complete) and man pages (clap_mangen), both generated
//! from the CLI definition, so they name exactly the flags the binary takes.
//!
//! Man pages: one per command, `telemeter.1` (global flags, the command
//! list, the data folder layout, the environment) and `telemeter-NAME.1`
//! for each command (its flags, `EXAMPLES`, `ENVIRONMENT`), the layout of
//! git's pages. `telemeter man` prints `telemeter.1`; `--out DIR` writes
//! them all.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

/// Arguments of `completions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to write a completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write every page (telemeter.1 and telemeter-COMMAND.1) into this
    /// folder (created) instead of printing telemeter.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `completions`: the script on stdout.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = visible();
    // Generated into memory first: clap_complete panics on a failed write
    // (a closed pipe, `| head`), a plain write returns the error.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "telemeter", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The CLI definition without its hidden commands (clap_complete's bash
/// script would offer them).
fn visible() -> clap::Command {
    let full = super::Cli::command();
    clap::Command::new("telemeter")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}

/// Runs `man`.
pub fn run_man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let pages = man_pages()?;
    match &args.out {
        None => {
            let top = pages.first().map(|(_, text)| text.as_slice()).unwrap_or_default();
            let mut out = std::io::stdout().lock();
            out.write_all(top)?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, text) in &pages {
                let path = dir.join(name);
                std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
                println!("{}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every man page, (file name, roff), `telemeter.1` first, then one per
/// visible command.
pub fn man_pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut top = super::Cli::command().disable_help_subcommand(true);
    top.build();
    let mut pages = vec![("telemeter.1".to_owned(), man_page(&top)?)];
    add_pages(&top, &mut pages)?;
    Ok(pages)
}

/// The pages of the visible commands under `parent`, depth first
/// (`telemeter-accounts.1`, `telemeter-accounts-set-token.1`, ...).
fn add_pages(parent: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    for command in parent.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        let name = command.get_display_name().unwrap_or_else(|| command.get_name()).to_owned();
        pages.push((format!("{name}.1"), man_page(command)?));
        add_pages(command, pages)?;
    }
    Ok(())
}

/// One man page: clap_mangen's sections (name, synopsis, description,
/// options, commands, version), with the text after the options in `--help`
/// as sections of their own (clap_mangen would run it into one paragraph,
/// which examples do not survive).
fn man_page(command: &clap::Command) -> anyhow::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(command.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if command.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if command.has_subcommands() {
        man.render_subcommands_section(&mut out)?;
    }
    if let Some(after) = command.get_after_long_help().or_else(|| command.get_after_help()) {
        out.extend_from_slice(roff_sections(&after.to_string()).as_bytes());
    }
    if command.get_version().is_some() {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// Help text with `HEADING:` lines as man page sections, each body kept as
/// its lines are (no filling).
fn roff_sections(text: &str) -> String {
    let mut roff = String::new();
    let mut open = false;
    for line in text.lines() {
        let heading = !line.starts_with(' ') && line.ends_with(':');
        if heading {
            if open {
                roff.push_str(".fi\n");
            }
            let title = line.trim_end_matches(':');
            roff.push_str(&format!(".SH \"{}\"\n.nf\n", title.replace('"', "")));
            open = true;
        } else {
            if !open {
                roff.push_str(".SH NOTES\n.nf\n");
                open = true;
            }
            roff.push_str(&roff_line(line));
            roff.push('\n');
        }
    }
    if open {
        roff.push_str(".fi\n");
    }
    roff
}

/// One line of text as roff: backslashes and hyphens escaped, a leading
/// `.` or `'` (a request) neutralized.
fn roff_line(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_sections_become_man_sections_kept_line_by_line() {
        let roff = roff_sections("EXAMPLES:\n  a\n    $ x --y 'a\\n'\nENVIRONMENT:\n  .V\n");
        let expected =
            ".SH \"EXAMPLES\"\n.nf\n  a\n    $ x \\-\\-y 'a\\en'\n.fi\n.SH \"ENVIRONMENT\"\n.nf\n  .V\n.fi\n";
        assert_eq!(roff, expected);
        assert_eq!(roff_line(".x"), "\\&.x");
    }

    #[test]
    fn there_is_a_page_per_visible_command() {
        let pages = man_pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names[0], "telemeter.1");
        assert!(names.contains(&"telemeter-summary.1"), "{names:?}");
        assert!(!names.iter().any(|n| n.contains("spark-task") || n.contains("loadtest")), "{names:?}");
    }
}
