//! Progress on standard error for the long commands (`ingest`, `generate`,
//! `report`): one mechanism for all three. A command runs its work inside
//! [`Progress::run`] and moves through phases ([`Progress::phase`]), each
//! with a unit, an optional total and an optional count (records, rows); the
//! library's progress callbacks only add to atomics ([`Progress::add`],
//! [`Progress::reach`]), and a ticker thread shows them:
//!
//! - a bar (indicatif) when standard error is a terminal;
//! - plain lines otherwise, every few seconds (`TELEMETER_PROGRESS_EVERY`
//!   seconds, 2 by default; tests set it small to see lines), each with
//!   position, total, rates, ETA and elapsed time;
//! - nothing with `--quiet`.
//!
//! Standard output is never written here.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};

use crate::threads;

/// Seconds between two plain progress lines when
/// `TELEMETER_PROGRESS_EVERY` is not set.
const DEFAULT_EVERY: Duration = Duration::from_secs(2);

/// What a phase counts in: its position and total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (shown as KiB, MiB, ...).
    Bytes,
    /// Things, named in the plural ("accounts").
    Items(&'static str),
    /// Nothing is counted: only the time passes (a step whose end is not
    /// known, such as a Spark job).
    Time,
}

impl Unit {
    fn amount(self, n: u64) -> String {
        match self {
            Unit::Bytes => HumanBytes(n).to_string(),
            Unit::Items(name) => format!("{n} {name}"),
            Unit::Time => String::new(),
        }
    }

    fn rate(self, per_second: f64) -> String {
        match self {
            Unit::Bytes => format!("{}/s", HumanBytes(per_second as u64)),
            Unit::Items(name) if per_second < 100.0 => format!("{per_second:.1} {name}/s"),
            Unit::Items(name) => format!("{per_second:.0} {name}/s"),
            Unit::Time => String::new(),
        }
    }
}

/// Where progress goes.
enum Output {
    /// `--quiet`: nowhere.
    Quiet,
    /// A terminal: a bar, redrawn in place.
    Bar,
    /// Not a terminal: a plain line every so often.
    Lines(Duration),
}

/// One phase of a command: what it does and how far it is.
struct Phase {
    /// What the phase does ("reading 12 files").
    name: String,
    unit: Unit,
    /// The position at the end, when known.
    total: Option<u64>,
    /// What [`Progress::add`]'s second number counts (records), if any.
    count: Option<Unit>,
    started: Instant,
    bar: Option<ProgressBar>,
}

/// Progress of one command on standard error.
pub struct Progress {
    command: &'static str,
    started: Instant,
    output: Output,
    phase: Mutex<Option<Phase>>,
    /// The current phase's position (in its unit).
    position: AtomicU64,
    /// The current phase's count.
    count: AtomicU64,
    /// When the last plain line was written.
    last_line: Mutex<Instant>,
}

impl Progress {
    /// Progress of `command` (the prefix of every line): nothing when
    /// `quiet`, a bar when standard error is a terminal, plain lines
    /// otherwise.
    pub fn new(command: &'static str, quiet: bool) -> Progress {
        let output = if quiet {
            Output::Quiet
        } else if std::io::stderr().is_terminal() {
            Output::Bar
        } else {
            Output::Lines(line_interval())
        };
        let now = Instant::now();
        Progress {
            command,
            started: now,
            output,
            phase: Mutex::new(None),
            position: AtomicU64::new(0),
            count: AtomicU64::new(0),
            last_line: Mutex::new(now),
        }
    }

    /// Whether nothing is shown (`--quiet`).
    pub fn is_quiet(&self) -> bool {
        matches!(self.output, Output::Quiet)
    }

    /// Runs `work` while a ticker thread shows the progress; ends the last
    /// phase with its line when `work` succeeds, and clears the bar. A
    /// ticker thread that cannot be started is the error, and `work` does
    /// not run.
    pub fn run<T, E: From<crate::error::Error>>(&self, work: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let tick = match self.output {
            Output::Quiet => return work(),
            Output::Bar => Duration::from_millis(100),
            Output::Lines(every) => (every / 4).clamp(Duration::from_millis(1), Duration::from_millis(100)),
        };
        // The ticker waits on a channel, not in a sleep: `work`'s end (the
        // sender dropped) wakes it at once, so the command ends when its
        // work does, not up to a tick later.
        let (done, ticks) = std::sync::mpsc::channel::<()>();
        let outcome = std::thread::scope(|scope| {
            let ticker = threads::spawn_scoped(scope, "telemeter-progress", move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ticks.recv_timeout(tick) {
                    self.tick();
                }
            });
            if let Err(e) = ticker {
                return Err(E::from(e));
            }
            let outcome = work();
            drop(done);
            outcome
        });
        self.end_phase(outcome.as_ref().ok().map(|_| ""));
        outcome
    }

    /// Starts a phase (ending the one before): `name` says what it does,
    /// `total` where its position ends (when known), `count` what the
    /// second number of [`Progress::add`] counts.
    pub fn phase(&self, name: &str, unit: Unit, total: Option<u64>, count: Option<Unit>) {
        if self.is_quiet() {
            return;
        }
        self.end_phase(Some(""));
        let Ok(mut phase) = self.phase.lock() else { return };
        self.position.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        let bar = match self.output {
            Output::Bar => Some(new_bar(self.command, name, unit, total)),
            _ => {
                let total_text = total.map(|t| format!(" ({})", unit.amount(t))).unwrap_or_default();
                eprintln!("{}: {name}{total_text}", self.command);
                None
            }
        };
        if let Ok(mut last) = self.last_line.lock() {
            *last = Instant::now();
        }
        *phase = Some(Phase { name: name.to_owned(), unit, total, count, started: Instant::now(), bar });
    }

    /// Adds to the current phase's position and count (from any thread;
    /// two atomic adds).
    pub fn add(&self, position: u64, count: u64) {
        self.position.fetch_add(position, Ordering::Relaxed);
        if count > 0 {
            self.count.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// Moves the current phase's position to `position` when it is further
    /// (for callers that hear a running total).
    pub fn reach(&self, position: u64) {
        self.position.fetch_max(position, Ordering::Relaxed);
    }

    /// A line of its own (above the bar on a terminal); nothing when quiet.
    pub fn note(&self, text: &str) {
        match self.output {
            Output::Quiet => {}
            Output::Bar => {
                let bar = self.phase.lock().ok().and_then(|p| p.as_ref().and_then(|p| p.bar.clone()));
                match bar {
                    Some(bar) => bar.println(format!("{}: {text}", self.command)),
                    None => eprintln!("{}: {text}", self.command),
                }
            }
            Output::Lines(_) => eprintln!("{}: {text}", self.command),
        }
    }

    /// The time since the command started, as `elapsed 1.23 s`.
    pub fn elapsed(&self) -> String {
        format!("elapsed {:.2} s", self.started.elapsed().as_secs_f64())
    }

    /// Ends the current phase with a line that says how far it got and how
    /// long it took, `extra` added (say what only the end knows: ", 812
    /// rows").
    pub fn end(&self, extra: &str) {
        self.end_phase(Some(extra));
    }

    /// Ends the current phase: with `report`, a last line says how far it
    /// got and how long it took, `report` added; the bar is gone.
    fn end_phase(&self, report: Option<&str>) {
        let Ok(mut phase) = self.phase.lock() else { return };
        let Some(phase) = phase.take() else { return };
        let text = format!("{}: {}", self.command, self.done_text(&phase, report.unwrap_or("")));
        let report = report.is_some();
        match phase.bar {
            // The bar goes, and the line takes its place (a line of its
            // own: the next phase's bar does not draw over it).
            Some(bar) => {
                bar.finish_and_clear();
                if report {
                    eprintln!("{text}");
                }
            }
            None if report => eprintln!("{text}"),
            None => {}
        }
    }

    /// `reading 12 files: 40.00 MiB, 120000 records in 2.41 s`.
    fn done_text(&self, phase: &Phase, extra: &str) -> String {
        let position = self.position.load(Ordering::Relaxed);
        let count = match phase.count {
            Some(unit) => format!(", {}", unit.amount(self.count.load(Ordering::Relaxed))),
            None => String::new(),
        };
        let amount = match phase.unit {
            Unit::Time => String::new(),
            unit => format!(": {}", unit.amount(position)),
        };
        format!("{}{amount}{count}{extra} in {:.2} s", phase.name, phase.started.elapsed().as_secs_f64())
    }

    /// Shows the current position: moves the bar, or writes a plain line
    /// when the interval has passed.
    fn tick(&self) {
        let Ok(phase) = self.phase.lock() else { return };
        let Some(phase) = phase.as_ref() else { return };
        let position = self.position.load(Ordering::Relaxed);
        let count = self.count.load(Ordering::Relaxed);
        let seconds = phase.started.elapsed().as_secs_f64().max(1e-9);
        let count_text = match phase.count {
            Some(unit) => format!("{}, {}", unit.amount(count), unit.rate(count as f64 / seconds)),
            None => String::new(),
        };
        match (&self.output, &phase.bar) {
            (Output::Bar, Some(bar)) => {
                if phase.total.is_none_or(|total| position <= total) {
                    bar.set_position(position);
                }
                let mut message = String::new();
                if let Unit::Items(_) = phase.unit {
                    message = format!(", {}", phase.unit.rate(position as f64 / seconds));
                }
                if !count_text.is_empty() {
                    message = format!("{message}, {count_text}");
                }
                bar.set_message(message);
            }
            (Output::Lines(every), _) => {
                let Ok(mut last) = self.last_line.lock() else { return };
                if last.elapsed() < *every {
                    return;
                }
                *last = Instant::now();
                eprintln!("{}: {}", self.command, self.line(phase, position, &count_text, seconds));
            }
            _ => {}
        }
    }

    /// `reading 12 files: 12.30 MiB of 40.00 MiB (30.8%), 5.12 MiB/s,
    /// 120000 records, 48000 records/s, ETA 5 s, elapsed 2.41 s`.
    fn line(&self, phase: &Phase, position: u64, count_text: &str, seconds: f64) -> String {
        let rate = position as f64 / seconds;
        let mut parts = vec![match phase.total {
            Some(total) => format!(
                "{} of {} ({:.1}%)",
                phase.unit.amount(position),
                phase.unit.amount(total),
                100.0 * position as f64 / total.max(1) as f64
            ),
            None => phase.unit.amount(position),
        }];
        parts.push(phase.unit.rate(rate));
        if !count_text.is_empty() {
            parts.push(count_text.to_owned());
        }
        if let Some(total) = phase.total {
            if position > 0 {
                parts.push(format!("ETA {:.0} s", total.saturating_sub(position) as f64 / rate.max(1e-9)));
            }
        }
        parts.push(self.elapsed());
        parts.retain(|part| !part.is_empty());
        format!("{}: {}", phase.name, parts.join(", "))
    }
}

/// A bar for a phase: with a total, a bar with rate and ETA; without, a
/// spinner with the position.
fn new_bar(command: &str, name: &str, unit: Unit, total: Option<u64>) -> ProgressBar {
    let (position, total_text, rate) = match unit {
        Unit::Bytes => ("{bytes}", "{total_bytes}", ", {bytes_per_sec}"),
        // Items: the rate is in the message, with one decimal.
        Unit::Items(_) | Unit::Time => ("{pos}", "{len}", ""),
    };
    let items = match unit {
        Unit::Items(name) => format!(" {name}"),
        Unit::Bytes | Unit::Time => String::new(),
    };
    let (bar, template) = match total {
        Some(total) => (
            ProgressBar::new(total),
            format!(
                "{{spinner}} {command}: {name} [{{bar:24.cyan/blue}}] {position}/{total_text}{items}{rate}{{msg}}, \
                 ETA {{eta}}"
            ),
        ),
        None if unit == Unit::Time => {
            (ProgressBar::no_length(), format!("{{spinner}} {command}: {name}{{msg}}, {{elapsed}}"))
        }
        None => {
            (ProgressBar::no_length(), format!("{{spinner}} {command}: {name} {position}{items}{{msg}}, {{elapsed}}"))
        }
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// The seconds between plain lines: `TELEMETER_PROGRESS_EVERY` (a
/// decimal), else 2.
fn line_interval() -> Duration {
    interval_of(std::env::var("TELEMETER_PROGRESS_EVERY").ok().as_deref())
}

/// The interval a `TELEMETER_PROGRESS_EVERY` text asks for; 2 s when it is
/// unset or not a duration (negative, NaN, or too large: no panic).
fn interval_of(text: Option<&str>) -> Duration {
    text.and_then(|text| text.trim().parse::<f64>().ok())
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .unwrap_or(DEFAULT_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_interval_out_of_range_is_the_default_not_a_panic() {
        assert_eq!(interval_of(Some(" 0.5 ")), Duration::from_millis(500));
        assert_eq!(interval_of(Some("0")), Duration::ZERO);
        for text in [None, Some("x"), Some("-1"), Some("NaN"), Some("inf"), Some("1e30")] {
            assert_eq!(interval_of(text), DEFAULT_EVERY, "{text:?}");
        }
    }

    fn lines_progress() -> Progress {
        let mut progress = Progress::new("test", true);
        progress.output = Output::Lines(Duration::ZERO);
        progress
    }

    #[test]
    fn a_line_has_position_total_rates_eta_and_elapsed() {
        let progress = lines_progress();
        let phase = Phase {
            name: "reading 2 files".to_owned(),
            unit: Unit::Bytes,
            total: Some(4096),
            count: Some(Unit::Items("records")),
            started: Instant::now(),
            bar: None,
        };
        let line = progress.line(&phase, 1024, "10 records, 5.0 records/s", 2.0);
        assert!(line.starts_with("reading 2 files: 1.00 KiB of 4.00 KiB (25.0%), 512 B/s, 10 records"), "{line}");
        assert!(line.contains(", ETA 6 s, elapsed "), "{line}");
        let phase = Phase { total: None, unit: Unit::Items("accounts"), count: None, ..phase };
        let line = progress.line(&phase, 3, "", 2.0);
        assert!(line.starts_with("reading 2 files: 3 accounts, 1.5 accounts/s, elapsed "), "{line}");
        let phase = Phase { unit: Unit::Time, ..phase };
        let line = progress.line(&phase, 0, "", 2.0);
        assert!(line.starts_with("reading 2 files: elapsed "), "{line}");
        let done = progress.done_text(&phase, ", 812 rows");
        assert!(done.starts_with("reading 2 files, 812 rows in ") && done.ends_with(" s"), "{done}");
    }

    #[test]
    fn adds_and_reaches_move_the_position_forward_only() {
        let progress = lines_progress();
        progress.add(5, 1);
        progress.reach(3);
        assert_eq!(progress.position.load(Ordering::Relaxed), 5);
        progress.reach(9);
        progress.add(1, 0);
        assert_eq!(progress.position.load(Ordering::Relaxed), 10);
        assert_eq!(progress.count.load(Ordering::Relaxed), 1);
    }

    /// Work that panics ends the run (the panic goes on to the caller):
    /// the ticker is told by the work's end however it ends, so the run
    /// never waits on it.
    #[test]
    fn a_panic_in_the_work_ends_the_run() {
        let (sent, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut progress = Progress::new("test", true);
            progress.output = Output::Lines(Duration::from_secs(3600));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                progress.run(|| -> Result<(), crate::error::Error> { panic!("the work fails") })
            }));
            let _ = sent.send(outcome.is_err());
        });
        let panicked = ended.recv_timeout(Duration::from_secs(60)).expect("the run ended");
        assert!(panicked, "the panic reaches the caller");
    }
}
