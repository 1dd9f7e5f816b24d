//! The driver JVM's class archive: Spark's classes as the JVM laid them
//! out in memory, saved by one job's driver and mapped by every later
//! one's (the JDK's dynamic class-data sharing). It takes about 1 s off
//! each job's start on local[2] (`bench/spark.sh`'s 1 % day: 6.2 s ->
//! 5.2 s); the job that saves it takes about 7 s longer, once per host and
//! Spark install.
//!
//! 1. [`ClassArchive::find`]: the archive of this Spark and this Java, in
//!    `$XDG_CACHE_HOME/telemeter/spark/` (or `~/.cache/telemeter/spark/`),
//!    named by a hash of what the JVM will check it against (spark-submit,
//!    its jars' names, sizes and times, and the Java it runs).
//! 2. It is used (`-XX:SharedArchiveFile`) only when its sum, beside it
//!    (`.sum`), matches: the JVM maps the file and dies of SIGBUS on a cut
//!    one. An archive that does not match is removed.
//! 3. Without one, the driver saves it when it exits
//!    (`-XX:ArchiveClassesAtExit`) to a name of this process's;
//!    [`ClassArchive::settle`] moves it into place and writes its sum
//!    once spark-submit exited cleanly, and removes it otherwise.
//!
//! Nothing here can fail an ingest: without a cache folder, or on any
//! error, the job runs without an archive. A user's own
//! `spark.driver.extraJavaOptions` replaces telemeter's, archive included.

use std::path::{Path, PathBuf};

use crate::checksum::FileSum;

/// The archive of one Spark install and Java, for one job.
#[derive(Debug)]
pub(super) struct ClassArchive {
    /// Where it is kept.
    path: PathBuf,
    /// Where this job's driver saves it, when there is none yet.
    saving: Option<PathBuf>,
}

impl ClassArchive {
    /// The archive for jobs of `spark_submit`, under the user's cache
    /// folder (`None` without one).
    pub(super) fn find(spark_submit: &Path) -> Option<ClassArchive> {
        let cache = match std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
            Some(dir) if dir.is_absolute() => dir,
            _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
        };
        Self::in_folder(&cache.join("telemeter").join("spark"), spark_submit)
    }

    /// [`ClassArchive::find`] in `folder`.
    fn in_folder(folder: &Path, spark_submit: &Path) -> Option<ClassArchive> {
        std::fs::create_dir_all(folder).ok()?;
        let path = folder.join(format!("driver-{:016x}.jsa", install_key(spark_submit)));
        if sound(&path) {
            return Some(ClassArchive { path, saving: None });
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(sum_path(&path));
        remove_abandoned(folder);
        let saving = path.with_extension(format!("jsa.{}.tmp", std::process::id()));
        Some(ClassArchive { path, saving: Some(saving) })
    }

    /// The driver's JVM option: map the archive, or save it at exit.
    pub(super) fn java_option(&self) -> String {
        match &self.saving {
            None => format!("-XX:SharedArchiveFile={}", self.path.display()),
            Some(saving) => format!("-XX:ArchiveClassesAtExit={}", saving.display()),
        }
    }

    /// Once spark-submit exited (`clean`: with status 0), keeps the
    /// archive its driver saved, with its sum; otherwise drops it.
    pub(super) fn settle(&mut self, clean: bool) {
        let Some(saving) = self.saving.take() else { return };
        if clean && saving.exists() {
            if let Ok(sum) = FileSum::of_file(&saving) {
                let sum_temporary = saving.with_extension("sum.tmp");
                let written = serde_json::to_vec(&sum).ok().is_some_and(|bytes| {
                    std::fs::write(&sum_temporary, bytes).is_ok()
                        && std::fs::rename(&saving, &self.path).is_ok()
                        && std::fs::rename(&sum_temporary, sum_path(&self.path)).is_ok()
                });
                if written {
                    return;
                }
                let _ = std::fs::remove_file(&sum_temporary);
            }
        }
        let _ = std::fs::remove_file(&saving);
    }
}

impl Drop for ClassArchive {
    /// A job dropped unsettled was stopped: what its driver saved is cut.
    fn drop(&mut self) {
        self.settle(false);
    }
}

/// An archive being saved is written at the driver's exit and settled
/// within seconds; one older than this was left by a killed ingest.
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes the archives in `folder` that killed ingests left half-saved.
fn remove_abandoned(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let saving = path.extension().is_some_and(|e| e == "tmp");
        let age = entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
        if saving && age.is_some_and(|age| age > ABANDONED) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Where the sum of the archive at `path` is.
fn sum_path(path: &Path) -> PathBuf {
    path.with_extension("jsa.sum")
}

/// Whether the archive at `path` is there and matches its sum.
fn sound(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(sum_path(path)) else { return false };
    let Ok(expected) = serde_json::from_slice::<FileSum>(&bytes) else { return false };
    FileSum::of_file(path).is_ok_and(|found| found == expected)
}

/// A hash of what a driver's archive depends on: spark-submit, the jars
/// beside it (names, sizes, modification times), and the Java that
/// `spark-class` runs (`$JAVA_HOME/bin/java`, or `java` on the path).
fn install_key(spark_submit: &Path) -> u64 {
    let mut key = Vec::new();
    let mut add = |path: &Path| {
        key.extend_from_slice(path.as_os_str().as_encoded_bytes());
        if let Ok(meta) = std::fs::metadata(path) {
            key.extend_from_slice(&meta.len().to_le_bytes());
            let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            key.extend_from_slice(&modified.unwrap_or_default().as_nanos().to_le_bytes());
        }
        key.push(0);
    };
    let submit = std::fs::canonicalize(spark_submit).unwrap_or_else(|_| spark_submit.to_owned());
    add(&submit);
    if let Some(home) = submit.parent().and_then(Path::parent) {
        let mut jars: Vec<PathBuf> = std::fs::read_dir(home.join("jars"))
            .map(|dir| dir.filter_map(|entry| entry.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        jars.sort();
        jars.iter().for_each(|jar| add(jar));
    }
    let java = match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Some(PathBuf::from(home).join("bin").join("java")),
        _ => std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("java")).find(|java| java.is_file())),
    };
    if let Some(java) = java {
        add(&std::fs::canonicalize(&java).unwrap_or(java));
    }
    xxhash_rust::xxh3::xxh3_64(&key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No archive: the driver saves one, kept with its sum after a clean
    /// exit and then used; a cut archive is removed and saved again; a
    /// failed job's is dropped, and so is one a killed ingest left.
    #[test]
    fn an_archive_is_used_only_whole_and_saved_only_by_a_clean_exit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("cache");
        let submit = dir.path().join("spark-submit");
        std::fs::write(&submit, "#!/bin/sh\n").expect("spark-submit");

        // Left by killed ingests: an old one is removed, a fresh one kept.
        std::fs::create_dir_all(&folder).expect("cache");
        let (old, fresh) = (folder.join("driver-0.jsa.1.tmp"), folder.join("driver-0.jsa.2.tmp"));
        for path in [&old, &fresh] {
            std::fs::write(path, b"half").expect("left");
        }
        let long_ago = std::time::SystemTime::now() - 2 * ABANDONED;
        std::fs::File::options().write(true).open(&old).and_then(|f| f.set_modified(long_ago)).expect("aged");

        let mut first = ClassArchive::in_folder(&folder, &submit).expect("archive");
        assert!(!old.exists() && fresh.exists());
        let saving = first.saving.clone().expect("saved by this job");
        assert!(first.java_option().starts_with("-XX:ArchiveClassesAtExit="), "{}", first.java_option());
        std::fs::write(&saving, vec![7u8; 10_000]).expect("the JVM's archive");
        first.settle(true);
        assert!(!saving.exists());

        let second = ClassArchive::in_folder(&folder, &submit).expect("archive");
        assert_eq!(second.java_option(), format!("-XX:SharedArchiveFile={}", first.path.display()));
        drop(second);
        assert!(first.path.exists(), "a job that uses the archive leaves it");

        // Cut: removed, and this job saves it again.
        std::fs::write(&first.path, vec![7u8; 4_096]).expect("cut");
        let mut third = ClassArchive::in_folder(&folder, &submit).expect("archive");
        assert!(!first.path.exists() && !sum_path(&first.path).exists());
        let saving = third.saving.clone().expect("saved again");
        std::fs::write(&saving, b"partial").expect("the JVM's archive");
        third.settle(false);
        assert!(!saving.exists() && !first.path.exists(), "a failed job's archive is dropped");

        // Another Spark install (other jars) has its own archive.
        std::fs::create_dir_all(dir.path().join("jars")).expect("jars");
        std::fs::write(dir.path().join("jars").join("spark-core.jar"), b"jar").expect("jar");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::fs::write(bin.join("spark-submit"), "#!/bin/sh\n").expect("spark-submit");
        let other = ClassArchive::in_folder(&folder, &bin.join("spark-submit")).expect("archive");
        assert_ne!(other.path, first.path);
    }
}
