//! The CSV reader's tests: framing, quoting, limits, streams, chunks.

use proptest::strategy::Strategy;

use super::*;
use crate::records::files::Format;
use crate::records::{Field, Kind};

#[test]
fn a_line_of_the_wrong_width_names_the_column_it_lacks_or_the_field_it_has_too_many() {
    let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| (*s).to_owned()).collect();
    let cases = [
        (3, "d", "has 3 fields, the header has 4: column 'd' is missing"),
        (2, "c", "has 2 fields, the header has 4: column 'c' (and the 1 column after it) is missing"),
        (1, "b", "has 1 field, the header has 4: column 'b' (and the 2 columns after it) is missing"),
        (5, "-", "has 5 fields, the header has 4: field 5 and after have no column"),
    ];
    for (n_fields, column, reason) in cases {
        assert_eq!(super::wrong_width(&names, n_fields), (column, reason.to_owned()), "{n_fields}");
    }
}

/// Every event a sink receives: a row's fields (their text, whether the
/// reader found it printable ASCII or not), or a malformed row's column,
/// value and reason.
#[derive(Default)]
struct Events(Vec<(u64, Vec<String>)>);

impl RowSink for Events {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        self.0.push((
            line,
            fields.iter().map(|f| format!("{:?}", f.text_bytes().map(String::from_utf8_lossy))).collect(),
        ));
        true
    }
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, vec![column.to_owned(), value, reason]));
        true
    }
    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, vec!["unframed".to_owned(), column.to_owned(), value, reason]));
        true
    }
}

proptest::proptest! {
    #[test]
    fn the_structural_index_reads_printable_chunks_as_the_line_reader_does(
        chunk in proptest::collection::vec(proptest::sample::select(b",,,,\n\nab9 ~".to_vec()), 0..600),
        first_line in 2u64..1000,
    ) {
        let names: Vec<String> = Kind::Charges.columns().iter().map(|c| (*c).to_owned()).collect();
        let columns = [3, 0, 5, 1, 2, 4];
        let reader = Reader { columns: &columns, width: names.len(), names: &names };
        let text = std::str::from_utf8(&chunk).unwrap();
        let (mut indexed, mut by_lines) = (Events::default(), Events::default());
        let ended = reader.chunk_indexed(text, first_line, &mut indexed);
        proptest::prop_assert_eq!(ended, reader.chunk_lines(&chunk, Some(text), first_line, &mut by_lines));
        proptest::prop_assert!(ended != ChunkEnd::Stopped);
        proptest::prop_assert_eq!(indexed.0, by_lines.0);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// The oracle: on any printable bytes (quotes, doubled quotes, stray
    /// quotes, CRLF and lone carriage returns), the structural index hands
    /// the sink what the line-at-a-time reader does, event for event.
    #[test]
    fn the_structural_index_reads_quoted_chunks_as_the_line_reader_does(
        chunk in proptest::collection::vec(proptest::sample::select(b",,,,\"\"\"\n\n\rab9 ~".to_vec()), 0..600),
        first_line in 2u64..1000,
        width in 1usize..9,
    ) {
        let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
        let columns: Vec<usize> = (0..width).rev().collect();
        let reader = Reader { columns: &columns, width, names: &names };
        let text = std::str::from_utf8(&chunk).unwrap();
        let (mut indexed, mut by_lines) = (Events::default(), Events::default());
        let ended = reader.chunk_indexed(text, first_line, &mut indexed);
        proptest::prop_assert_eq!(ended, reader.chunk_lines(&chunk, Some(text), first_line, &mut by_lines));
        proptest::prop_assert!(ended != ChunkEnd::Stopped);
        proptest::prop_assert_eq!(indexed.0, by_lines.0);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Lines made of well-formed and faulty fields (plain, quoted, quoted
    /// with commas or doubled quotes, a stray quote), wide enough to pass
    /// field 64, some columns chosen out of order and the rest not: the
    /// structural index hands the sink what the line reader does.
    #[test]
    fn lines_of_doubled_quotes_in_chosen_and_other_fields_read_as_the_line_reader_does(
        lines in proptest::collection::vec(
            (
                proptest::collection::vec(proptest::sample::select(vec![
                    "ab", "", "\"x\"", "\"\"", "\"a,b\"", "\"a\"\"b\"", "\"\"\"\"", "\"\"\"x\"\"\"", "\"a\"\",\"\"b\"",
                ]), 65..68),
                proptest::option::weighted(0.2, (0usize..66, proptest::sample::select(vec!["a\"b", "\"a\"b", "\"\"\""]))),
                proptest::bool::ANY,
            ),
            1..6,
        ),
    ) {
        let width = 66;
        let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
        let columns = [65, 2, 0, 64, 63, 7];
        let reader = Reader { columns: &columns, width, names: &names };
        let mut text = String::new();
        for (fields, fault, crlf) in &lines {
            let mut fields = fields.clone();
            if let Some((at, bad)) = fault {
                let at = at % fields.len();
                fields[at] = bad;
            }
            text.push_str(&fields.join(","));
            text.push_str(if *crlf { "\r\n" } else { "\n" });
        }
        let (mut indexed, mut by_lines) = (Events::default(), Events::default());
        let ended = reader.chunk_indexed(&text, 2, &mut indexed);
        proptest::prop_assert_eq!(ended, reader.chunk_lines(text.as_bytes(), Some(&text), 2, &mut by_lines));
        proptest::prop_assert!(ended != ChunkEnd::Stopped);
        proptest::prop_assert_eq!(indexed.0, by_lines.0);
    }
}

#[test]
fn quoted_dialects_read_as_the_line_reader_reads_them() {
    let names: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
    let reader = Reader { columns: &[0, 1, 2], width: 3, names: &names };
    let cases: [&str; 10] = [
        "\"x\",\"\",\"1\"\r\n",
        "x,\"\",1\n",
        "\"a,b\",\"c\"\"d\",e\n",
        "\"open,b,c\n",
        "a\"b,c,d\r\n",
        "\"a\"b,c,d\n",
        "a,b\r,c\r\n",
        "\"a\",\"b\"\n\r\n\"c\",d,e",
        "\"a\",\"b,\"\"c\"\n",
        "\"\"\"\",b,c\n\"x\n",
    ];
    for case in cases {
        let (mut indexed, mut by_lines) = (Events::default(), Events::default());
        let ended = reader.chunk_indexed(case, 2, &mut indexed);
        assert_eq!(ended, reader.chunk_lines(case.as_bytes(), Some(case), 2, &mut by_lines), "{case:?}");
        assert_ne!(ended, ChunkEnd::Stopped, "{case:?}");
        assert_eq!(indexed.0, by_lines.0, "{case:?}");
    }
    // A row read in place, and a stray quote refused on its line only.
    let mut events = Events::default();
    reader.chunk_indexed("\"x\",\"\",1\r\nx\"y,b,c\r\nq,\"r,s\",t\n", 7, &mut events);
    let row = |fields: [&str; 3]| fields.map(|f| format!("{:?}", Some(f))).to_vec();
    assert_eq!(events.0[0], (7, row(["x", "", "1"])));
    assert_eq!(
        events.0[1],
        (
            8,
            vec![
                "a".to_owned(),
                "x\"y,b,c".to_owned(),
                "has a stray quote in field 1 ('a') (a field with a quote must be quoted, the quote doubled)"
                    .to_owned()
            ]
        )
    );
    assert_eq!(events.0[2], (9, row(["q", "r,s", "t"])));
}

/// What a reader handed over for each line: the fields of a row that
/// [`crate::records::parse_record`] accepts, or why the line or row was
/// refused.
type Lines = Vec<(u64, std::result::Result<Vec<String>, String>)>;

#[derive(Default)]
struct Collect {
    lines: Lines,
}

impl RowSink for Collect {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        let entry = match crate::records::parse_record(Kind::Charges, fields) {
            Ok(_) => Ok(fields.iter().map(Field::display).collect()),
            Err(e) => Err(format!("column {}: {}", e.column, e.reason)),
        };
        self.lines.push((line, entry));
        true
    }
    fn malformed(&mut self, line: u64, _: &str, _: String, reason: String) -> bool {
        self.lines.push((line, Err(reason)));
        true
    }
    fn unframed(&mut self, line: u64, _: &str, _: String, reason: String) -> bool {
        self.lines.push((line, Err(format!("unframed: {reason}"))));
        true
    }
}

fn charges_file() -> InputFile {
    InputFile {
        kind: Kind::Charges,
        path: std::path::PathBuf::from("charges/t.csv"),
        name: "charges/t.csv".to_owned(),
        format: Format::Csv,
        size: 0,
        sum: None,
    }
}

/// Every line a charges file's `bytes` hand over, in order.
fn read_lines(bytes: &[u8]) -> Result<Lines> {
    let sinks = read(&charges_file(), bytes, Collect::default)?;
    Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
}

/// [`read_lines`] in chunks of about `chunk_bytes`.
fn read_lines_in_chunks(bytes: &[u8], chunk_bytes: usize) -> Result<Lines> {
    let sinks = read_in_chunks(&charges_file(), bytes, chunk_bytes, Collect::default)?;
    Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
}

/// [`read_lines`] of `bytes` written compressed (gzip when `zstd` is
/// false) and read as a stream in blocks of about `block_bytes`.
fn read_lines_streamed(bytes: &[u8], zstd: bool, block_bytes: usize) -> Result<Lines> {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (format, path) = match zstd {
        true => (Format::CsvZst, dir.path().join("t.csv.zst")),
        false => (Format::CsvGz, dir.path().join("t.csv.gz")),
    };
    let compressed = match zstd {
        true => ::zstd::encode_all(bytes, 1).unwrap(),
        false => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        }
    };
    std::fs::write(&path, compressed).unwrap();
    let file = InputFile { path, format, size: bytes.len() as u64, ..charges_file() };
    let mut buffers = Default::default();
    let sinks = read_blocks(&file, &mut buffers, block_bytes, Collect::default).map_err(|e| file.renamed(e))?;
    Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
}

/// A compressed file read in blocks hands over the lines the whole
/// file does: a BOM, a header and lines longer than a block, CRLF
/// endings, a last line without a newline, blank and damaged lines.
#[test]
fn a_compressed_file_read_in_blocks_reads_as_the_whole_file() {
    let mut rows = charges_rows(3000);
    rows[7] = String::new();
    rows[100] = format!("x100,A1,2026-11-20T00:00:00Z,{},100,0.1", "long ".repeat(200));
    rows[2000] = "x2000,A1,\"open,CNAM Lookup,2000,0.1".to_owned();
    let text = file_of(&rows);
    let long_header = format!("{}{}\n", CHARGES_HEADER.trim_end(), ",extra".repeat(100));
    let cases = [
        text.clone().into_bytes(),
        [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat(),
        text.replace('\n', "\r\n").into_bytes(),
        text.trim_end().as_bytes().to_vec(),
        text.replacen(CHARGES_HEADER, &long_header, 1).replace('\n', ",e\n").replacen(",e\n", "\n", 1).into_bytes(),
        b"\n\n  \n".to_vec(),
        CHARGES_HEADER.as_bytes().to_vec(),
        Vec::new(),
    ];
    for (case, bytes) in cases.iter().enumerate() {
        let whole = read_lines(bytes).map_err(|e| e.to_string());
        for zstd in [false, true] {
            for block_bytes in [1, 50, 999, 64 << 10, BLOCK_BYTES] {
                let streamed = read_lines_streamed(bytes, zstd, block_bytes).map_err(|e| e.to_string());
                assert_eq!(streamed, whole, "case {case}, zstd {zstd}, blocks of {block_bytes}");
            }
        }
    }
    // The rows before the quote that never closes, then the file's error.
    assert_eq!(read_lines(&cases[0]).unwrap().len(), 2001);
}

/// A stream damaged past its first block is an error naming the file,
/// not the rows before the damage.
#[test]
fn a_compressed_file_damaged_after_its_first_block_is_an_error_naming_it() {
    use std::io::Write;
    let text = file_of(&charges_rows(20_000));
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(text.as_bytes()).unwrap();
    let mut compressed = encoder.finish().unwrap();
    compressed.truncate(compressed.len() * 3 / 4);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv.gz");
    std::fs::write(&path, compressed).unwrap();
    let file = InputFile { path, format: Format::CsvGz, ..charges_file() };
    let error = read_blocks(&file, &mut Default::default(), 4096, Collect::default)
        .map_err(|e| file.renamed(e))
        .err()
        .expect("a truncated stream is an error");
    let message = error.chain();
    assert!(message.starts_with("charges/t.csv: not a readable gzip file"), "{message}");
}

/// [`Collect`] with a sink per chunk, and the lines each was told of.
#[derive(Default)]
struct PerChunk {
    collect: Collect,
    reserved: Option<(usize, usize)>,
}

impl RowSink for PerChunk {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        self.collect.row(line, fields)
    }
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.collect.malformed(line, column, value, reason)
    }
    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.collect.unframed(line, column, value, reason)
    }
    const ONE_PER_CHUNK: bool = true;
    fn reserve(&mut self, lines: usize, bytes: usize) {
        assert!(self.reserved.is_none(), "told once");
        self.reserved = Some((lines, bytes));
    }
}

/// Sinks made one per chunk hand over the same lines as shared ones,
/// each told first of its own lines, and of its bytes.
#[test]
fn one_sink_per_chunk_reads_the_same_lines_and_is_told_its_size() {
    let mut rows = charges_rows(700);
    rows[40] = "x40,A1,2026-11-20T00:00:00Z,\"CNAM\nLookup\",40,0.41".to_owned();
    rows[300] = "x300,A1,not a time,CNAM Lookup,300,0.1".to_owned();
    let text = file_of(&rows);
    let shared = read_lines_in_chunks(text.as_bytes(), 2000).expect("read");
    for chunk_bytes in [1000, 2000, 1 << 20] {
        let sinks = read_in_chunks(&charges_file(), text.as_bytes(), chunk_bytes, PerChunk::default).expect("read");
        if chunk_bytes < text.len() / 2 {
            assert!(sinks.len() > 10, "{} sinks", sinks.len());
        }
        let body_bytes: usize = sinks.iter().map(|s| s.reserved.expect("told").1).sum();
        assert_eq!(body_bytes, text.len() - CHARGES_HEADER.len());
        // Told its physical lines: one record each, but for the record
        // whose quoted field spans two.
        let told: usize = sinks.iter().map(|s| s.reserved.expect("told").0).sum();
        assert_eq!(told, rows.len() + 1);
        for sink in &sinks {
            let (lines, _) = sink.reserved.expect("told");
            assert!(sink.collect.lines.len() <= lines, "{lines} lines told");
        }
        let lines: Lines = sinks.into_iter().flat_map(|s| s.collect.lines).collect();
        assert_eq!(lines, shared);
    }
}

const CHARGES_HEADER: &str = "record_id,auth_id,timestamp,description,units,amount\n";

/// A charges file of `n` good rows, lines 2..=n+1.
fn charges_rows(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("x{i},A1,2026-11-20T00:00:00Z,CNAM Lookup,{i},0.0{}", i + 1)).collect()
}

fn file_of(rows: &[String]) -> String {
    let mut text = CHARGES_HEADER.to_owned();
    for row in rows {
        text.push_str(row);
        text.push('\n');
    }
    text
}

/// Reads `rows` and checks that every line is handed over once, in
/// order, and that exactly the lines `bad` are refused, each with a
/// reason containing `why`.
fn refuses_exactly(rows: &[String], bad: &[u64], why: &str) {
    let lines = read_lines(file_of(rows).as_bytes()).unwrap();
    let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
    assert_eq!(numbers, (2..rows.len() as u64 + 2).collect::<Vec<_>>(), "every line once: {lines:?}");
    for (line, entry) in &lines {
        match entry {
            Err(reason) => {
                assert!(bad.contains(line), "line {line} refused: {reason}");
                assert!(reason.contains(why), "line {line}: {reason}");
            }
            Ok(_) => assert!(!bad.contains(line), "line {line} accepted: {entry:?}"),
        }
    }
}

/// A quote that opens a field and never closes: the lines after it are
/// its field's (RFC 4180), so the file's error names its line, the field
/// and where the input ends; nothing after it is read as a record.
#[test]
fn a_quote_that_never_closes_is_the_files_error_at_its_line() {
    let mut rows = charges_rows(12);
    rows[3] = "x3,A1,2026-11-20T00:00:00Z,CNAM Lookup,3,\"0.04".to_owned();
    let lines = read_lines(file_of(&rows).as_bytes()).unwrap();
    let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
    assert_eq!(numbers, [2, 3, 4, 5], "{lines:?}");
    let Err(reason) = &lines[3].1 else { panic!("{lines:?}") };
    assert!(
        reason.starts_with("unframed: has a quote that opens field 6 ('amount') and does not close by the end"),
        "{reason}"
    );
    // A quote opening a field on the next line closes it: one record of
    // the two lines, refused for the text after that quote.
    rows[4] = "x4,A1,2026-11-20T00:00:00Z,\"CNAM Lookup,4,0.05".to_owned();
    let lines = read_lines(file_of(&rows).as_bytes()).unwrap();
    let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
    assert_eq!(numbers, [2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13], "{lines:?}");
    assert!(matches!(&lines[3].1, Err(reason) if reason.contains("after the closing quote")), "{lines:?}");
}

/// Two stray quotes lines apart: the first opens a field that the second
/// closes, so the lines between are one record (as any RFC 4180 reader
/// reads them), refused as one, numbered by its first line; the lines
/// after it read as before.
#[test]
fn stray_quotes_lines_apart_make_one_record_of_the_lines_between() {
    let mut rows = charges_rows(12);
    rows[2] = "x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,2,\"0.03".to_owned();
    rows[7] = "x7,A1,2026-11-20T00:00:00Z,CNAM Lookup,7,0.08\"".to_owned();
    let lines = read_lines(file_of(&rows).as_bytes()).unwrap();
    let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
    assert_eq!(numbers, [2, 3, 4, 10, 11, 12, 13], "{lines:?}");
    assert!(matches!(&lines[2].1, Err(reason) if reason.contains("not a decimal")), "{lines:?}");
    assert!(lines.iter().enumerate().all(|(i, (_, entry))| i == 2 || entry.is_ok()), "{lines:?}");
}

/// A stray quote inside an unquoted field, or text after a closing quote,
/// is refused on its line only: such a quote opens no field.
#[test]
fn a_mid_row_stray_quote_is_refused_on_its_line_only() {
    let mut rows = charges_rows(12);
    rows[4] = "x4,A1,2026-11-20T00:00:00Z,\"CNAM\" Lookup,4,0.05".to_owned();
    refuses_exactly(&rows, &[6], "quote");
    rows[4] = "x4,A1,2026-11-20T00:00:00Z,CNAM \"Lookup\",4,0.05".to_owned();
    refuses_exactly(&rows, &[6], "quote");
    rows[4] = "x4,A1,2026-11-20T00:00:00Z,CNAM \"Lookup,4,0.05".to_owned();
    refuses_exactly(&rows, &[6], "quote");
}

/// A quoted field that spans lines (RFC 4180, as Python's csv module and
/// pandas write a value with a line break) is one record, its line breaks
/// kept, numbered by its first line; the next record's number counts every
/// line before it. CRLF endings too, and in an extra column.
#[test]
fn a_quoted_field_may_span_lines() {
    let mut rows = charges_rows(6);
    rows[1] = "x1,A1,2026-11-20T00:00:00Z,\"CNAM".to_owned();
    rows[2] = "Lookup, \"\"daily\"\"\",1,0.02".to_owned();
    let lines = read_lines(file_of(&rows).as_bytes()).unwrap();
    let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
    assert_eq!(numbers, [2, 3, 5, 6, 7], "{lines:?}");
    let Ok(fields) = &lines[1].1 else { panic!("{lines:?}") };
    assert_eq!(fields[3], "CNAM\nLookup, \"daily\"", "{lines:?}");
    let crlf = file_of(&rows).replace('\n', "\r\n");
    let lines = read_lines(crlf.as_bytes()).unwrap();
    let Ok(fields) = &lines[1].1 else { panic!("{lines:?}") };
    assert_eq!(fields[3], "CNAM\r\nLookup, \"daily\"", "{lines:?}");
    // In a column nothing reads.
    let text = "record_id,auth_id,timestamp,description,units,amount,note\n\
                x1,A1,2026-11-20T00:00:00Z,CNAM,1,0.01,\"line one\n\nline three\"\n\
                x2,A1,2026-11-20T00:00:00Z,CNAM,2,0.02,\n";
    let lines = read_lines(text.as_bytes()).unwrap();
    assert_eq!(lines.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [2, 5], "{lines:?}");
    assert!(lines.iter().all(|(_, entry)| entry.is_ok()), "{lines:?}");
}

#[test]
fn a_blank_line_is_refused() {
    let mut rows = charges_rows(6);
    rows[2] = String::new();
    refuses_exactly(&rows, &[4], "empty line");
    rows[2] = "\r".to_owned();
    refuses_exactly(&rows, &[4], "empty line");
}

#[test]
fn quoted_fields_hold_commas_and_doubled_quotes_and_crlf_endings_are_dropped() {
    let text = format!(
        "{}\"x1\",A1,2026-11-20T00:00:00Z,\"Porting, \"\"express\"\"\",\"\",1\r\nx2,A1,2026-11-20T00:00:00Z,CNAM,2,3\r\n",
        CHARGES_HEADER.replace('\n', "\r\n")
    );
    let lines = read_lines(text.as_bytes()).unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0].0, 2);
    assert!(lines[0].1.as_ref().is_err_and(|e| e.starts_with("column 4")), "{lines:?}");
    assert_eq!(lines[1], (3, Ok(["x2", "A1", "2026-11-20T00:00:00Z", "CNAM", "2", "3"].map(String::from).to_vec())));
    let text = format!("{CHARGES_HEADER}\"x1\",A1,2026-11-20T00:00:00Z,\"Porting, \"\"express\"\"\",\"1\",1\n");
    let lines = read_lines(text.as_bytes()).unwrap();
    assert_eq!(
        lines,
        [(2, Ok(["x1", "A1", "2026-11-20T00:00:00Z", "Porting, \"express\"", "1", "1"].map(String::from).to_vec()))]
    );
}

/// A valid charges record, as the text of its six fields.
fn charge() -> impl proptest::strategy::Strategy<Value = [String; 6]> {
    use proptest::prelude::*;
    let id = "[A-Za-z0-9_. ,\"\u{e9}\u{20ac}-]{1,12}";
    (
        id,
        id,
        proptest::sample::select(vec![
            "2026-11-20T13:45:01Z",
            "2026-11-20 13:45:01.250+05:30",
            "2026-01-01T00:00:00-08:00",
        ]),
        "[ -~\u{e9}\u{20ac}]{1,16}",
        0u32..1000,
        (0u32..1000, 1u32..1000),
    )
        .prop_map(|(record_id, auth_id, timestamp, description, units, (whole, part))| {
            [record_id, auth_id, timestamp.to_owned(), description, units.to_string(), format!("{whole}.{part:03}")]
        })
}

/// `records` written by the csv crate's writer with `style` and
/// `crlf` endings, the columns in `order` (indexes into the contract's
/// columns; `6` is an extra column).
fn written(records: &[[String; 6]], style: ::csv::QuoteStyle, crlf: bool, order: &[usize]) -> Vec<u8> {
    let terminator = if crlf { ::csv::Terminator::CRLF } else { ::csv::Terminator::Any(b'\n') };
    let mut writer = ::csv::WriterBuilder::new().quote_style(style).terminator(terminator).from_writer(Vec::new());
    let columns = Kind::Charges.columns();
    writer.write_record(order.iter().map(|&i| columns.get(i).copied().unwrap_or("export_batch"))).unwrap();
    for (n, record) in records.iter().enumerate() {
        let extra = format!("batch, \"{n}\"");
        writer.write_record(order.iter().map(|&i| record.get(i).unwrap_or(&extra))).unwrap();
    }
    writer.into_inner().unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    #[test]
    fn records_written_by_a_csv_writer_read_back_identically(
        records in proptest::collection::vec(charge(), 0..40),
        style in proptest::sample::select(vec![
            ::csv::QuoteStyle::Always,
            ::csv::QuoteStyle::Necessary,
            ::csv::QuoteStyle::NonNumeric,
        ]),
        crlf in proptest::bool::ANY,
        order in proptest::strategy::Just((0..7).collect::<Vec<usize>>()).prop_shuffle(),
        chunk_bytes in proptest::num::usize::ANY,
    ) {
        let bytes = written(&records, style, crlf, &order);
        let lines = read_lines(&bytes).unwrap();
        let expected: Lines =
            records.iter().enumerate().map(|(i, r)| (i as u64 + 2, Ok(r.to_vec()))).collect();
        proptest::prop_assert_eq!(&lines, &expected);
        // Chunks of any size read the same lines.
        proptest::prop_assert_eq!(&read_lines_in_chunks(&bytes, 1 + chunk_bytes % 200).unwrap(), &expected);
    }

    #[test]
    fn damage_never_spreads_beyond_its_line(
        records in proptest::collection::vec(charge(), 1..30),
        crlf in proptest::bool::ANY,
        damage in 0u8..6,
        at in proptest::num::usize::ANY,
        byte in proptest::num::u8::ANY,
    ) {
        let original = written(&records, ::csv::QuoteStyle::Necessary, crlf, &[0, 1, 2, 3, 4, 5]);
        let mut bytes = original.clone();
        let at = at % (bytes.len() + 1);
        match damage {
            0 if at < bytes.len() => bytes[at] ^= byte.max(1),
            1 => bytes.insert(at, byte),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            3 => bytes.insert(at, b'"'),
            4 => bytes.insert(at, b'\n'),
            _ => bytes.insert(at, 0),
        }
        let strict = matches!(damage, 3..=5);
        // Compressed and read in blocks, the same lines (or error).
        let streamed = read_lines_streamed(&bytes, damage % 2 == 0, 1 + at % 97);
        proptest::prop_assert_eq!(
            streamed.map_err(|e| e.to_string()),
            read_lines(&bytes).map_err(|e| e.to_string())
        );
        let Ok(lines) = read_lines(&bytes) else {
            // An error names the file: nothing is silently changed.
            return Ok(());
        };
        // Every physical line after the header is handed over once, but
        // for the lines of a record whose quoted field spans them: only
        // the damaged line's (a quote that opens a field, a line break in
        // a quoted one), numbered by its first line.
        let header_end = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
        let body = &bytes[header_end..];
        let physical = memchr::memchr_iter(b'\n', body).count() as u64
            + u64::from(!body.is_empty() && !body.ends_with(b"\n"));
        let damaged_line = 1 + memchr::memchr_iter(b'\n', &bytes[..at.min(bytes.len())]).count() as i64;
        let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
        let mut next = 2;
        for (i, &line) in numbers.iter().enumerate() {
            proptest::prop_assert_eq!(line, next, "{:?}", numbers);
            next = numbers.get(i + 1).copied().unwrap_or(physical + 2);
            let spans = next > line + 1;
            proptest::prop_assert!(!spans || line as i64 == damaged_line, "line {} spans: {:?}", line, numbers);
        }
        proptest::prop_assert!(numbers.is_empty() || next == physical + 2);
        // Lines the damage did not touch read as before; the damaged
        // line (or the two it became) at most differ. A damaged header
        // that still names every column (a comma that adds an unnamed
        // one) may refuse every line, but changes none silently.
        let expected = read_lines(&original).unwrap();
        let delta = physical as i64 - expected.len() as i64;
        for (line, entry) in &lines {
            let line = *line as i64;
            let before = line < damaged_line;
            let after = line > damaged_line + delta.max(0);
            if (before || after) && !(damaged_line == 1 && entry.is_err()) {
                let source = if before { line } else { line - delta };
                let original_entry = &expected[(source - 2) as usize];
                proptest::prop_assert_eq!(&original_entry.1, entry, "line {} (was {})", line, source);
            }
        }
        // Quotes, newlines and NULs are never taken silently: either
        // nothing changed or some line is refused; or a line break went
        // into a quoted description, which may hold one (RFC 4180).
        if strict {
            let refused = lines.iter().any(|(_, e)| e.is_err());
            let broken_description = damage == 4 && lines.len() == expected.len() && lines.iter().zip(&expected).all(
                |((_, now), (_, was))| match (now, was) {
                    (Ok(now), Ok(was)) => now.iter().zip(was).enumerate().all(|(i, (n, w))| n == w || i == 3),
                    _ => now == was,
                },
            );
            proptest::prop_assert!(
                refused || lines == expected || broken_description,
                "{:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}

#[test]
fn a_plain_file_read_in_blocks_reads_as_its_bytes() {
    let text = file_of(&charges_rows(20_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(&path, &text).unwrap();
    let file = InputFile { path, size: text.len() as u64, ..charges_file() };
    let expected = read_lines(text.as_bytes()).unwrap();
    assert_eq!(expected.len(), 20_000);
    for block_bytes in [999, 64 << 10, BLOCK_BYTES] {
        let sinks = read_blocks(&file, &mut Default::default(), block_bytes, Collect::default).unwrap();
        assert_eq!(sinks.into_iter().flat_map(|s| s.lines).collect::<Lines>(), expected);
    }
    let mut pieces = Pieces::open(&file).unwrap().expect("a header");
    let mut lines = Lines::new();
    while !pieces.done() {
        for sink in pieces.next(777, PerChunk::default).unwrap() {
            assert_eq!(sink.reserved.map(|(lines, _)| lines), Some(sink.collect.lines.len()));
            lines.extend(sink.collect.lines);
        }
    }
    assert_eq!(lines, expected);
    assert_eq!(pieces.bytes_read(), text.len() as u64);
}

/// A line past [`MAX_LINE_BYTES`] and a run of empty lines past
/// [`MAX_EMPTY_RUN`] are errors naming the file and the line, read
/// whole or streamed; a line or a run at the limit is read.
#[test]
fn a_line_too_long_or_too_many_empty_lines_is_an_error_naming_the_line() {
    let rows = charges_rows(5);
    let long = format!("x9,A1,2026-11-20T00:00:00Z,{},1,0.1", "d".repeat(MAX_LINE_BYTES));
    let at_limit = long[..MAX_LINE_BYTES].to_owned();
    let empties = |n: u64| vec![String::new(); n as usize];
    let cases: [(Vec<String>, Option<&str>); 6] = [
        ([&rows[..2], std::slice::from_ref(&long), &rows[2..]].concat(), Some("line 4: longer than 1048576 bytes")),
        ([&rows[..], std::slice::from_ref(&long)].concat(), Some("line 7: longer than 1048576 bytes")),
        ([&rows[..2], &[at_limit], &rows[2..]].concat(), None),
        ([&rows[..1], &empties(MAX_EMPTY_RUN + 1)[..], &rows[1..]].concat(), Some("line 3: more than 10000 empty")),
        ([&rows[..1], &empties(MAX_EMPTY_RUN)[..], &rows[1..]].concat(), None),
        ([&rows[..1], &empties(MAX_EMPTY_RUN / 2)[..], &rows[1..2], &empties(MAX_EMPTY_RUN)[..]].concat(), None),
    ];
    for (case, (rows, fault)) in cases.iter().enumerate() {
        let text = file_of(rows);
        let whole = read_lines(text.as_bytes()).map_err(|e| e.to_string());
        for zstd in [false, true] {
            for block_bytes in [4096, 1 << 20, BLOCK_BYTES] {
                let streamed = read_lines_streamed(text.as_bytes(), zstd, block_bytes);
                assert_eq!(streamed.map_err(|e| e.to_string()), whole, "case {case}, blocks of {block_bytes}");
            }
        }
        match fault {
            Some(fault) => {
                let message = whole.expect_err("refused");
                assert!(message.starts_with("charges/t.csv: ") && message.contains(fault), "{case}: {message}");
            }
            None => assert_eq!(whole.expect("read").len(), rows.len(), "case {case}"),
        }
    }
    // A header past the limit too, and one that never ends.
    let header = format!("record_id,{}\n", "x".repeat(MAX_LINE_BYTES));
    let message = read_lines(header.as_bytes()).expect_err("refused").to_string();
    assert!(message.contains("line 1: longer than"), "{message}");
    let endless = "x".repeat(3 * MAX_LINE_BYTES);
    let message = read_lines_streamed(endless.as_bytes(), false, 4096).expect_err("refused").to_string();
    assert!(message.contains("line 1: longer than"), "{message}");
}

#[test]
fn splits_at_newlines_into_chunks_that_cover_the_body() {
    let mut body = Vec::new();
    for i in 0..2000 {
        body.extend_from_slice(format!("r{i},\"a \"\"b\"\"\",x\n").as_bytes());
    }
    body.extend_from_slice(b"last,no newline");
    for chunk_bytes in [1, 7, 100, 4096] {
        let chunks = split(&body, 2, chunk_bytes);
        if chunk_bytes == 4096 {
            assert_eq!(chunks[1].offset, 4096 + 1 + memchr::memchr(b'\n', &body[4096..]).unwrap_or(0));
        }
        assert!(chunks.len() > 1);
        let mut expected_line = 2;
        let mut expected_offset = 0;
        for &Chunk { offset, line, end } in &chunks {
            assert_eq!(offset, expected_offset);
            assert!(body[offset..].starts_with(b"r") || body[offset..].starts_with(b"last"));
            assert_eq!(line, expected_line);
            expected_line += memchr::memchr_iter(b'\n', &body[offset..end]).count() as u64;
            expected_offset = end;
        }
        assert_eq!(expected_offset, body.len());
    }
}

/// Every line of `file` read a run of `run_lines` at a time, whole
/// (`split_bytes` `None`) or split by split (`records::split`).
fn read_lines_in_pieces(file: &InputFile, split_bytes: Option<u64>, run_lines: u64) -> Result<Lines> {
    let mut lines = Lines::new();
    let mut read = |pieces: Option<Pieces<'_>>| -> Result<()> {
        let Some(mut pieces) = pieces else { return Ok(()) };
        while !pieces.done() {
            lines.extend(pieces.next(run_lines, Collect::default)?.into_iter().flat_map(|s| s.lines));
        }
        Ok(())
    };
    match split_bytes {
        None => read(Pieces::open(file)?)?,
        Some(bytes) => {
            for split in crate::records::split::splits(&file.path, file.size, bytes)? {
                read(Pieces::open_split(file, &split)?)?;
            }
        }
    }
    Ok(lines)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Descriptions with line breaks (LF and CRLF), written by the csv
    /// crate's RFC 4180 writer: every record reads back as written,
    /// numbered by its first line, whole, in chunks, streamed in blocks
    /// and a run of lines at a time, however the cuts fall in its lines.
    #[test]
    fn records_whose_fields_span_lines_read_back_in_any_cut(
        records in proptest::collection::vec(
            (charge(), proptest::sample::select(vec!["", "\n", "\r\n", "\n\n", "a\nb,\"c\"\n"])),
            1..30,
        ),
        crlf in proptest::bool::ANY,
        cut in 1usize..300,
        run_lines in 1u64..9,
    ) {
        let records: Vec<[String; 6]> = records
            .into_iter()
            .map(|(mut record, breaks)| {
                record[3] = format!("{}{breaks}{}", record[3], record[3]);
                record
            })
            .collect();
        let bytes = written(&records, ::csv::QuoteStyle::Necessary, crlf, &[0, 1, 2, 3, 4, 5]);
        let mut line = 2;
        let expected: Lines = records
            .iter()
            .map(|record| {
                let entry = (line, Ok(record.to_vec()));
                line += 1 + record[3].matches('\n').count() as u64;
                entry
            })
            .collect();
        proptest::prop_assert_eq!(&read_lines(&bytes).unwrap(), &expected);
        proptest::prop_assert_eq!(&read_lines_in_chunks(&bytes, cut).unwrap(), &expected);
        proptest::prop_assert_eq!(&read_lines_streamed(&bytes, cut % 2 == 0, cut).unwrap(), &expected);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, &bytes).unwrap();
        let file = InputFile { path, size: bytes.len() as u64, ..charges_file() };
        proptest::prop_assert_eq!(&read_lines_in_pieces(&file, None, run_lines).unwrap(), &expected);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]

    /// A file read split by split hands over the lines, numbers and
    /// refusals of the whole file: a BOM, quoted fields, CRLF endings,
    /// empty and damaged lines, a last line without a newline.
    #[test]
    fn a_file_read_split_by_split_reads_as_the_whole_file(
        records in proptest::collection::vec(charge(), 0..40),
        crlf in proptest::bool::ANY,
        bom in proptest::bool::ANY,
        spoiled in proptest::collection::vec((proptest::num::usize::ANY, 0u8..3), 0..4),
        cut_last_newline in proptest::bool::ANY,
        split_bytes in 1u64..400,
        run_lines in 1u64..9,
    ) {
        let written = written(&records, ::csv::QuoteStyle::Necessary, crlf, &[0, 1, 2, 3, 4, 5]);
        let mut lines: Vec<Vec<u8>> = written.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        for (at, how) in spoiled {
            let at = 1 + at % lines.len();
            let line: &[u8] = match how {
                0 => b"\n",
                1 => b"\r\n",
                _ => b"x,\"open,1,2,3,4\n",
            };
            lines.insert(at.min(lines.len()), line.to_vec());
        }
        let mut bytes: Vec<u8> = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        bytes.extend(lines.concat());
        if cut_last_newline && bytes.ends_with(b"\n") {
            bytes.pop();
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, &bytes).unwrap();
        let file = InputFile { path, size: bytes.len() as u64, ..charges_file() };
        let whole = read_lines_in_pieces(&file, None, run_lines).unwrap();
        let split = read_lines_in_pieces(&file, Some(split_bytes), run_lines).unwrap();
        // A split cannot know that it starts inside a quoted field that
        // spans lines: the split before it refuses the record that runs
        // past its end (the file's error), and agrees with the whole file
        // up to there.
        match split.iter().position(|(_, entry)| matches!(entry, Err(reason) if reason.starts_with("unframed"))) {
            Some(refused) if split != whole => {
                proptest::prop_assert_eq!(&split[..refused], &whole[..refused]);
            }
            _ => proptest::prop_assert_eq!(split, whole),
        }
    }
}

/// A split of a file that no longer has the size it was split at is an
/// error naming the file, not rows of another file's lines.
#[test]
fn a_split_of_a_file_that_changed_is_an_error() {
    let text = file_of(&charges_rows(200));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(&path, &text).unwrap();
    let file = InputFile { path: path.clone(), size: text.len() as u64, ..charges_file() };
    let splits = crate::records::split::splits(&path, file.size, 1000).unwrap();
    assert!(splits.len() > 3, "{splits:?}");
    std::fs::write(&path, format!("{text}{}", charges_rows(1)[0])).unwrap();
    for split in &splits {
        let error = Pieces::open_split(&file, split).map(|_| ()).unwrap_err().chain();
        assert!(error.contains("t.csv") && error.contains("changed while being read"), "{error}");
    }
}
