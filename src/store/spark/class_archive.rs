//! The driver JVM's class archive: Spark's classes as the JVM laid them
//! out in memory, saved by one job's driver and mapped by every later
//! one's (the JDK's dynamic class-data sharing), which shortens each job's
//! start; the job that saves it takes longer, once per host and Spark
//! install (docs/scale.md has both).
//!
//! 1. [`ClassArchive::find`]: the archive of this Spark and this Java, in
//!    `$XDG_CACHE_HOME/telemeter/spark/` (or `~/.cache/telemeter/spark/`),
//!    named by a hash of what the JVM checks it against: spark-submit, its
//!    jars, its configuration folders and the Java it runs.
//! 2. It is used (`-XX:SharedArchiveFile`) only when its sum, beside it
//!    (`.sum`), matches: the JVM maps the file and dies of SIGBUS on a cut
//!    one. An archive that does not match is removed.
//! 3. Without one, the driver saves it when it exits
//!    (`-XX:ArchiveClassesAtExit`) to a name of this process's;
//!    [`ClassArchive::settle`] moves it into place and writes its sum
//!    once spark-submit exited cleanly, and removes it otherwise. A job
//!    that finished without saving it (the JVM refuses, say, a class path
//!    folder that is not empty) marks the install (`.unsaved`), and jobs
//!    run without an archive for [`RETRY`].
//!
//! Nothing here can fail an ingest: without a cache folder, with one
//! whose path a JVM option cannot hold, with a configuration folder the
//! JVM cannot archive, or on any error, the job runs without an archive,
//! and the JVM's own archive messages are off. A user's own
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
        let install = Install::of(spark_submit);
        if !install.archivable() {
            return None;
        }
        Self::in_folder(&cache.join("telemeter").join("spark"), &install)
    }

    /// [`ClassArchive::find`] in `folder`.
    fn in_folder(folder: &Path, install: &Install) -> Option<ClassArchive> {
        let text = folder.to_str()?;
        if text.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            return None;
        }
        std::fs::create_dir_all(folder).ok()?;
        // Half-saved by killed ingests.
        remove_older(folder, ABANDONED, |name| name.ends_with(".tmp"));
        let path = folder.join(format!("driver-{:016x}.jsa", install.key()));
        if sound(&path) {
            return Some(ClassArchive { path, saving: None });
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(sum_path(&path));
        if age(&unsaved_path(&path)).is_some_and(|age| age < RETRY) {
            return None;
        }
        let saving = path.with_extension(format!("jsa.{}.tmp", std::process::id()));
        Some(ClassArchive { path, saving: Some(saving) })
    }

    /// The driver's JVM options: map the archive, or save it at exit; the
    /// JVM's archive messages off.
    pub(super) fn java_option(&self) -> String {
        let quiet = "-Xlog:cds=off,cds+dynamic=off";
        match &self.saving {
            None => format!("-XX:SharedArchiveFile={} {quiet}", self.path.display()),
            Some(saving) => format!("-XX:ArchiveClassesAtExit={} {quiet}", saving.display()),
        }
    }

    /// Once spark-submit exited (`clean`: with status 0; `finished`: the
    /// job wrote its result), keeps the archive its driver saved, with its
    /// sum; otherwise drops it, and a finished job that saved none marks
    /// the install.
    pub(super) fn settle(&mut self, clean: bool, finished: bool) {
        let Some(saving) = self.saving.take() else { return };
        if finished && !(clean && saving.exists()) {
            let _ = std::fs::write(unsaved_path(&self.path), b"");
        }
        if clean && saving.exists() {
            if let Ok(sum) = FileSum::of_file(&saving) {
                let sum_temporary = saving.with_extension("sum.tmp");
                let written = serde_json::to_vec(&sum).ok().is_some_and(|bytes| {
                    std::fs::write(&sum_temporary, bytes).is_ok()
                        && std::fs::rename(&saving, &self.path).is_ok()
                        && std::fs::rename(&sum_temporary, sum_path(&self.path)).is_ok()
                });
                if written {
                    let _ = std::fs::remove_file(unsaved_path(&self.path));
                    // Other installs' archives, sums and marks, long unsaved.
                    let ours = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    if let Some(folder) = self.path.parent() {
                        remove_older(folder, STALE, |name| name.starts_with("driver-") && !name.starts_with(&ours));
                    }
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
        self.settle(false, false);
    }
}

/// An archive being saved is written at the driver's exit and settled
/// within seconds; one older than this was left by a killed ingest.
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(3600);
/// How long jobs run without an archive after one finished without
/// saving it.
const RETRY: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// An archive of another install that no job saved for this long is
/// removed when a job saves one.
const STALE: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Removes the files of `folder` that `pick` names and that are older
/// than `limit`.
fn remove_older(folder: &Path, limit: std::time::Duration, pick: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        if pick(&entry.file_name().to_string_lossy()) && age(&entry.path()).is_some_and(|age| age > limit) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How long ago the file at `path` was last written.
fn age(path: &Path) -> Option<std::time::Duration> {
    std::fs::metadata(path).ok()?.modified().ok()?.elapsed().ok()
}

/// Where the sum of the archive at `path` is.
fn sum_path(path: &Path) -> PathBuf {
    path.with_extension("jsa.sum")
}

/// Where a finished job that saved no archive at `path` marks it.
fn unsaved_path(path: &Path) -> PathBuf {
    path.with_extension("jsa.unsaved")
}

/// Whether the archive at `path` is there and matches its sum.
fn sound(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(sum_path(path)) else { return false };
    let Ok(expected) = serde_json::from_slice::<FileSum>(&bytes) else { return false };
    FileSum::of_file(path).is_ok_and(|found| found == expected)
}

/// What a driver's archive depends on, as the JVM checks it.
#[derive(Debug, Default)]
struct Install {
    /// spark-submit, its jars, the Java that `spark-class` runs
    /// (`$JAVA_HOME/bin/java`, or `java` on the path) and its JVM library.
    files: Vec<PathBuf>,
    /// The configuration folders Spark's launcher puts on the class path
    /// (`SPARK_CONF_DIR` or SPARK_HOME's `conf`, `HADOOP_CONF_DIR`,
    /// `YARN_CONF_DIR`): the JVM archives none that is not empty.
    config: Vec<PathBuf>,
}

impl Install {
    /// The install of `spark_submit`, from this process's environment.
    fn of(spark_submit: &Path) -> Install {
        let submit = std::fs::canonicalize(spark_submit).unwrap_or_else(|_| spark_submit.to_owned());
        let home = submit.parent().and_then(Path::parent).map(Path::to_path_buf);
        let mut files = vec![submit];
        if let Some(home) = &home {
            let mut jars: Vec<PathBuf> = std::fs::read_dir(home.join("jars"))
                .map(|dir| dir.filter_map(|entry| entry.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            jars.sort();
            files.extend(jars);
        }
        let java = match std::env::var_os("JAVA_HOME") {
            Some(java_home) if !java_home.is_empty() => Some(PathBuf::from(java_home).join("bin").join("java")),
            _ => std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths).map(|dir| dir.join("java")).find(|java| java.is_file())
            }),
        };
        if let Some(java) = java {
            let java = std::fs::canonicalize(&java).unwrap_or(java);
            if let Some(jdk) = java.parent().and_then(Path::parent) {
                files.push(jdk.join("lib").join("server").join("libjvm.so"));
            }
            files.push(java);
        }
        let spark_conf = std::env::var_os("SPARK_CONF_DIR").map(PathBuf::from).or_else(|| home.map(|h| h.join("conf")));
        let config: Vec<PathBuf> = spark_conf
            .into_iter()
            .chain(["HADOOP_CONF_DIR", "YARN_CONF_DIR"].iter().filter_map(|v| std::env::var_os(v).map(PathBuf::from)))
            .filter(|folder| !folder.as_os_str().is_empty())
            .collect();
        Install { files, config }
    }

    /// Whether the JVM can archive its classes: no configuration folder
    /// holds a file.
    fn archivable(&self) -> bool {
        !self.config.iter().any(|folder| std::fs::read_dir(folder).is_ok_and(|mut d| d.next().is_some()))
    }

    /// A hash of the files' names, sizes and modification times and of
    /// the configuration folders' names.
    fn key(&self) -> u64 {
        let mut key = Vec::new();
        for path in &self.files {
            key.extend_from_slice(path.as_os_str().as_encoded_bytes());
            if let Ok(meta) = std::fs::metadata(path) {
                key.extend_from_slice(&meta.len().to_le_bytes());
                let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                key.extend_from_slice(&modified.unwrap_or_default().as_nanos().to_le_bytes());
            }
            key.push(0);
        }
        for folder in &self.config {
            key.push(1);
            key.extend_from_slice(folder.as_os_str().as_encoded_bytes());
        }
        xxhash_rust::xxh3::xxh3_64(&key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path, age: std::time::Duration) {
        let then = std::time::SystemTime::now() - age;
        std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(then)).expect("aged");
    }

    /// No archive: the driver saves one, kept with its sum after a clean
    /// exit and then used; a cut archive is removed and saved again; a
    /// failed job's is dropped, and so is one a killed ingest left; a job
    /// that finished without saving one stops the next from trying.
    #[test]
    fn an_archive_is_used_only_whole_and_saved_only_by_a_clean_exit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("cache");
        let install = Install { files: vec![dir.path().join("spark-submit")], config: Vec::new() };
        std::fs::write(&install.files[0], "#!/bin/sh\n").expect("spark-submit");

        // Left by killed ingests: an old one is removed, a fresh one kept;
        // another install's archive, long unused, goes when one is saved.
        std::fs::create_dir_all(&folder).expect("cache");
        let (old, fresh) = (folder.join("driver-0.jsa.1.tmp"), folder.join("driver-0.jsa.2.tmp"));
        let stale = folder.join("driver-0.jsa");
        for path in [&old, &fresh, &stale] {
            std::fs::write(path, b"half").expect("left");
        }
        aged(&old, 2 * ABANDONED);
        aged(&stale, 2 * STALE);

        let mut first = ClassArchive::in_folder(&folder, &install).expect("archive");
        assert!(!old.exists() && fresh.exists());
        let saving = first.saving.clone().expect("saved by this job");
        assert!(first.java_option().starts_with("-XX:ArchiveClassesAtExit="), "{}", first.java_option());
        std::fs::write(&saving, vec![7u8; 10_000]).expect("the JVM's archive");
        first.settle(true, true);
        assert!(!saving.exists() && !stale.exists() && fresh.exists());

        let second = ClassArchive::in_folder(&folder, &install).expect("archive");
        let option = second.java_option();
        assert!(option.starts_with(&format!("-XX:SharedArchiveFile={} ", first.path.display())), "{option}");
        drop(second);
        assert!(first.path.exists(), "a job that uses the archive leaves it");

        // Cut: removed, and this job saves it again; a failed job's goes.
        std::fs::write(&first.path, vec![7u8; 4_096]).expect("cut");
        let mut third = ClassArchive::in_folder(&folder, &install).expect("archive");
        assert!(!first.path.exists() && !sum_path(&first.path).exists());
        let saving = third.saving.clone().expect("saved again");
        std::fs::write(&saving, b"partial").expect("the JVM's archive");
        third.settle(false, false);
        assert!(!saving.exists() && !first.path.exists(), "a failed job's archive is dropped");

        // A job that finished and saved none: the next runs without one.
        let mut fourth = ClassArchive::in_folder(&folder, &install).expect("archive");
        fourth.settle(false, true);
        assert!(ClassArchive::in_folder(&folder, &install).is_none(), "not tried again");
        aged(&unsaved_path(&first.path), 2 * RETRY);
        assert!(ClassArchive::in_folder(&folder, &install).is_some_and(|a| a.saving.is_some()), "tried again");

        // Another install (a jar more) has its own archive.
        let jar = dir.path().join("spark-core.jar");
        std::fs::write(&jar, b"jar").expect("jar");
        let other = Install { files: vec![install.files[0].clone(), jar], config: Vec::new() };
        assert_ne!(ClassArchive::in_folder(&folder, &other).expect("archive").path, first.path);

        // A folder no JVM option can name, or a configuration folder the
        // JVM would refuse to archive: no archive.
        assert!(ClassArchive::in_folder(&dir.path().join("my cache"), &install).is_none());
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(&conf).expect("conf");
        let configured = Install { files: install.files.clone(), config: vec![conf.clone(), dir.path().join("none")] };
        assert!(configured.archivable(), "empty or missing folders are archived");
        std::fs::write(conf.join("spark-defaults.conf"), b"").expect("conf");
        assert!(!configured.archivable());
        assert_ne!(configured.key(), install.key());
    }
}
