//! Parquet files read without trusting them: every Parquet file telemeter
//! reads (raw inputs, resource files, a store's files, Spark's parts) goes
//! through [`read_frame`], or column chunk by column chunk through
//! [`decode_chunk`] (a rollup's columns, text as dictionary keys; the rows
//! of a records file a correction replaces, [`ParquetFile::read_picked`]),
//! which runs [`check_chunk`] before polars' decoders; and [`STATISTICS`],
//! those of every Parquet file telemeter writes.
//!
//! polars' Parquet decoders trust the file. A damaged page header (its
//! count of values or its size) makes a decoder ask for memory no process
//! can have, which aborts the process; other damage trips an assertion
//! (bit unpacking, bitmap slicing, dictionary keys). So each page's header
//! is checked against its row group before anything is decoded, and the
//! decoding runs under `catch_unwind`: a damaged file is an error naming
//! it, never a crash. A page whose writer kept its CRC-32 is checked
//! against it, so that a flipped bit in a value is an error too.
//!
//! Every file is read whole with `read(2)` first ([`read_whole`]), never
//! mapped: a file truncated under a map kills the process with SIGBUS, and
//! a file that changes while it is read is an error naming it. The store
//! checks those bytes against their sum, so no file is read twice.
//!
//! What is not checked: a file made to decompress into far more memory
//! than it takes on disk (a "zip bomb": row counts that agree with each
//! other everywhere and pages that run-length-encode billions of values).

use std::io::Cursor;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use polars::prelude::PlSmallStr;
use polars::prelude::{DataFrame, IntoColumn, ParallelStrategy, ParquetReader, SerReader, Series};
use polars_arrow::array::{Array, DictionaryArray, PrimitiveArray, Utf8ViewArray};
use polars_arrow::bitmap::Bitmap;
use polars_arrow::datatypes::{ArrowDataType, Field, IntegerType, Metadata, DTYPE_CATEGORICAL_NEW};
use polars_buffer::Buffer;
use polars_parquet::parquet::metadata::{ColumnChunkMetadata, FileMetadata, RowGroupMetadata};
use polars_parquet::parquet::read::read_metadata;
use polars_parquet::read::{column_iter_to_arrays, BasicDecompressor, Filter, PageReader};
use polars_parquet_format::thrift::protocol::TCompactInputProtocol;
use polars_parquet_format::{FileMetaData as ThriftFileMetadata, PageHeader, PageType};
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

/// The statistics of every Parquet file telemeter writes (the store's, the
/// Spark tasks' checked rows, `generate --format parquet`): polars' default
/// ones (minimum, maximum and null count of each page), with the text
/// minimums and maximums cut at polars' default 64 bytes. Fixed here: left
/// to polars, that cut comes from `POLARS_PARQUET_BINARY_STATISTICS_TRUNCATE_LEN`
/// in the environment, and the same inputs could give other bytes.
pub const STATISTICS: polars_parquet::write::StatisticsOptions = polars_parquet::write::StatisticsOptions {
    min_value: true,
    max_value: true,
    distinct_count: false,
    null_count: true,
    binary_statistics_truncate_length: Some(64),
};

/// Uncompressed bytes a data page may hold per row of its row group, on
/// average (plus [`PAGE_SLACK`]): far above any contract column's value.
const BYTES_PER_ROW: usize = 1 << 10;
/// Uncompressed bytes any page may hold beyond [`BYTES_PER_ROW`] per row.
const PAGE_SLACK: usize = 1 << 20;
/// Uncompressed bytes a dictionary page may hold beyond [`BYTES_PER_ROW`]
/// per row: a writer may store a column's whole dictionary (polars does for
/// categoricals) in every row group, used or not.
const DICTIONARY_SLACK: usize = 64 << 20;

/// Decodes under way in [`guarded`], on any thread.
static GUARDED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is inside [`guarded`].
    static GUARDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `decode` (polars' Parquet code) run under `catch_unwind`: a panic comes
/// back as the first line of its message. Counted in [`GUARDED`]
/// meanwhile, for [`is_caught_decode_panic`].
pub(crate) fn guarded<T>(decode: impl FnOnce() -> T) -> std::result::Result<T, String> {
    GUARDED.fetch_add(1, Ordering::SeqCst);
    let outer = GUARDING.with(|guarding| guarding.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode));
    GUARDING.with(|guarding| guarding.set(outer));
    GUARDED.fetch_sub(1, Ordering::SeqCst);
    outcome.map_err(|payload| {
        let message = match payload.downcast_ref::<String>() {
            Some(message) => message.as_str(),
            None => payload.downcast_ref::<&str>().copied().unwrap_or("a panic"),
        };
        format!("polars: {}", message.lines().next().unwrap_or_default())
    })
}

/// Whether the panic under way is polars tripping on a damaged file inside
/// a [`guarded`] decode: raised on the thread running the decode, or on
/// one of polars' own threads (named `polars-N`, where it decodes columns)
/// while a decode is under way. It is caught there and becomes the file's
/// error, its message included, so the binary's panic hook does not print
/// it too. Every other panic is printed as always.
pub(crate) fn is_caught_decode_panic() -> bool {
    GUARDED.load(Ordering::SeqCst) > 0
        && (GUARDING.with(std::cell::Cell::get)
            || std::thread::current().name().is_some_and(|name| name.starts_with("polars-")))
}

/// Wraps the process's panic hook (once) so that it skips a panic
/// [`is_caught_decode_panic`] says is caught and reported as a file's
/// error, and runs as before for every other. For the binary (whose hook
/// prints), and for the fuzz target (whose hook aborts on any panic).
pub(crate) fn quiet_caught_panics() {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !is_caught_decode_panic() {
                previous(info);
            }
        }));
    });
}

/// Why the footer of a Parquet file (`bytes`, the whole file) cannot be
/// handed to polars' footer reader, which sizes each list by the count
/// written before it: a damaged count asked for 136 GB in a fuzz run (an
/// abort). The footer is parsed first by polars-parquet-format's thrift
/// reader, which refuses a footer that would allocate more than 16 bytes
/// for each of its own (plus 1 MiB). Too short a file or a missing magic
/// is left to polars' reader, which names it.
fn check_footer(bytes: &[u8]) -> std::result::Result<(), String> {
    let Some(tail) = bytes.len().checked_sub(8).and_then(|at| bytes.get(at..)) else { return Ok(()) };
    if &tail[4..] != b"PAR1" {
        return Ok(());
    }
    let length = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    let footer = bytes.len().checked_sub(8 + length).and_then(|start| bytes.get(start..bytes.len() - 8));
    let Some(footer) = footer else { return Ok(()) };
    let budget = length.saturating_mul(16).saturating_add(1 << 20);
    ThriftFileMetadata::read_from_in_protocol(&mut TCompactInputProtocol::new(footer, budget))
        .map(|_| ())
        .map_err(|e| format!("its footer does not parse: {e}"))
}

/// Why the pages of one column chunk cannot be handed to polars' decoders,
/// read from their headers alone (nothing is decompressed): a header that
/// does not parse, a page past the chunk, a data page with more values
/// than its row group has rows, a flat column whose pages do not add up to
/// its row group, a page or dictionary larger than the row group can
/// need. The pages are walked as polars walks them: until they hold the
/// chunk's count of values. `bytes` is the whole file, `rows` the row
/// group's rows.
pub(crate) fn check_chunk(bytes: &[u8], meta: &ColumnChunkMetadata, rows: usize) -> std::result::Result<(), String> {
    let range = meta.byte_range();
    let chunk = usize::try_from(range.start)
        .ok()
        .zip(usize::try_from(range.end).ok())
        .and_then(|(start, end)| bytes.get(start..end))
        .ok_or("its pages lie past the end of the file")?;
    let flat = meta.descriptor().descriptor.max_rep_level == 0;
    let page_limit = rows.saturating_mul(BYTES_PER_ROW).saturating_add(PAGE_SLACK);
    let dictionary_limit = rows.saturating_mul(BYTES_PER_ROW).saturating_add(DICTIONARY_SLACK);
    let size = |n: i32| usize::try_from(n).map_err(|_| format!("a page header holds a negative count ({n})"));
    let (mut at, mut values) = (0usize, 0usize);
    while (values as u64) < meta.num_values().max(0) as u64 {
        let mut reader = Cursor::new(chunk.get(at..).ok_or("a page lies past its column chunk")?);
        let header = PageHeader::read_from_in_protocol(&mut TCompactInputProtocol::new(&mut reader, chunk.len()))
            .map_err(|e| format!("a page header does not parse: {e}"))?;
        let uncompressed = size(header.uncompressed_page_size)?;
        let body = at.saturating_add(reader.position() as usize);
        at = body.saturating_add(size(header.compressed_page_size)?);
        let Some(page) = chunk.get(body..at) else { return Err("a page lies past its column chunk".into()) };
        // The page's CRC-32, when its writer kept one (pyarrow's
        // write_page_checksum, Spark's parquet.page.write-checksum.enabled):
        // of the page's bytes as stored, after its header.
        if let Some(crc) = header.crc {
            let sum = crc32fast::hash(page);
            if sum != crc as u32 {
                return Err(format!(
                    "a page's bytes do not match its checksum (CRC-32 {:08x}, stored {:08x})",
                    sum, crc as u32
                ));
            }
        }
        let count = match header.type_ {
            PageType::DATA_PAGE => header.data_page_header.map(|page| page.num_values),
            PageType::DATA_PAGE_V2 => header.data_page_header_v2.map(|page| page.num_values),
            PageType::DICTIONARY_PAGE => {
                let count = size(header.dictionary_page_header.map_or(-1, |page| page.num_values))?;
                // A dictionary value takes at least one byte, plain-encoded.
                if uncompressed > dictionary_limit || count > uncompressed.max(1) {
                    return Err("its dictionary is larger than its row group".into());
                }
                continue;
            }
            _ => continue,
        };
        let count = size(count.unwrap_or(-1))?;
        if count > rows && flat || uncompressed > page_limit {
            return Err("a page is larger than its row group".into());
        }
        values = values.saturating_add(count);
    }
    if flat && values != rows {
        return Err(format!("its pages hold {values} values for {rows} rows"));
    }
    Ok(())
}

/// The column chunk `meta` of a row group of `rows` rows in the file
/// `bytes`, checked ([`check_chunk`]) and decoded as `field` under
/// [`guarded`]: all its rows, or those `filter` keeps (polars' decoders
/// skip the others' values without building them).
pub(crate) fn decode_chunk(
    bytes: &Buffer<u8>,
    meta: &ColumnChunkMetadata,
    field: Field,
    rows: usize,
    filter: Option<Filter>,
) -> std::result::Result<Box<dyn Array>, String> {
    check_chunk(bytes, meta, rows)?;
    let expected = match &filter {
        Some(Filter::Mask(mask)) => mask.set_bits(),
        Some(Filter::Range(range)) => range.len(),
        _ => rows,
    };
    let range = meta.byte_range();
    let chunk = bytes.clone().sliced(range.start as usize..range.end as usize);
    let pages = PageReader::new(Cursor::new(chunk), meta, vec![], usize::MAX);
    let decompressor = BasicDecompressor::new(pages, vec![]);
    let primitive = &meta.descriptor().descriptor.primitive_type;
    let decoded = guarded(|| column_iter_to_arrays(vec![decompressor], vec![primitive], field, filter))
        .map_err(|panic| format!("it does not decode ({panic})"))?
        .map_err(|e| format!("it does not decode ({e})"))?;
    let (mut arrays, _) = decoded;
    match (arrays.pop(), arrays.is_empty()) {
        (Some(array), true) if array.len() == expected => Ok(array),
        _ => Err(format!("it does not decode to one array of {expected} rows")),
    }
}

/// The chunk of the top-level column `name` in row group `group`.
pub(crate) fn column_chunk<'g>(group: &'g RowGroupMetadata, name: &str) -> Option<&'g ColumnChunkMetadata> {
    group.parquet_columns().iter().find(|c| c.descriptor().path_in_schema.as_slice() == [name])
}

/// [`decode_chunk`] of all its rows, a text column as a dictionary: 32-bit
/// keys into the row group's distinct values ([`keyed_text`]), not a
/// string view per row. A text column whose pages are not all
/// dictionary-encoded (an older writer's) is read as strings and keyed
/// here; there, a null is an error.
pub(crate) fn decode_chunk_keyed(
    bytes: &Buffer<u8>,
    meta: &ColumnChunkMetadata,
    field: &Field,
    rows: usize,
) -> std::result::Result<Box<dyn Array>, String> {
    if !matches!(field.dtype, ArrowDataType::Utf8View | ArrowDataType::LargeUtf8 | ArrowDataType::Utf8) {
        return decode_chunk(bytes, meta, field.clone(), rows, None);
    }
    let mut metadata = Metadata::new();
    metadata.insert(DTYPE_CATEGORICAL_NEW.into(), PlSmallStr::EMPTY);
    let as_keys = Field::new(field.name.clone(), keyed_text(), field.is_nullable).with_metadata(metadata);
    match decode_chunk(bytes, meta, as_keys, rows, None) {
        Ok(array) => Ok(array),
        Err(_) => {
            let strings = Field::new(field.name.clone(), ArrowDataType::Utf8View, field.is_nullable);
            decode_chunk(bytes, meta, strings, rows, None).and_then(|array| keyed_strings(array.as_ref()))
        }
    }
}

/// The Arrow type [`decode_chunk_keyed`] reads text as: 32-bit keys into
/// its values.
pub(crate) fn keyed_text() -> ArrowDataType {
    ArrowDataType::Dictionary(IntegerType::UInt32, Box::new(ArrowDataType::Utf8View), false)
}

/// A text column read as strings, as a dictionary of its distinct values
/// (in order of first appearance) and each row's key.
fn keyed_strings(array: &dyn Array) -> std::result::Result<Box<dyn Array>, String> {
    let strings = array.as_any().downcast_ref::<Utf8ViewArray>().ok_or("it is not text")?;
    if strings.null_count() > 0 {
        return Err("it holds a null".into());
    }
    let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
    let mut values: Vec<&str> = Vec::new();
    let keys: Vec<u32> = strings
        .values_iter()
        .map(|text| {
            *ids.entry(text).or_insert_with(|| {
                values.push(text);
                values.len() as u32 - 1
            })
        })
        .collect();
    let values = Utf8ViewArray::from_slice_values(values).boxed();
    DictionaryArray::try_new(keyed_text(), PrimitiveArray::from_vec(keys), values)
        .map(|array| array.boxed())
        .map_err(|e| e.to_string())
}

/// The file at `path`, read whole with `read(2)`, never mapped: a file
/// truncated while a map of it is read kills the process with SIGBUS. A
/// file that changes while it is read (truncated, grown, or rewritten in
/// place) is an error naming it, never a prefix of it: its size and
/// modification time after the read must be those it had when opened,
/// and exactly that many bytes must have been read.
fn read_whole(path: &Path) -> Result<Vec<u8>> {
    let handle = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let snapshot = |handle: &std::fs::File| {
        let meta = handle.metadata().map_err(|e| Error::io(path, e))?;
        Ok::<_, Error>((meta.len(), meta.modified().ok()))
    };
    let (size, modified) = snapshot(&handle)?;
    let room = usize::try_from(size).ok().and_then(|size| size.checked_add(1));
    let room = room.ok_or_else(|| Error::io(path, format!("too large to read ({size} bytes)")))?;
    // One byte more than its size: a file that grew is seen by its read.
    let mut bytes = Vec::with_capacity(room);
    std::io::Read::read_to_end(&mut std::io::Read::take(&handle, room as u64), &mut bytes)
        .map_err(|e| Error::io(path, e))?;
    let (now, now_modified) = snapshot(&handle)?;
    let read = bytes.len() as u64;
    let what = if now != size {
        format!("{size} bytes when opened, {now} now")
    } else if read != size {
        format!("{size} bytes when opened, {read} read")
    } else if now_modified != modified {
        "modified since it was opened".to_owned()
    } else {
        return Ok(bytes);
    };
    Err(Error::changed_while_read(path, what))
}

/// Which rows of a file to read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Rows {
    /// Every row.
    #[default]
    All,
    /// Rows `offset..offset + len` (fewer at the end of the file).
    Slice { offset: usize, len: usize },
}

/// A Parquet file opened and its footer read, not yet decoded.
pub(crate) struct ParquetFile<'p> {
    path: &'p Path,
    bytes: Buffer<u8>,
    metadata: Arc<FileMetadata>,
}

impl<'p> ParquetFile<'p> {
    /// Opens `path` and reads its footer: `None` for a 0-byte file.
    pub(crate) fn open(path: &'p Path) -> Result<Option<ParquetFile<'p>>> {
        ParquetFile::open_checked(path, |_| Ok(()))
    }

    /// [`ParquetFile::open`], the file's bytes (empty for a 0-byte file)
    /// handed to `check` before anything of them is parsed: the store
    /// checks them against their sum.
    pub(crate) fn open_checked(
        path: &'p Path,
        check: impl FnOnce(&[u8]) -> Result<()>,
    ) -> Result<Option<ParquetFile<'p>>> {
        let bytes = read_whole(path)?;
        if bytes.is_empty() {
            check(&[])?;
            return Ok(None);
        }
        check(&bytes)?;
        let bytes = Buffer::from_vec(bytes);
        check_footer(&bytes).map_err(|why| unreadable(path, why))?;
        // polars' footer reader unwraps some damaged fields.
        let metadata = guarded(|| read_metadata(&mut Cursor::new(&bytes[..])))
            .map_err(|panic| unreadable(path, format!("its footer does not parse ({panic})")))?
            .map_err(|e| unreadable(path, e))?;
        let total = metadata.row_groups.iter().try_fold(0usize, |sum, group| sum.checked_add(group.num_rows()));
        if total != Some(metadata.num_rows) {
            let total = total.map_or("more than 2^64".to_owned(), |total| total.to_string());
            return Err(unreadable(
                path,
                format!("its row groups hold {total} rows, its footer says {}", metadata.num_rows),
            ));
        }
        Ok(Some(ParquetFile { path, bytes, metadata: Arc::new(metadata) }))
    }

    /// The file's bytes and its footer, for a reader of its own
    /// that checks each chunk with [`check_chunk`].
    pub(crate) fn into_parts(self) -> (Buffer<u8>, FileMetadata) {
        (self.bytes, Arc::unwrap_or_clone(self.metadata))
    }

    /// Its rows, from its footer.
    pub(crate) fn num_rows(&self) -> usize {
        self.metadata.num_rows
    }

    /// The rows of each of its row groups, in file order (they add up to
    /// [`ParquetFile::num_rows`]).
    pub(crate) fn row_groups(&self) -> impl Iterator<Item = usize> + '_ {
        self.metadata.row_groups.iter().map(|group| group.num_rows())
    }

    /// The names of the file's top-level columns, in file order.
    pub(crate) fn column_names(&self) -> Vec<String> {
        self.metadata.schema().fields().iter().map(|field| field.name().to_owned()).collect()
    }

    /// `columns` (every column when `None`) of `rows` as a frame, each page
    /// of what is read checked first ([`check_chunk`]) and polars' decoding
    /// run under `catch_unwind`. A column missing from the file is an error
    /// of polars'; callers name missing columns from
    /// [`ParquetFile::column_names`] first.
    pub(crate) fn read(&self, columns: Option<&[&str]>, rows: Rows) -> Result<DataFrame> {
        let (from, to) = match rows {
            Rows::All => (0, self.metadata.num_rows),
            Rows::Slice { offset, len } => (offset, offset.saturating_add(len)),
        };
        let mut first = 0;
        let mut groups = 0..0;
        for (index, rows) in self.row_groups().enumerate() {
            let (start, end) = (first, first + rows);
            first = end;
            if end > from && start < to {
                groups = if groups.is_empty() { index..index + 1 } else { groups.start..index + 1 };
            }
        }
        let names = self.names(columns);
        self.check(&names, groups)?;
        let mut reader = ParquetReader::new(Cursor::new(&self.bytes[..]));
        reader.set_metadata(self.metadata.clone());
        if columns.is_some() {
            reader = reader.with_columns(Some(names));
        }
        if let Rows::Slice { offset, len } = rows {
            reader = reader.with_slice(Some((offset, len)));
        }
        let total = self.metadata.num_rows;
        self.decode(reader, to.min(total) - from.min(total))
    }

    /// `columns` of the row groups `groups` (a range of their indexes) as
    /// one frame, checked as [`ParquetFile::read`] checks, decoded on this
    /// thread: for readers that read a file's parts in parallel.
    pub(crate) fn read_row_groups(&self, columns: &[&str], groups: Range<usize>) -> Result<DataFrame> {
        let names = self.names(Some(columns));
        self.check(&names, groups.clone())?;
        let mut metadata = FileMetadata::clone(&self.metadata);
        metadata.row_groups = metadata.row_groups.get(groups).map(<[_]>::to_vec).unwrap_or_default();
        metadata.num_rows = metadata.row_groups.iter().map(|group| group.num_rows()).sum();
        let mut reader = ParquetReader::new(Cursor::new(&self.bytes[..]))
            .with_columns(Some(names))
            .read_parallel(ParallelStrategy::None);
        let rows = metadata.num_rows;
        reader.set_metadata(Arc::new(metadata));
        self.decode(reader, rows)
    }

    /// `columns` of the rows `picked` (ascending, counted from the first
    /// row of the row groups `groups`) as one frame of `picked.len()`
    /// rows, checked as [`ParquetFile::read`] checks: only the picked rows
    /// are decoded, the others' values skipped in their pages, so a few
    /// rows of a large part cost little more than its decompression.
    pub(crate) fn read_picked(&self, columns: &[&str], groups: Range<usize>, picked: &[usize]) -> Result<DataFrame> {
        let path = self.path;
        // Each row group's mask of the picked rows it holds, if any.
        let mut masks: Vec<(usize, Bitmap)> = Vec::new();
        let (mut first, mut rest) = (0usize, picked);
        for index in groups {
            let Some(group) = self.metadata.row_groups.get(index) else { break };
            let end = first + group.num_rows();
            let within = rest.partition_point(|&row| row < end);
            if within > 0 {
                let mut mask = vec![false; group.num_rows()];
                for &row in &rest[..within] {
                    mask[row - first] = true;
                }
                masks.push((index, Bitmap::from_iter(mask)));
            }
            (first, rest) = (end, &rest[within..]);
        }
        if !rest.is_empty() {
            return Err(unreadable(path, format!("row {} is past its {first} rows", rest[0] + 1)));
        }
        let fields = self.fields(columns)?;
        let mut out = Vec::with_capacity(columns.len());
        for (&name, field) in columns.iter().zip(fields) {
            let mut chunks = Vec::with_capacity(masks.len());
            for (index, mask) in &masks {
                let group = &self.metadata.row_groups[*index];
                let meta = self.chunk_of(group, name)?;
                let filter = Some(Filter::Mask(mask.clone()));
                let array = decode_chunk(&self.bytes, meta, field.clone(), group.num_rows(), filter)
                    .map_err(|why| unreadable(path, format!("column '{name}': {why}")))?;
                chunks.push(array);
            }
            let series = match chunks.is_empty() {
                true => Series::new_empty(name.into(), &polars::prelude::DataType::from_arrow_field(&field)),
                false => Series::from_arrow_chunks(name.into(), chunks).map_err(|e| unreadable(path, e))?,
            };
            out.push(series.into_column());
        }
        DataFrame::new(picked.len(), out).map_err(|e| unreadable(path, e))
    }

    /// Column `name` of each row group, in file order, read as
    /// [`decode_chunk_keyed`] reads it (text as dictionary keys).
    pub(crate) fn read_column_keyed(&self, name: &str) -> Result<Vec<Box<dyn Array>>> {
        let field = self.fields(&[name])?.remove(0);
        let mut out = Vec::with_capacity(self.metadata.row_groups.len());
        for group in &self.metadata.row_groups {
            let meta = self.chunk_of(group, name)?;
            let array = decode_chunk_keyed(&self.bytes, meta, &field, group.num_rows())
                .map_err(|why| unreadable(self.path, format!("column '{name}': {why}")))?;
            out.push(array);
        }
        Ok(out)
    }

    /// The columns declared UUID (16 bytes, as DuckDB writes its `UUID`
    /// type), which are read as their text (`8-4-4-4-12` hex digits).
    pub(crate) fn uuid_columns(&self) -> Vec<String> {
        use polars_parquet::parquet::schema::types::{ParquetType, PrimitiveLogicalType};
        let fields = self.metadata.schema().fields().iter();
        fields
            .filter_map(|field| match field {
                ParquetType::PrimitiveType(column) if column.logical_type == Some(PrimitiveLogicalType::Uuid) => {
                    Some(column.field_info.name.to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// The first of columns `names` declared a DECIMAL of more than 38
    /// digits, which polars does not read: its name, precision and scale.
    pub(crate) fn wide_decimal(&self, names: &[&str]) -> Option<(String, usize, usize)> {
        use polars_parquet::parquet::schema::types::{ParquetType, PrimitiveConvertedType, PrimitiveLogicalType};
        self.metadata.schema().fields().iter().find_map(|field| {
            let ParquetType::PrimitiveType(column) = field else { return None };
            if !names.contains(&column.field_info.name.as_str()) {
                return None;
            }
            let (precision, scale) = match (column.logical_type, column.converted_type) {
                (Some(PrimitiveLogicalType::Decimal(precision, scale)), _)
                | (_, Some(PrimitiveConvertedType::Decimal(precision, scale))) => (precision, scale),
                _ => return None,
            };
            (precision > 38).then(|| (column.field_info.name.to_string(), precision, scale))
        })
    }

    /// The Arrow fields of columns `names`, in order, from the footer's
    /// schema (parsed once).
    fn fields(&self, names: &[&str]) -> Result<Vec<Field>> {
        let schema = guarded(|| polars_parquet::read::infer_schema(&self.metadata))
            .map_err(|panic| unreadable(self.path, format!("its schema does not parse ({panic})")))?
            .map_err(|e| unreadable(self.path, e))?;
        let field =
            |name: &&str| schema.get(name).cloned().ok_or_else(|| unreadable(self.path, format!("no column '{name}'")));
        names.iter().map(field).collect()
    }

    /// The chunk of column `name` in row group `group`.
    fn chunk_of<'g>(&self, group: &'g RowGroupMetadata, name: &str) -> Result<&'g ColumnChunkMetadata> {
        column_chunk(group, name).ok_or_else(|| unreadable(self.path, format!("no column '{name}'")))
    }

    /// `columns`' names, every column's when `None`.
    fn names(&self, columns: Option<&[&str]>) -> Vec<String> {
        match columns {
            Some(columns) => columns.iter().map(|c| c.to_string()).collect(),
            None => self.column_names(),
        }
    }

    /// Checks every page of the columns `names` in the row groups `groups`
    /// ([`check_chunk`]).
    fn check(&self, names: &[String], groups: Range<usize>) -> Result<()> {
        for group in self.metadata.row_groups.get(groups).unwrap_or_default() {
            for name in names {
                for meta in group.columns_under_root_iter(name).into_iter().flatten() {
                    check_chunk(&self.bytes, meta, group.num_rows())
                        .map_err(|why| unreadable(self.path, format!("column '{name}': {why}")))?;
                }
            }
        }
        Ok(())
    }

    /// What `reader` reads (`rows` rows, by the footer), a panic in polars'
    /// decoders an error, and so is a column of another length: built
    /// without debug assertions, polars' decoders can give a damaged
    /// page's column fewer values than its row group's rows (a column of
    /// none, in the fuzz corpus), which a reader indexing the frame's
    /// rows would run past.
    fn decode(&self, reader: ParquetReader<Cursor<&[u8]>>, rows: usize) -> Result<DataFrame> {
        let frame = match guarded(|| reader.finish()) {
            Ok(frame) => frame.map_err(|e| unreadable(self.path, e))?,
            // polars decodes on threads of its own: one it cannot start is
            // the process's limits, not damage in the file.
            Err(panic) if panic.contains("spawn") => {
                return Err(Error::Limit(format!(
                    "{}: cannot decode it: {panic}; raise the process's memory or process limit \
                     (ulimit -v, ulimit -u)",
                    self.path.display()
                )))
            }
            Err(panic) => return Err(unreadable(self.path, format!("its pages do not decode ({panic})"))),
        };
        for column in frame.columns() {
            if column.len() != rows {
                let (name, values) = (column.name(), column.len());
                let why = format!("its pages do not decode (column '{name}': {values} values for {rows} rows)");
                return Err(unreadable(self.path, why));
            }
        }
        Ok(frame)
    }
}

/// Reads `columns` (every column when `None`) of `rows` of the Parquet file
/// at `path` ([`ParquetFile::read`]); a 0-byte file is an error here.
pub(crate) fn read_frame(path: &Path, columns: Option<&[&str]>, rows: Rows) -> Result<DataFrame> {
    match ParquetFile::open(path)? {
        Some(file) => file.read(columns, rows),
        None => Err(unreadable(path, "the file is empty")),
    }
}

/// The error for a file that is not Parquet or is damaged.
fn unreadable(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::io(path, format!("not a readable Parquet file: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside [`guarded`] comes back as its first line; only a
    /// panic on the guarded thread (or polars' own) counts as caught.
    #[test]
    fn a_guarded_panic_is_its_message_and_only_it_is_quiet() {
        assert_eq!(guarded(|| 7), Ok(7));
        assert_eq!(guarded(|| -> u8 { panic!("a damaged page\nmore") }), Err("polars: a damaged page".to_owned()));
        assert_eq!(guarded(is_caught_decode_panic), Ok(true));
        assert!(!is_caught_decode_panic(), "outside a guarded decode");
        // Another thread while this one decodes: not polars', not quiet.
        let other = guarded(|| std::thread::spawn(is_caught_decode_panic).join().unwrap_or(true));
        assert_eq!(other, Ok(false));
        let polars = std::thread::Builder::new().name("polars-7".into());
        let pool = guarded(|| polars.spawn(is_caught_decode_panic).is_ok_and(|t| t.join().unwrap_or(false)));
        assert_eq!(pool, Ok(true));
    }

    /// A file of several row groups and pages: text of few values (so
    /// dictionary-encoded), a nullable text, integers, decimals and times.
    fn written(dir: &Path, rows: usize) -> std::path::PathBuf {
        use polars::prelude::{
            DataType, Int128Chunked, IntoColumn, IntoSeries, NamedFrom, ParquetWriter, Series, TimeUnit,
        };
        let text: Vec<String> = (0..rows).map(|i| format!("file-{}.csv", i / 700)).collect();
        let maybe: Vec<Option<String>> = (0..rows).map(|i| (i % 3 != 0).then(|| format!("v{}", i % 11))).collect();
        let line: Vec<i64> = (0..rows as i64).map(|i| i * 7 + 1).collect();
        let amount = Int128Chunked::from_vec("amount".into(), (0..rows as i128).map(|i| i * 1_000_003 - 5).collect())
            .into_decimal_unchecked(38, 9)
            .into_series();
        let time = Series::new("time".into(), (0..rows as i64).map(|i| i * 1_000_000_007).collect::<Vec<_>>())
            .cast(&DataType::Datetime(TimeUnit::Nanoseconds, None))
            .expect("a time column");
        let mut frame = DataFrame::new(
            rows,
            vec![
                Series::new("text".into(), text).into_column(),
                Series::new("maybe".into(), maybe).into_column(),
                Series::new("line".into(), line).into_column(),
                amount.into_column(),
                time.into_column(),
            ],
        )
        .expect("a frame");
        let path = dir.join("rows.parquet");
        let file = std::fs::File::create(&path).expect("create");
        ParquetWriter::new(file)
            .with_row_group_size(Some(1000))
            .with_data_page_size(Some(2048))
            .finish(&mut frame)
            .expect("write");
        path
    }

    /// Rows picked out of their row groups read as the same rows of the
    /// whole file, for every column type; a text column read as keys
    /// names each row's value.
    #[test]
    fn picked_rows_and_keyed_text_read_as_the_whole_file_does() {
        use polars::prelude::{Column, IdxCa};
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = written(dir.path(), 4321);
        let file = ParquetFile::open(&path).expect("open").expect("not empty");
        let columns = ["text", "maybe", "line", "amount", "time"];
        let whole = file.read(Some(&columns), Rows::All).expect("read");
        // polars balances its row groups: about 1000 rows each.
        let sizes: Vec<usize> = file.row_groups().collect();
        assert!(sizes.len() >= 4, "{sizes:?}");
        let picks: [Vec<usize>; 4] =
            [vec![], vec![0, 999, 1000, 1001, 4320], (0..4321).step_by(97).collect(), (1000..2000).collect()];
        for picked in picks {
            // Every row group, and a range that starts past the first.
            for groups in [0..sizes.len(), 1..3] {
                let first: usize = sizes[..groups.start].iter().sum();
                let end: usize = first + sizes[groups.clone()].iter().sum::<usize>();
                let picked: Vec<usize> = picked.iter().filter(|&&r| r >= first && r < end).map(|r| r - first).collect();
                let got = file.read_picked(&columns, groups, &picked).expect("read picked");
                let index = IdxCa::from_vec("".into(), picked.iter().map(|&r| (r + first) as _).collect());
                let expected: Vec<Column> = whole.columns().iter().map(|c| c.take(&index).expect("take")).collect();
                assert_eq!(got.height(), picked.len());
                for (got, expected) in got.columns().iter().zip(&expected) {
                    assert_eq!(got.dtype(), expected.dtype(), "{}", got.name());
                    assert!(
                        got.as_materialized_series().equals_missing(expected.as_materialized_series()),
                        "{}",
                        got.name()
                    );
                }
            }
        }
        let past = file.read_picked(&columns, 0..1, &[sizes[0]]).expect_err("a row past the row groups");
        let why = format!("row {} is past its {} rows", sizes[0] + 1, sizes[0]);
        let past = std::error::Error::source(&past).map(ToString::to_string).unwrap_or_default();
        assert!(past.contains(&why), "{past}");
        // Text as keys: each row's key names its value.
        let keyed = file.read_column_keyed("text").expect("keyed");
        assert_eq!(keyed.len(), sizes.len());
        let texts = whole.column("text").and_then(|c| c.str().cloned()).expect("text");
        let mut row = 0;
        for array in &keyed {
            let array = array.as_any().downcast_ref::<DictionaryArray<u32>>().expect("keys");
            let values = array.values().as_any().downcast_ref::<Utf8ViewArray>().expect("values");
            for key in array.keys().values_iter() {
                assert_eq!(Some(values.value(*key as usize)), texts.get(row));
                row += 1;
            }
        }
        assert_eq!(row, 4321);
    }
}
