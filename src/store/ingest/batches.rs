//! How both engines cut an ingest's input into batches: files of one kind
//! up to a byte limit each ([`batches`]), and a file too large for two
//! batches read in runs of lines, each run a batch of its own
//! ([`piece_lines`], [`run_of`]). The local engine reads one batch while it
//! takes in the one before; the Spark engine names its new files by the
//! same batch numbers.

use crate::records::files::InputFile;

/// One batch of a kind's input files ([`batches`]).
#[derive(Clone, Copy)]
pub(in crate::store) struct Batch<'f, 'a> {
    /// Its files, in inventory order.
    pub(in crate::store) files: &'f [(u32, &'a InputFile)],
    /// Lines in each run when the batch is one file read in runs of lines
    /// ([`piece_lines`]), each run a batch of its own.
    pub(in crate::store) run_lines: Option<u64>,
}

/// Splits files into batches of at most `limit` input bytes (at least one
/// file each); a file read in runs of lines ([`piece_lines`]) is a batch
/// of its own.
pub(in crate::store) fn batches<'f, 'a>(files: &'f [(u32, &'a InputFile)], limit: u64) -> Vec<Batch<'f, 'a>> {
    let mut out = Vec::new();
    let (mut start, mut bytes, mut run_lines) = (0, 0u64, None);
    for (i, (_, file)) in files.iter().enumerate() {
        let lines = piece_lines(file, limit);
        if i > start && (run_lines.is_some() || lines.is_some() || bytes + file.size > limit) {
            out.push(Batch { files: &files[start..i], run_lines });
            (start, bytes) = (i, 0);
        }
        bytes += file.size;
        // A file that joins a batch is never read in runs (it would have
        // started one of its own), so this is the batch's.
        run_lines = lines;
    }
    if start < files.len() {
        out.push(Batch { files: &files[start..], run_lines });
    }
    out
}

/// Lines in each run of a file that is read a run of lines at a time
/// (each run a batch: `Feed`), or `None` for a file read whole: a file
/// whose rows would take more than twice a batch's `limit` of input bytes
/// (the size on disk of a plain CSV file, four times that compressed or
/// Parquet) is read in runs of `limit / 128` lines (a 128-byte CSV row's
/// worth), so that an ingest holds one run of its rows at a time. Both
/// engines cut at the same lines ([`run_of`]).
pub(in crate::store) fn piece_lines(file: &InputFile, limit: u64) -> Option<u64> {
    use crate::records::files::Format;
    let bytes = match file.format {
        Format::Csv => file.size,
        Format::CsvGz | Format::CsvZst | Format::Parquet => file.size.saturating_mul(4),
    };
    (bytes > limit.saturating_mul(2)).then_some((limit / PIECE_ROW_BYTES).max(1))
}

/// The run of a file (from 0) that its row at `line` is read in, for a file
/// read in runs of `lines` lines ([`piece_lines`]).
pub(in crate::store) fn run_of(file: &InputFile, line: u64, lines: u64) -> u64 {
    line.saturating_sub(crate::records::pieces::first_line(file.format)) / lines.max(1)
}

/// Bytes of input a row of a file read in runs counts for ([`piece_lines`]).
pub(in crate::store) const PIECE_ROW_BYTES: u64 = 128;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::records::files::Format;
    use crate::records::Kind;

    #[test]
    fn batches_hold_at_most_the_limit_but_at_least_one_file() {
        let file = |size: u64| InputFile {
            kind: Kind::Calls,
            path: PathBuf::new(),
            name: String::new(),
            format: Format::Csv,
            size,
            sum: None,
        };
        let files = [file(5), file(5), file(20), file(1), file(1)];
        let indexed: Vec<(u32, &InputFile)> = files.iter().enumerate().map(|(i, f)| (i as u32, f)).collect();
        let sizes: Vec<usize> = batches(&indexed, 10).iter().map(|b| b.files.len()).collect();
        assert_eq!(sizes, [2, 1, 2]);
        assert_eq!(batches(&indexed, 1).len(), 5);
        assert_eq!(batches(&indexed[..0], 10).len(), 0);
    }

    /// A file whose rows take more than two batches (four times its size
    /// when compressed or Parquet) is read in runs of lines, each run a
    /// batch of its own; the runs are cut at fixed line numbers.
    #[test]
    fn a_file_of_more_than_two_batches_is_a_batch_of_its_own_read_in_runs() {
        const MIB: u64 = 1 << 20;
        let file = |size: u64, format: Format| InputFile {
            kind: Kind::Calls,
            path: PathBuf::new(),
            name: String::new(),
            format,
            size: size * MIB,
            sum: None,
        };
        let files = [
            file(3, Format::Csv),
            file(4, Format::Csv),
            file(6, Format::CsvGz),
            file(1, Format::Csv),
            file(21, Format::Csv),
            file(5, Format::Parquet),
            file(2, Format::CsvZst),
            file(2, Format::Csv),
        ];
        let indexed: Vec<(u32, &InputFile)> = files.iter().enumerate().map(|(i, f)| (i as u32, f)).collect();
        let in_runs: Vec<Option<u64>> = files.iter().map(|f| piece_lines(f, 10 * MIB)).collect();
        let lines = Some(10 * MIB / 128);
        assert_eq!(in_runs, [None, None, lines, None, lines, None, None, None]);
        let cut = batches(&indexed, 10 * MIB);
        let sizes: Vec<(usize, Option<u64>)> = cut.iter().map(|b| (b.files.len(), b.run_lines)).collect();
        assert_eq!(sizes, [(2, None), (1, lines), (1, None), (1, lines), (3, None)]);
        // CSV data lines start at 2, Parquet rows at 1.
        let (csv, parquet) = (&files[4], &files[5]);
        assert_eq!([2, 81921, 81922, 163842].map(|line| run_of(csv, line, 81920)), [0, 0, 1, 2]);
        assert_eq!([1, 81920, 81921].map(|row| run_of(parquet, row, 81920)), [0, 0, 1]);
    }
}
