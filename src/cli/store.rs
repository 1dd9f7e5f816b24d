//! `telemeter store`: a store's files checked and repaired. `verify`
//! checks `manifest.json` and every file it lists against their sums and
//! names each missing or damaged one (exit 1 when any is); `repair`
//! restores a missing or damaged `manifest.json` from the newest kept
//! manifest whose money files verify (exit 1 when it passed a later one
//! over), rebuilds damaged rollup and index files
//! from the records files, and deletes files no generation lists
//! (`store::verify`, `store::rebuild`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::store::verify::{self, ManifestState};
use crate::store::DELETIONS_DB;

/// Arguments of `store`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `store` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Check manifest.json and every file it lists against their checksums;
    /// name each missing or damaged file (exit 1 when any is).
    Verify {
        /// The store folder.
        #[arg(long, value_name = "STORE")]
        store: PathBuf,
    },
    /// Restore a missing or damaged manifest.json from the newest kept
    /// manifest (manifests/) whose records verify, rebuild damaged rollup and
    /// index files from the records files, and delete files no generation
    /// lists.
    Repair {
        /// The store folder.
        #[arg(long, value_name = "STORE")]
        store: PathBuf,
    },
}

/// Runs `store`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Verify { store } => verify(&store),
        Action::Repair { store } => repair(&store),
    }
}

fn verify(store: &std::path::Path) -> anyhow::Result<ExitCode> {
    let verified = verify::verify(store).with_context(|| format!("cannot verify {}", store.display()))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let shown = store.display();
    match &verified.manifest {
        ManifestState::Good => writeln!(
            out,
            "manifest.json: generation {}, {} files listed, checksum ok",
            verified.generation.unwrap_or(0),
            verified.files
        )?,
        ManifestState::NoSums(format) => writeln!(
            out,
            "manifest.json: store format {format} records no checksums: its {} files were only checked to be there \
             (the next ingest records their checksums)",
            verified.files
        )?,
        ManifestState::Missing => writeln!(out, "manifest.json: missing ({} kept manifests)", verified.kept)?,
        ManifestState::Damaged(why) => {
            writeln!(out, "manifest.json: damaged: {why} ({} kept manifests)", verified.kept)?
        }
        ManifestState::Behind(newest) => writeln!(
            out,
            "manifest.json: {}",
            crate::store::manifest_behind(store, verified.generation.unwrap_or(0), *newest)
        )?,
    }
    for finding in &verified.findings {
        writeln!(out, "{}: {}", finding.name, finding.problem)?;
    }
    for (path, why) in &verified.damaged_kept {
        writeln!(out, "{}: damaged kept manifest: {why}", path.display())?;
    }
    if verified.unlisted > 0 {
        writeln!(
            out,
            "{} file(s) no kept generation lists: left by a failed or killed ingest (or written by one at work); \
             the next ingest or `telemeter store repair` removes them",
            verified.unlisted
        )?;
    }
    let deletions = deletions_refused(store);
    if let Some(why) = &deletions {
        writeln!(out, "{DELETIONS_DB}: {why}")?;
    }
    let whole = verified.is_whole() && deletions.is_none();
    if verified.is_whole() && deletions.is_some() {
        writeln!(out, "every listed file is whole; {DELETIONS_DB} is refused (above)")?;
    } else if whole {
        writeln!(out, "ok: every listed file is whole")?;
    } else if verified.manifest == ManifestState::Missing
        && crate::store::WithoutManifest::of(store) == crate::store::WithoutManifest::FirstIngest
    {
        writeln!(
            out,
            "no generation published yet: the store's first ingest stopped before it published; run it again"
        )?;
    } else if matches!(verified.manifest, ManifestState::Behind(_)) {
        // Repair refuses it too: the manifest goes first.
        writeln!(
            out,
            "not ok: manifest.json is behind the newest kept manifest (above); {} listed file(s) damaged or missing",
            verified.findings.len()
        )?;
    } else {
        writeln!(
            out,
            "{} file(s) damaged or missing; run `telemeter store repair --store {shown}`",
            verified.findings.len()
                + verified.damaged_kept.len()
                + usize::from(!matches!(verified.manifest, ManifestState::Good | ManifestState::NoSums(_)))
        )?;
    }
    out.flush()?;
    Ok(if whole { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Why `serve` and `ingest` would refuse the store's deletions database
/// (which no manifest lists: a server writes it), if they would.
fn deletions_refused(store: &std::path::Path) -> Option<String> {
    crate::resources::check_deletions(&store.join(DELETIONS_DB)).err().map(|e| e.chain())
}

fn repair(store: &std::path::Path) -> anyhow::Result<ExitCode> {
    let repaired = verify::repair(store).with_context(|| format!("cannot repair {}", store.display()))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (path, why) in &repaired.passed_over {
        writeln!(out, "passed over {}: {why}", path.display())?;
    }
    match repaired.restored {
        Some(generation) => writeln!(out, "restored manifest.json from the kept manifest of generation {generation}")?,
        None => writeln!(out, "manifest.json: whole, kept")?,
    }
    if let Some(rebuilt) = &repaired.rebuilt {
        for account in &rebuilt.accounts {
            writeln!(out, "rebuilt the rollups of account {account} from the records files")?;
        }
        for name in &rebuilt.index {
            writeln!(out, "rebuilt {name} from its records file")?;
        }
        writeln!(out, "published generation {} with the rebuilt files", rebuilt.generation)?;
    }
    if let Some(why) = &repaired.not_rebuilt {
        writeln!(out, "not rebuilt: {why}")?;
    }
    match repaired.restored.filter(|_| !repaired.passed_over.is_empty()) {
        Some(generation) => writeln!(
            out,
            "left the files no generation lists: those of a generation after {generation} may be whole \
             (the kept manifests passed over are in manifests/{}/; to recover one, put it back as \
             manifest.json; the next ingest deletes them)",
            verify::PASSED_OVER
        )?,
        None => writeln!(out, "removed {} file(s) no generation lists", repaired.removed)?,
    }
    for finding in &repaired.damaged {
        writeln!(out, "{}: {}", finding.name, finding.problem)?;
    }
    for (path, why) in &repaired.set_aside {
        writeln!(
            out,
            "set aside the damaged kept manifest {} in manifests/{}/: {why}",
            path.display(),
            verify::PASSED_OVER
        )?;
    }
    let deletions = deletions_refused(store);
    if let Some(why) = &deletions {
        writeln!(out, "{DELETIONS_DB}: {why}")?;
    }
    // A store rolled back past a generation is answered from, but is not
    // whole: the exit status says so to the job that ran the repair.
    let whole = repaired.damaged.is_empty() && deletions.is_none() && repaired.passed_over.is_empty();
    if repaired.damaged.is_empty() {
        let ok = if whole { "ok: " } else { "" };
        let back = if repaired.passed_over.is_empty() { "" } else { " (rolled back past the generations passed over)" };
        writeln!(out, "{ok}generation {}{back}, every listed file is whole", repaired.generation)?;
    } else {
        writeln!(
            out,
            "{} listed file(s) are still damaged or missing and are not derived from the records files; \
             restore them from a backup, or ingest the data folder into a new store",
            repaired.damaged.len()
        )?;
    }
    out.flush()?;
    Ok(if whole { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
