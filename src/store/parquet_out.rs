//! The store's Parquet writer: Arrow columns made from our own rows, each
//! with the encoding chosen here, encoded and compressed on the threads,
//! then written row group by row group through polars' Parquet crate.
//!
//! polars' `ParquetWriter` decides each column's encoding itself: for every
//! string and decimal column of every row group it estimates the
//! cardinality, and when low enough it hashes every value into a dictionary
//! (`cast_to_dictionary`); then one thread compresses the pages while it
//! writes them. For the store's columns the answer is known before: text
//! columns are few distinct values (accounts, products, countries, codes,
//! the source file) except `record_id`. Here a text column's dictionary is
//! made from the rows as they are gathered (an [`Interner`], with the
//! slices seen before found by their address, or by an id the caller gives
//! with the value: rollups' interned strings, enums), integers keep polars' cheap
//! min-max dictionary check, and pages are compressed (LZ4_RAW) by the
//! thread that encoded them. The keys of a dictionary column are encoded
//! by [`super::rle`] (the bytes polars' encoder makes, in less than half
//! its time). The files are the Parquet polars wrote: same schema, same
//! Arrow schema metadata (taken from polars' own mapping of the column
//! types), same statistics, dictionary pages where they were; the codec is
//! LZ4_RAW (an older store written with Snappy reads the same).
//!
//! Decimal columns take a dictionary too when at most 3/4 of a row group's
//! values are distinct (amounts and durations repeat: a rate times whole
//! minutes), and are then not compressed: the keys are bit-packed already,
//! and LZ4 over 16-byte plain values was the ingest's largest single cost.
//! Mostly distinct decimals stay plain and compressed.

use std::path::{Path, PathBuf};

use polars_arrow::array::{Array, DictionaryArray, PrimitiveArray, Utf8ViewArray};
use polars_arrow::datatypes::{ArrowDataType, ArrowSchema, IntegerType};
use polars_parquet::parquet::metadata::Descriptor;
use polars_parquet::parquet::page::{DataPage, DataPageHeader, DataPageHeaderV1, DictPage};
use polars_parquet::parquet::schema::types::{PhysicalType, PrimitiveType};
use polars_parquet::parquet::schema::Repetition;
use polars_parquet::parquet::statistics::{FixedLenStatistics, ParquetStatistics};
use polars_parquet::parquet::CowBuffer;
use polars_parquet::write::{
    array_to_columns, compress, fallible_streaming_iterator, write_def_levels, CompressedPage, CompressionOptions,
    DynIter, DynStreamingIterator, Encoding, FileWriter, Page, ParquetType, Version, WriteOptions,
};
use rayon::prelude::*;

use crate::direct::DirectWriter;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::intern::Interner;
use crate::records::{Country, Direction, Product};

/// One column of a row group, with its encoding and codec.
pub(super) struct Column {
    values: Values,
    encoding: Encoding,
    /// [`OPTIONS`]' codec, or none for values LZ4 does not shrink
    /// ([`Column::ids`], [`Column::instants`]): compressing them costs
    /// LZ4 time out of proportion to the few bytes it saves.
    compression: CompressionOptions,
}

/// Polars' rules for a column's dictionary, which the store's files keep
/// (they are the files polars wrote). Any column: no dictionary when a row
/// group of more than [`SMALL_GROUP`] rows has over 3/4 of its values
/// distinct (for text, decimals and spread integers, by polars' estimate
/// of the distinct values; here by their exact count).
fn polars_takes_dictionary(rows: usize, distinct: usize) -> bool {
    rows <= SMALL_GROUP || distinct * 4 <= rows * 3
}

/// The row groups in which polars takes a dictionary whatever the values.
const SMALL_GROUP: usize = 128;

/// Integers within this much of each other go to polars' exact min-max
/// check (a bitmap of the values seen, `u16::MAX` for Int64), which takes
/// a dictionary when at most [`MIN_MAX_FEW`] values are distinct or fewer
/// than 3/4 of them; integers spread wider, to its estimate
/// ([`polars_takes_dictionary`]).
const MIN_MAX_SPREAD: i128 = u16::MAX as i128;

/// See [`MIN_MAX_SPREAD`] (polars' `DELTA_THRESHOLD` for Int64).
const MIN_MAX_FEW: usize = 2048;

impl Column {
    /// A text column: dictionary-encoded (the dictionary in order of first
    /// appearance), unless most of its values are distinct, then plain
    /// ([`polars_takes_dictionary`]).
    pub(super) fn text<'a>(values: impl Iterator<Item = &'a str>, rows: usize) -> Result<Column> {
        let mut column = TextColumn::new(rows);
        for value in values {
            column.push(value);
        }
        column.finish()
    }

    /// A text column of distinct values (ids): plain, except in a row
    /// group of at most [`SMALL_GROUP`] rows, where polars takes a dictionary;
    /// not compressed (random ids: LZ4 barely shrinks them).
    pub(super) fn ids<'a>(values: impl Iterator<Item = &'a str>, rows: usize) -> Result<Column> {
        if polars_takes_dictionary(rows, rows) {
            return Column::text(values, rows);
        }
        Ok(Column { compression: CompressionOptions::Uncompressed, ..Column::plain_text(values) })
    }

    /// A text column written plain.
    fn plain_text<'a>(values: impl Iterator<Item = &'a str>) -> Column {
        let array: Utf8ViewArray = polars_arrow::array::MutableBinaryViewArray::<str>::from_values_iter(values).into();
        Column { values: Values::Arrow(array.boxed()), encoding: Encoding::Plain, compression: OPTIONS.compression }
    }

    /// An Int64 column of Arrow type `dtype` encoded as `encoding` (one of
    /// the integer encodings of [`super::layout::ColumnEncoding`]).
    pub(super) fn integers_as(
        encoding: super::layout::ColumnEncoding,
        values: Vec<i64>,
        dtype: &ArrowDataType,
    ) -> Result<Column> {
        use super::layout::ColumnEncoding as Rule;
        Ok(match encoding {
            Rule::Int64 => Column::int64(values, dtype),
            Rule::Lines => Column::lines(values, dtype),
            Rule::Slots => Column::slots(values, dtype),
            Rule::Instants => Column::instants(values, dtype),
            other => return Err(Error::Internal(format!("{other:?} is not an encoding of integers"))),
        })
    }

    /// An Int64 column of Arrow type `dtype` (a timestamp, or plain Int64):
    /// dictionary-encoded when polars' min-max check finds it worth it
    /// (slots, record counts, the lines of a small file), else plain; the
    /// check is one pass over the values, no hashing.
    pub(super) fn int64(values: Vec<i64>, dtype: &ArrowDataType) -> Column {
        Column::integers(values, dtype, Encoding::RleDictionary, OPTIONS.compression)
    }

    /// Int64 values of Arrow type `dtype`, handed to polars to encode.
    fn integers(
        values: Vec<i64>,
        dtype: &ArrowDataType,
        encoding: Encoding,
        compression: CompressionOptions,
    ) -> Column {
        Column {
            values: Values::Arrow(PrimitiveArray::from_vec(values).to(dtype.clone()).boxed()),
            encoding,
            compression,
        }
    }

    /// The source lines of records (Int64 of Arrow type `dtype`): as
    /// [`Column::int64`], except that lines spread wider than polars'
    /// min-max check looks at ([`MIN_MAX_SPREAD`]), in a row group of more
    /// than [`SMALL_GROUP`] rows, are written plain without asking polars: it would estimate
    /// their distinct count (a HyperLogLog pass over the row group, half a
    /// percent of an ingest's time) to find them mostly distinct, as the
    /// lines of a file are, and write them plain.
    pub(super) fn lines(values: Vec<i64>, dtype: &ArrowDataType) -> Column {
        let (low, high) = values.iter().fold((i64::MAX, i64::MIN), |(low, high), &v| (low.min(v), high.max(v)));
        let spread = i128::from(high) - i128::from(low);
        if values.len() <= SMALL_GROUP || spread <= MIN_MAX_SPREAD {
            return Column::int64(values, dtype);
        }
        Column::integers(values, dtype, Encoding::Plain, OPTIONS.compression)
    }

    /// Values in order (a rollup file's slots, Int64 of Arrow type
    /// `dtype`): as [`Column::int64`] (the same dictionary or plain
    /// values, the same bytes), but with the dictionary made here when
    /// the values do not go down: the distinct values in order, keys
    /// counting up. Polars would find that dictionary only after a
    /// min-max pass, a HyperLogLog estimate of the distinct values (where
    /// they spread over more than [`MIN_MAX_SPREAD`]) and a hashing of every value.
    /// Where the estimate and the exact count fall on either side of
    /// polars' 3/4 rule, the exact count decides.
    pub(super) fn slots(values: Vec<i64>, dtype: &ArrowDataType) -> Column {
        let (Some(&low), Some(&high)) = (values.first(), values.last()) else { return Column::int64(values, dtype) };
        if !values.is_sorted() {
            return Column::int64(values, dtype);
        }
        let mut distinct: Vec<i64> = Vec::new();
        let keys: Vec<u32> = values
            .iter()
            .map(|&value| {
                if distinct.last() != Some(&value) {
                    distinct.push(value);
                }
                distinct.len() as u32 - 1
            })
            .collect();
        let (rows, n) = (values.len(), distinct.len());
        let worth = if i128::from(high) - i128::from(low) <= MIN_MAX_SPREAD {
            n <= MIN_MAX_FEW || n * 4 < rows * 3
        } else {
            polars_takes_dictionary(rows, n)
        };
        if !worth {
            return Column::integers(values, dtype, Encoding::Plain, OPTIONS.compression);
        }
        let dictionary_type = ArrowDataType::Dictionary(IntegerType::UInt32, Box::new(dtype.clone()), false);
        let dictionary = PrimitiveArray::from_vec(distinct).to(dtype.clone()).boxed();
        match DictionaryArray::try_new(dictionary_type, PrimitiveArray::from_vec(keys), dictionary) {
            Ok(array) => Column {
                values: Values::Arrow(array.boxed()),
                encoding: Encoding::RleDictionary,
                compression: OPTIONS.compression,
            },
            Err(_) => Column::int64(values, dtype),
        }
    }

    /// The instants of records (nanoseconds, of Arrow type `dtype`): plain
    /// and not compressed (mostly distinct: LZ4 kept all of their bytes).
    pub(super) fn instants(values: Vec<i64>, dtype: &ArrowDataType) -> Column {
        Column::integers(values, dtype, Encoding::Plain, CompressionOptions::Uncompressed)
    }

    /// A decimal column (unscaled values, of a `Decimal(38, _)` field):
    /// by a dictionary of its values, not compressed
    /// ([`decimal_dictionary_pages`]), unless most of them are distinct,
    /// then plain and compressed ([`decimal_pages`]).
    pub(super) fn decimal(values: Vec<i128>) -> Column {
        match Dictionary::of(&values) {
            Some(dictionary) => Column {
                values: Values::DecimalDictionary(dictionary),
                encoding: Encoding::RleDictionary,
                compression: CompressionOptions::Uncompressed,
            },
            None => {
                Column { values: Values::Decimal(values), encoding: Encoding::Plain, compression: OPTIONS.compression }
            }
        }
    }
}

/// Distinct values in order of first appearance, and each row's key.
struct Dictionary<V> {
    values: V,
    keys: Vec<u32>,
}

impl Dictionary<Vec<i128>> {
    /// The dictionary of `values`, unless most of them are distinct
    /// ([`polars_takes_dictionary`]); given up as soon as that is certain.
    fn of(values: &[i128]) -> Option<Dictionary<Vec<i128>>> {
        // The most distinct values that rule allows.
        let limit = if values.len() > SMALL_GROUP { values.len() * 3 / 4 } else { usize::MAX };
        let mut dictionary = Dictionary { values: Vec::new(), keys: Vec::with_capacity(values.len()) };
        // Open addressing, at most half full: a slot holds a key plus one
        // (zero: empty). Amounts are multiples of a cent or a second, their
        // low bits alike: the slot comes from the product's high bits.
        let mut slots = vec![0u32; 1024];
        let mut shift = 64 - slots.len().trailing_zeros();
        let slot_of = |value: i128, shift: u32| {
            let mixed = (value as u64) ^ ((value >> 64) as u64).rotate_left(31);
            (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
        };
        for &value in values {
            let mask = slots.len() - 1;
            let mut at = slot_of(value, shift);
            let key = loop {
                match slots[at] {
                    0 => {
                        let key = dictionary.values.len() as u32;
                        dictionary.values.push(value);
                        if dictionary.values.len() > limit {
                            return None;
                        }
                        slots[at] = key + 1;
                        if dictionary.values.len() * 2 > slots.len() {
                            slots = vec![0u32; slots.len() * 2];
                            shift -= 1;
                            let mask = slots.len() - 1;
                            for (i, &value) in dictionary.values.iter().enumerate() {
                                let mut at = slot_of(value, shift);
                                while slots[at] != 0 {
                                    at = (at + 1) & mask;
                                }
                                slots[at] = i as u32 + 1;
                            }
                        }
                        break key;
                    }
                    slot if dictionary.values[slot as usize - 1] == value => break slot - 1,
                    _ => at = (at + 1) & mask,
                }
            };
            dictionary.keys.push(key);
        }
        Some(dictionary)
    }
}

/// The values of a [`Column`].
enum Values {
    /// Encoded by polars' Parquet crate.
    Arrow(Box<dyn Array>),
    /// Unscaled decimals, encoded here ([`decimal_pages`]).
    Decimal(Vec<i128>),
    /// Unscaled decimals by dictionary, encoded here
    /// ([`decimal_dictionary_pages`]).
    DecimalDictionary(Dictionary<Vec<i128>>),
    /// Text by a dictionary of at least one value: the dictionary page
    /// and statistics by polars, the keys' pages here ([`key_pages`]).
    TextDictionary(Dictionary<Utf8ViewArray>),
}

/// Slots of [`TextColumn`]'s recent slices (a power of two): a records
/// row group's chunks each intern their own copy of the 250 subaccounts,
/// 50 accounts or 30 codes of the benchmark, more than 64 slots kept.
const RECENT_SLOTS: usize = 1024;

/// [`TextColumn`]'s recent slices: (address, length, key); none yet.
type Slots = [(usize, usize, u32); RECENT_SLOTS];

#[cold]
fn new_slots() -> Box<Slots> {
    Box::new([(0usize, usize::MAX, 0u32); RECENT_SLOTS])
}

/// A text column made a value at a time (so that a row group's columns are
/// made in one pass over its rows): [`Column::text`]'s dictionary and
/// rule.
pub(super) struct TextColumn<'a> {
    dictionary: Interner,
    keys: Vec<u32>,
    /// The keys of recently seen slices, by address and length
    /// ([`RECENT_SLOTS`] of them): a rollup's text is interned, a record's
    /// key fields are interned per chunk and an enum's name is static, so
    /// their rows repeat the same slices, and an equal slice (borrowed for
    /// the whole column) is an equal string, found without a hash. Made
    /// at the first [`TextColumn::push`]: a column pushed to by id only
    /// (every rollup column) never needs them.
    recent: Option<Box<Slots>>,
    /// The keys of values pushed by id ([`TextColumn::push_id`]), by id
    /// (`u32::MAX`: not seen yet).
    by_id: Vec<u32>,
    borrowed: std::marker::PhantomData<&'a str>,
}

impl<'a> TextColumn<'a> {
    /// A column of `rows` values to come.
    pub(super) fn new(rows: usize) -> TextColumn<'a> {
        TextColumn {
            dictionary: Interner::default(),
            keys: Vec::with_capacity(rows),
            recent: None,
            by_id: Vec::new(),
            borrowed: std::marker::PhantomData,
        }
    }

    /// Adds the next value.
    #[inline]
    pub(super) fn push(&mut self, value: &'a str) {
        let address = value.as_ptr() as usize;
        // Fibonacci hashing: slices a few bytes apart land far apart.
        let at = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RECENT_SLOTS.trailing_zeros());
        // (`at` is below RECENT_SLOTS already; the mask spares the bounds
        // check, and the slots are made out of line, so that this stays
        // small enough to inline.)
        let slot = &mut self.recent.get_or_insert_with(new_slots)[at as usize & (RECENT_SLOTS - 1)];
        let key = if slot.0 == address && slot.1 == value.len() {
            slot.2
        } else {
            let key = self.dictionary.intern(value);
            *slot = (address, value.len(), key);
            key
        };
        self.keys.push(key);
    }

    /// Adds the next value, known by a small integer `id` the caller gives
    /// it: values of equal ids must be equal (values of different ids may
    /// be equal too). `value` is asked for only the first time an id
    /// comes: no text is looked at, nor hashed, for the rest.
    #[inline]
    pub(super) fn push_id(&mut self, id: usize, value: impl FnOnce() -> &'a str) {
        let key = match self.by_id.get(id) {
            Some(&key) if key != u32::MAX => key,
            _ => {
                let key = self.dictionary.intern(value());
                if id >= self.by_id.len() {
                    self.by_id.resize(id + 1, u32::MAX);
                }
                self.by_id[id] = key;
                key
            }
        };
        self.keys.push(key);
    }

    /// Adds a product's name (keyed by the product).
    #[inline]
    pub(super) fn push_product(&mut self, product: Product) {
        self.push_id(product as usize, || product.as_str());
    }

    /// Adds a country's code, or the empty text for none (keyed by the code).
    #[inline]
    pub(super) fn push_country(&mut self, country: Option<Country>) {
        self.push_id(country.map_or(0, |c| c.index() + 1), || country.map_or("", |c| c.as_static_str()));
    }

    /// Adds a direction, or the empty text for none (keyed by the direction).
    #[inline]
    pub(super) fn push_direction(&mut self, direction: Option<Direction>) {
        self.push_id(direction.map_or(0, |d| d as usize + 1), || direction.map_or("", |d| d.as_str()));
    }

    /// The column: dictionary-encoded (the dictionary in order of first
    /// appearance), unless most of its values are distinct, then plain
    /// ([`polars_takes_dictionary`]).
    pub(super) fn finish(self) -> Result<Column> {
        let TextColumn { dictionary, keys, .. } = self;
        let dictionary: Vec<&str> = dictionary.iter().collect();
        if !polars_takes_dictionary(keys.len(), dictionary.len()) {
            return Ok(Column::plain_text(keys.iter().map(|&key| dictionary[key as usize])));
        }
        let values = Utf8ViewArray::from_slice_values(&dictionary);
        if keys.is_empty() {
            return Ok(Column {
                values: Values::Arrow(text_dictionary(keys, values)?.boxed()),
                encoding: Encoding::RleDictionary,
                compression: OPTIONS.compression,
            });
        }
        Ok(Column {
            values: Values::TextDictionary(Dictionary { values, keys }),
            encoding: Encoding::RleDictionary,
            compression: OPTIONS.compression,
        })
    }
}

/// The Arrow dictionary array of `keys` into text `values` (the keys
/// index a dictionary made with them: always in range).
fn text_dictionary(keys: Vec<u32>, values: Utf8ViewArray) -> Result<DictionaryArray<u32>> {
    let dtype = ArrowDataType::Dictionary(IntegerType::UInt32, Box::new(ArrowDataType::Utf8View), false);
    DictionaryArray::<u32>::try_new(dtype, PrimitiveArray::from_vec(keys), values.boxed())
        .map_err(|e| Error::Internal(format!("a text column's dictionary: {e}")))
}

/// One row group, encoded and compressed, ready to be written.
pub(super) struct Group {
    rows: u64,
    columns: Vec<Vec<CompressedPage>>,
}

/// A Parquet file being written, a row group at a time.
pub(super) struct ParquetOut {
    path: PathBuf,
    schema: ArrowSchema,
    fields: Vec<ParquetType>,
    writer: FileWriter<DirectWriter>,
}

/// What every store file is written with: LZ4_RAW (polars, Spark 3.4+,
/// DuckDB and Arrow read it; against Snappy it compresses in less CPU and
/// decodes faster, for files about as large: re-measure with
/// `bench/ingest-ab.sh`), polars'
/// default statistics (min, max, null count), format 1 pages, polars'
/// default page size ([`crate::parquet::STATISTICS`]: the text statistics'
/// cut fixed, not read from the environment).
const OPTIONS: WriteOptions = WriteOptions {
    statistics: crate::parquet::STATISTICS,
    version: Version::V1,
    compression: super::layout::CODEC,
    data_page_size: None,
};

impl ParquetOut {
    /// Creates (or truncates) the file at `path`, for columns of `schema`.
    pub(super) fn create(path: &Path, schema: ArrowSchema) -> Result<ParquetOut> {
        // Around the page cache: a store file is written once, and not read
        // back by the run that writes it.
        let file = DirectWriter::create(path).map_err(|e| Error::io(path, e))?;
        let writer = FileWriter::try_new(file, schema.clone(), OPTIONS).map_err(parquet_error(path))?;
        let fields = writer.parquet_schema().fields().to_vec();
        Ok(ParquetOut { path: path.to_owned(), schema, fields, writer })
    }

    /// The file being written.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The Arrow type of column `i` (what [`Column`]'s numbers take).
    pub(super) fn dtype(&self, i: usize) -> &ArrowDataType {
        self.schema.get_at_index(i).map_or(&ArrowDataType::Null, |(_, field)| &field.dtype)
    }

    /// Encodes and compresses one row group of `rows` rows (the columns in
    /// the schema's order, on the threads); `&self`, so that several groups
    /// of a file can be encoded at once.
    pub(super) fn encode(&self, rows: usize, columns: Vec<Column>) -> Result<Group> {
        if columns.len() != self.fields.len() {
            return Err(Error::Internal(format!(
                "{}: {} columns for a schema of {}",
                self.path.display(),
                columns.len(),
                self.fields.len()
            )));
        }
        let columns = columns
            .into_par_iter()
            .zip(self.fields.par_iter())
            .map(|(column, field)| self.encode_column(column, field))
            .collect::<Result<Vec<_>>>()?;
        Ok(Group { rows: rows as u64, columns })
    }

    fn encode_column(&self, column: Column, field: &ParquetType) -> Result<Vec<CompressedPage>> {
        let compress = |page: Page| compress(page, Vec::new(), column.compression).map_err(parquet_error(&self.path));
        match column.values {
            Values::Arrow(array) => {
                let leaves = array_to_columns(array, field.clone(), OPTIONS, &[column.encoding])
                    .map_err(parquet_error(&self.path))?;
                let mut pages = Vec::new();
                for leaf in leaves {
                    for page in leaf {
                        pages.push(compress(page.map_err(parquet_error(&self.path))?)?);
                    }
                }
                Ok(pages)
            }
            Values::Decimal(values) => {
                let pages = decimal_pages(&values, field).map_err(|e| Error::io(&self.path, e))?;
                pages.into_iter().map(compress).collect()
            }
            Values::TextDictionary(dictionary) => {
                let pages = self.text_dictionary_pages(dictionary, field)?;
                pages.into_iter().map(compress).collect()
            }
            Values::DecimalDictionary(dictionary) => {
                let pages = decimal_dictionary_pages(&dictionary, field).map_err(|e| Error::io(&self.path, e))?;
                pages.into_iter().map(compress).collect()
            }
        }
    }

    /// The pages of a dictionary-encoded text column chunk: polars makes
    /// the dictionary page and the statistics (those of the dictionary's
    /// values) from the dictionary and one key; the keys' pages are made
    /// here.
    fn text_dictionary_pages(&self, dictionary: Dictionary<Utf8ViewArray>, field: &ParquetType) -> Result<Vec<Page>> {
        let ParquetType::PrimitiveType(type_) = field else {
            return Err(Error::Internal(format!("a text column for the group field '{}'", field.name())));
        };
        let head = text_dictionary(vec![0], dictionary.values)?;
        let leaves = array_to_columns(head.boxed(), field.clone(), OPTIONS, &[Encoding::RleDictionary])
            .map_err(parquet_error(&self.path))?;
        let mut pages = Vec::new();
        let mut statistics = None;
        for leaf in leaves {
            for page in leaf {
                match page.map_err(parquet_error(&self.path))? {
                    Page::Dict(page) => pages.push(Page::Dict(page)),
                    Page::Data(page) => {
                        if let DataPageHeader::V1(header) = page.header() {
                            statistics = header.statistics.clone();
                        }
                    }
                }
            }
        }
        if pages.len() != 1 {
            return Err(Error::Internal(format!("{} dictionary pages for a text column", pages.len())));
        }
        key_pages(&dictionary.keys, statistics, type_, &mut pages).map_err(|e| Error::io(&self.path, e))?;
        Ok(pages)
    }

    /// Writes an encoded row group (after the ones written so far).
    pub(super) fn write(&mut self, group: Group) -> Result<()> {
        let columns = group.columns.iter().map(|pages| {
            let pages = fallible_streaming_iterator::convert(pages.iter().map(Ok));
            Ok(DynStreamingIterator::new(pages))
        });
        self.writer.write(group.rows, DynIter::new(columns)).map_err(parquet_error(&self.path))
    }

    /// Writes the footer (with polars' `ARROW:schema` metadata) and hands
    /// the file to `syncer`, its last blocks still on their way to the
    /// device: the syncer waits for them, then syncs it to disk.
    pub(super) fn finish(mut self, syncer: &Syncer) -> Result<()> {
        self.writer.end(None).map_err(parquet_error(&self.path))?;
        syncer.sync(&self.path, self.writer.into_inner().finish_behind())
    }
}

/// The pages of a `Decimal(38, _)` column chunk, as polars' writer makes
/// them (the same bytes: 16-byte big-endian values, plain, split into pages
/// of about 1 MiB the way polars splits them, definition levels when the
/// field is optional, min, max and null count in each page's header), in
/// one pass over the values instead of polars' three (its statistics go
/// through `Option`s twice, then each value is copied twice). Decimal
/// columns were a fifth of the ingest's Parquet encoding time.
fn decimal_pages(values: &[i128], field: &ParquetType) -> std::result::Result<Vec<Page>, String> {
    const SIZE: usize = 16;
    let type_ = decimal_type(field, SIZE)?;
    let optional = type_.field_info.repetition == Repetition::Optional;
    let rows_per_page = rows_per_page(SIZE);
    let mut pages = Vec::with_capacity(values.len().div_ceil(rows_per_page));
    for chunk in values.chunks(rows_per_page) {
        let mut buffer = Vec::with_capacity(8 + chunk.len() * SIZE);
        write_def_levels(&mut buffer, optional, None, chunk.len(), OPTIONS.version).map_err(|e| e.to_string())?;
        let start = buffer.len();
        buffer.resize(start + chunk.len() * SIZE, 0);
        let (mut min, mut max) = (i128::MAX, i128::MIN);
        for (value, out) in chunk.iter().zip(buffer[start..].chunks_exact_mut(SIZE)) {
            out.copy_from_slice(&value.to_be_bytes());
            min = min.min(*value);
            max = max.max(*value);
        }
        let statistics = decimal_statistics(type_, min, max);
        pages.push(data_page(type_, buffer, chunk.len(), Encoding::Plain, Some(statistics)));
    }
    Ok(pages)
}

/// The pages of a dictionary-encoded `Decimal(38, _)` column chunk: the
/// dictionary page (its values plain, 16-byte big-endian), then the keys'
/// pages as polars makes them for a dictionary column.
fn decimal_dictionary_pages(
    dictionary: &Dictionary<Vec<i128>>,
    field: &ParquetType,
) -> std::result::Result<Vec<Page>, String> {
    const SIZE: usize = 16;
    let type_ = decimal_type(field, SIZE)?;
    let mut buffer = Vec::with_capacity(dictionary.values.len() * SIZE);
    let (mut min, mut max) = (i128::MAX, i128::MIN);
    for value in &dictionary.values {
        buffer.extend_from_slice(&value.to_be_bytes());
        min = min.min(*value);
        max = max.max(*value);
    }
    let statistics = (!dictionary.values.is_empty()).then(|| decimal_statistics(type_, min, max));
    let dict = DictPage::new(CowBuffer::Owned(buffer), dictionary.values.len(), false);
    let mut pages = vec![Page::Dict(dict)];
    key_pages(&dictionary.keys, statistics, type_, &mut pages)?;
    Ok(pages)
}

/// The data pages of a dictionary column's `keys`, as polars' writer makes
/// them: pages of about 1 MiB of keys (4 bytes a key), each with the
/// definition levels of an optional field, the keys' bit width, then the
/// keys in the RLE / bit-packed hybrid; every page with the column's
/// `statistics`.
fn key_pages(
    keys: &[u32],
    statistics: Option<ParquetStatistics>,
    type_: &PrimitiveType,
    pages: &mut Vec<Page>,
) -> std::result::Result<(), String> {
    let optional = type_.field_info.repetition == Repetition::Optional;
    for chunk in keys.chunks(rows_per_page(4)) {
        // The bit width of the largest key: that of all keys or-ed.
        let bits = 32 - chunk.iter().fold(0, |all, key| all | key).leading_zeros();
        // At most every value bit-packed, with a header per 8,192 values.
        let mut buffer = Vec::with_capacity(64 + (chunk.len() * bits as usize).div_ceil(8) + chunk.len() / 1024);
        write_def_levels(&mut buffer, optional, None, chunk.len(), OPTIONS.version).map_err(|e| e.to_string())?;
        buffer.push(bits as u8);
        super::rle::encode(&mut buffer, chunk, bits);
        pages.push(data_page(type_, buffer, chunk.len(), Encoding::RleDictionary, statistics.clone()));
    }
    Ok(())
}

/// Rows per data page for values of `bytes` bytes each, without nulls:
/// polars' `row_slice_ranges`, pages of about 1 MiB.
fn rows_per_page(bytes: usize) -> usize {
    const PAGE_BYTES: usize = 1 << 20;
    PAGE_BYTES / (bytes + 1)
}

/// A format 1 data page of `rows` values in `buffer` (definition levels
/// first, for an optional field), as polars' `build_plain_page` makes it.
fn data_page(
    type_: &PrimitiveType,
    buffer: Vec<u8>,
    rows: usize,
    encoding: Encoding,
    statistics: Option<ParquetStatistics>,
) -> Page {
    let header = DataPageHeaderV1 {
        num_values: rows as i32,
        encoding: encoding.into(),
        definition_level_encoding: Encoding::Rle.into(),
        repetition_level_encoding: Encoding::Rle.into(),
        statistics,
    };
    let descriptor = Descriptor { primitive_type: type_.clone(), max_def_level: 0, max_rep_level: 0 };
    Page::Data(DataPage::new(DataPageHeader::V1(header), CowBuffer::Owned(buffer), descriptor, rows))
}

/// A decimal column's statistics: no nulls, the numeric minimum and
/// maximum as 16 big-endian bytes.
fn decimal_statistics(type_: &PrimitiveType, min: i128, max: i128) -> ParquetStatistics {
    FixedLenStatistics {
        primitive_type: type_.clone(),
        null_count: Some(0),
        distinct_count: None,
        max_value: Some(max.to_be_bytes().to_vec()),
        min_value: Some(min.to_be_bytes().to_vec()),
    }
    .serialize()
}

/// The primitive type of a decimal field of `size`-byte values.
fn decimal_type(field: &ParquetType, size: usize) -> std::result::Result<&PrimitiveType, String> {
    let ParquetType::PrimitiveType(type_) = field else {
        return Err(format!("a decimal column for the group field '{}'", field.name()));
    };
    if type_.physical_type != PhysicalType::FixedLenByteArray(size) {
        return Err(format!("a decimal column for '{}' of type {:?}", field.name(), type_.physical_type));
    }
    Ok(type_)
}

fn parquet_error<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> Error + '_ {
    move |e| Error::io(path, format!("parquet: {e}"))
}

#[cfg(test)]
mod tests;
