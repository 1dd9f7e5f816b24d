//! Rollup files: one account's rows at one grain, in the columns of
//! [`super::layout::ROLLUP`] (the key, the record count, the units and the
//! sums). Written by ingest
//! ([`RollupWriter`]), read by [`super::Store::aggregate`] and by ingest
//! when it merges a new ingest into an account's files.

use std::path::Path;

use polars::prelude::{DataFrame, DataType, FileMetadataRef, PolarsDataType, StringType};
use polars_arrow::array::{Array, DictionaryArray, PrimitiveArray};
use polars_arrow::datatypes::{ArrowDataType, ArrowSchema};
use polars_buffer::Buffer;
use polars_parquet::parquet::metadata::RowGroupMetadata;
use polars_parquet::parquet::statistics::Statistics;
use rayon::prelude::*;

use super::layout;
use super::parquet_io::polars_error;
use super::parquet_out::{Column, ParquetOut, TextColumn};
use crate::aggregate::{Dims, Totals};
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::parquet::{column_chunk, decode_chunk_keyed, ParquetFile};
use crate::records::{Country, Direction, Product};
use crate::time::Interval;

/// The rollup columns' names, in [`layout::ROLLUP`]'s order.
const ROLLUP_COLUMNS: [&str; 14] = {
    let mut names = [""; 14];
    let mut i = 0;
    while i < names.len() {
        names[i] = layout::ROLLUP[i].name;
        i += 1;
    }
    names
};

/// A rollup file written a row group at a time, for rows that come in
/// order but not all at once (ingest's merge, one day at a time).
pub struct RollupWriter {
    out: ParquetOut,
}

impl RollupWriter {
    /// Creates (or truncates) the file.
    pub fn create(path: &Path) -> Result<RollupWriter> {
        Ok(RollupWriter { out: ParquetOut::create(path, layout::schema(&layout::ROLLUP))? })
    }

    /// Writes `rows` (after the rows written so far, in order) as one row
    /// group (nothing when there are none): the tests' slices.
    #[cfg(test)]
    pub fn write(&mut self, rows: &[RollupRef<'_>]) -> Result<()> {
        let mut strings = crate::intern::Interner::default();
        let mut keyed = Vec::with_capacity(rows.len());
        for row in rows {
            let ids =
                [row.auth_id, row.dims.subaccount, row.dims.type_, row.dims.code].map(|text| strings.intern(text));
            keyed.push(KeyedRollup { row: *row, ids });
        }
        self.write_rows(rows.len(), keyed.into_iter())
    }

    /// Writes the `n` rows of `rows` (after the rows written so far, in
    /// order) as one row group (nothing when there are none); the rows are
    /// made as they are taken (ingest's merge makes them from interned
    /// ids, and hands the ids along).
    pub(super) fn write_rows<'a>(&mut self, n: usize, rows: impl Iterator<Item = KeyedRollup<'a>>) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let columns = rollup_columns(&self.out, n, rows)?;
        let group = self.out.encode(n, columns)?;
        self.out.write(group)
    }

    /// Finishes the file (with no rows when nothing was written) and hands
    /// it to `syncer`, to be synced to disk.
    pub fn finish(self, syncer: &Syncer) -> Result<()> {
        self.out.finish(syncer)
    }
}

/// The columns of rows `offset..offset + len` of a rollup file (the row
/// groups outside are not decoded).
pub fn read_rollup_slice(path: &Path, offset: usize, len: usize) -> Result<DataFrame> {
    super::parquet_io::read_frame_slice(path, &ROLLUP_COLUMNS, offset, len)
}

/// Every row of the listed rollup file, its bytes checked against their
/// sum before anything of them is parsed (one read of the file).
pub(crate) fn read_rollup_checked(listed: super::Listed<'_>) -> Result<DataFrame> {
    let path = listed.path();
    match ParquetFile::open_checked(&path, |bytes| listed.check(bytes))? {
        Some(file) => file.read(Some(&ROLLUP_COLUMNS), crate::parquet::Rows::All),
        None => Err(Error::io(&path, "not a rollup file: the file is empty")),
    }
}

/// A rollup row to write, with ids of its text (auth_id, subaccount, type,
/// code): rows of equal ids have equal text, so a text column finds its
/// dictionary key by id ([`TextColumn::push_id`]) without looking at the
/// text again.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyedRollup<'a> {
    /// The row.
    pub(super) row: RollupRef<'a>,
    /// Ids of its auth_id, subaccount, type and code.
    pub(super) ids: [u32; 4],
}

/// The columns of `n` rollup rows, in [`layout::ROLLUP`]'s order, made in
/// one pass over the rows (a row group's rows are about 10 MB: a pass per
/// column read them from memory fourteen times).
fn rollup_columns<'a>(out: &ParquetOut, n: usize, rows: impl Iterator<Item = KeyedRollup<'a>>) -> Result<Vec<Column>> {
    let mut text: [TextColumn<'a>; 8] = std::array::from_fn(|_| TextColumn::new(n));
    let (mut slots, mut records, mut units) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let mut sums: [Vec<i128>; 3] = std::array::from_fn(|_| Vec::with_capacity(n));
    for KeyedRollup { row: r, ids: [auth_id, subaccount, type_, code] } in rows {
        // The code's id, or 0 for the empty text of a product without it.
        let code_if = |has: bool| if has { (code as usize + 1, r.dims.code) } else { (0, "") };
        text[0].push_id(auth_id as usize, || r.auth_id);
        text[1].push_id(subaccount as usize, || r.dims.subaccount);
        text[2].push_product(r.dims.product);
        text[3].push_id(type_ as usize, || r.dims.type_);
        text[4].push_country(r.dims.country);
        text[5].push_direction(r.dims.direction);
        let (id, value) = code_if(r.dims.product.has_error_code());
        text[6].push_id(id, || value);
        let (id, value) = code_if(r.dims.product.has_hangup_cause());
        text[7].push_id(id, || value);
        slots.push(r.slot);
        records.push(r.totals.records);
        units.push(r.totals.units);
        sums[0].push(r.totals.duration);
        sums[1].push(r.totals.amount);
        sums[2].push(r.totals.surcharge);
    }
    // Sums of at most i64::MAX per record: these limits take more than
    // 10^19 records in one group. Still refused, never wrapped; each
    // column checked in a pass of its own (no `Result` per value).
    let limit = 10u128.pow(38);
    let too_large = |name: &str, value: &dyn std::fmt::Display, column: &str| {
        Error::Limit(format!(
            "{}: the {name} of one rollup group add up to {value}, more than {column} holds",
            out.path().display()
        ))
    };
    if let Some(value) = units.iter().find(|&&v| v >= limit) {
        return Err(too_large("units", value, "DECIMAL(38,0)"));
    }
    if let Some(value) = records.iter().find(|&&v| v > i64::MAX as u64) {
        return Err(too_large("records", value, "Int64"));
    }
    for (name, values) in ["duration", "amount", "surcharge"].iter().zip(&sums) {
        if let Some(value) = values.iter().find(|v| v.unsigned_abs() >= limit) {
            return Err(too_large(name, value, "DECIMAL(38,9)"));
        }
    }
    let [auth_id, subaccount, product, type_, country, direction, error_code, hangup_cause] = text;
    let [duration, amount, surcharge] = sums;
    Ok(vec![
        auth_id.finish()?,
        subaccount.finish()?,
        Column::integers_as(layout::ROLLUP[2].encoding, slots, out.dtype(2))?,
        product.finish()?,
        type_.finish()?,
        country.finish()?,
        direction.finish()?,
        error_code.finish()?,
        hangup_cause.finish()?,
        Column::integers_as(layout::ROLLUP[9].encoding, records.into_iter().map(|r| r as i64).collect(), out.dtype(9))?,
        Column::decimal(units.into_iter().map(|u| u as i128).collect()),
        Column::decimal(duration),
        Column::decimal(amount),
        Column::decimal(surcharge),
    ])
}

/// One rollup row as read, borrowing its text from the file's columns.
#[derive(Clone, Copy, Debug)]
pub struct RollupRef<'a> {
    /// Parent account.
    pub auth_id: &'a str,
    /// Slot start, UTC seconds.
    pub slot: i64,
    /// The row's dimensions: an empty subaccount on parent-level rows, an
    /// empty code where the product has none.
    pub dims: Dims<&'a str, &'a str>,
    /// Summed values.
    pub totals: Totals,
}

/// The country and direction of a rollup row: `""` is none (a product
/// without them); other text that names neither is the error `broken`
/// makes of a message quoting it.
pub(crate) fn place(
    country: &str,
    direction: &str,
    broken: impl Fn(String) -> Error,
) -> Result<(Option<Country>, Option<Direction>)> {
    let country = match country {
        "" => None,
        text => Some(Country::parse(text.as_bytes()).ok_or_else(|| broken(format!("bad country '{text}'")))?),
    };
    let direction = match direction {
        "" => None,
        text => Some(Direction::parse(text.as_bytes()).ok_or_else(|| broken(format!("bad direction '{text}'")))?),
    };
    Ok((country, direction))
}

/// Hands every rollup row of `frame` (read from `path`) to `each`, borrowing
/// text from the frame.
pub fn for_each_rollup_in<'f>(
    path: &Path,
    frame: &'f DataFrame,
    mut each: impl FnMut(RollupRef<'f>) -> Result<()>,
) -> Result<()> {
    let broken = |what: String| Error::io(path, format!("not a rollup file: {what}"));
    let text = |name: &str| -> Result<Vec<&'f str>> {
        let column = frame.column(name).and_then(|c| c.str()).map_err(polars_error(path))?;
        column.iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let int = |name: &str| -> Result<Vec<i64>> {
        let column = frame.column(name).and_then(|c| c.i64()).map_err(polars_error(path))?;
        column.iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let decimal = |name: &str| -> Result<Vec<i128>> {
        let scale = layout::rollup_scale(name)?;
        let column = frame.column(name).map_err(polars_error(path))?;
        if *column.dtype() != DataType::Decimal(38, scale) {
            return Err(broken(format!("'{name}' is {}, not decimal(38, {scale})", column.dtype())));
        }
        let values = column.decimal().map_err(polars_error(path))?;
        values.physical().iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let (auth, sub, slot, product, type_) =
        (text("auth_id")?, text("subaccount_auth")?, int("slot_start")?, text("product")?, text("type")?);
    let (country, direction, error_code, hangup) =
        (text("country")?, text("direction")?, text("error_code")?, text("hangup_cause")?);
    let (records, units) = (int("records")?, decimal("units")?);
    let (duration, amount, surcharge) = (decimal("duration_seconds")?, decimal("amount")?, decimal("surcharge")?);
    for i in 0..frame.height() {
        let product = Product::parse(product[i]).ok_or_else(|| broken(format!("unknown product '{}'", product[i])))?;
        let code = if product.has_error_code() {
            error_code[i]
        } else if product.has_hangup_cause() {
            hangup[i]
        } else {
            ""
        };
        let (country, direction) = place(country[i], direction[i], broken)?;
        if records[i] < 0 || units[i] < 0 {
            return Err(broken("negative count".to_owned()));
        }
        each(RollupRef {
            auth_id: auth[i],
            slot: slot[i],
            dims: Dims { product, type_: type_[i], subaccount: sub[i], country, direction, code },
            totals: Totals {
                records: records[i] as u64,
                units: units[i] as u128,
                duration: duration[i],
                amount: amount[i],
                surcharge: surcharge[i],
            },
        })?;
    }
    Ok(())
}

/// A text value by its key into its row group's dictionary of the column:
/// within one row group and column, equal keys are equal texts, so a
/// reader can recognize a repeated value by one integer, and looks the text
/// up ([`Text::text`]) only for a key it has not seen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Text<'f> {
    pub key: u32,
    values: &'f Utf8ViewArray,
}

impl<'f> Text<'f> {
    /// The text.
    #[inline]
    pub fn text(&self) -> &'f str {
        self.values.value(self.key as usize)
    }
}

/// One rollup row as a request reads it: `auth_id` is left unread (a file
/// holds one account, named by the manifest) and text is not parsed. Views
/// compare within one row group only.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowText<'f> {
    pub subaccount: Text<'f>,
    pub slot: i64,
    pub product: Text<'f>,
    pub type_: Text<'f>,
    pub country: Text<'f>,
    pub direction: Text<'f>,
    pub error_code: Text<'f>,
    pub hangup_cause: Text<'f>,
    pub records: i64,
    pub units: i128,
    pub duration: i128,
    pub amount: i128,
    pub surcharge: i128,
}

/// The first and last slot starts of a rollup file, reading its
/// `slot_start` column alone; `None` when it has no rows.
pub(crate) fn slot_range(listed: super::Listed<'_>) -> Result<Option<(i64, i64)>> {
    let path = &listed.path();
    let file = ParquetFile::open_checked(path, |bytes| listed.check(bytes))?;
    let file = file.ok_or_else(|| Error::io(path, "not a rollup file: the file is empty"))?;
    let frame = file.read(Some(&ROLLUP_COLUMNS[2..3]), crate::parquet::Rows::All)?;
    let slots = frame.column(ROLLUP_COLUMNS[2]).and_then(|c| c.i64()).map_err(polars_error(path))?;
    let range = slots.downcast_iter().flat_map(|array| array.values().iter().copied()).fold(
        None,
        |range: Option<(i64, i64)>, slot| match range {
            Some((min, max)) => Some((min.min(slot), max.max(slot))),
            None => Some((slot, slot)),
        },
    );
    if slots.null_count() > 0 {
        return Err(Error::io(path, "not a rollup file: null in 'slot_start'"));
    }
    Ok(range)
}

/// Whether slots from `min` to `max` (both included) meet `window`.
fn overlaps((min, max): (i64, i64), window: Interval) -> bool {
    max >= window.start && min < window.end
}

/// A rollup file opened for a request: its footer read once, its row
/// groups read one at a time ([`RollupFile::read_group`]), so that memory
/// holds a row group's columns, not the file's.
pub(crate) struct RollupFile<'p> {
    path: &'p Path,
    metadata: FileMetadataRef,
    /// The columns' Arrow types, from the footer.
    schema: ArrowSchema,
    /// The file's bytes, read whole and checked against their sum.
    bytes: Buffer<u8>,
}

impl<'p> RollupFile<'p> {
    /// Opens `path` (the file `listed` names), checks its bytes
    /// against its sum, and reads its footer.
    pub(crate) fn open(path: &'p Path, listed: super::Listed<'_>) -> Result<RollupFile<'p>> {
        let file = ParquetFile::open_checked(path, |bytes| listed.check(bytes))?;
        let file = file.ok_or_else(|| Error::io(path, "not a rollup file: the file is empty"))?;
        let (bytes, metadata) = file.into_parts();
        let metadata = FileMetadataRef::new(metadata);
        // polars panics on some damaged Arrow schemas in the footer's
        // key-value metadata ("not yet implemented").
        let schema = crate::parquet::guarded(|| polars_parquet::read::infer_schema(&metadata))
            .map_err(|panic| Error::io(path, format!("not a rollup file: its schema does not parse ({panic})")))?
            .map_err(polars_error(path))?;
        Ok(RollupFile { path, metadata, schema, bytes })
    }

    /// Each row group's first row and number of rows, in file order.
    pub(crate) fn groups(&self) -> Vec<(usize, usize)> {
        let mut offset = 0;
        let mut groups = Vec::with_capacity(self.metadata.row_groups.len());
        for row_group in &self.metadata.row_groups {
            groups.push((offset, row_group.num_rows()));
            offset += row_group.num_rows();
        }
        groups
    }

    /// The rows of the row groups that may hold slots in `window` (start
    /// included, end excluded): every group whose footer statistics overlap
    /// it or that has none. [`RollupFile::read_group`] reads no other.
    pub(crate) fn rows_in(&self, window: Interval) -> usize {
        (0..self.metadata.row_groups.len())
            .filter(|&index| self.slot_bounds(index).is_none_or(|bounds| overlaps(bounds, window)))
            .map(|index| self.metadata.row_groups[index].num_rows())
            .sum()
    }

    /// The least and greatest `slot_start` of row group `index`, from the
    /// footer's statistics; `None` when the footer has none for it.
    fn slot_bounds(&self, index: usize) -> Option<(i64, i64)> {
        let group = self.metadata.row_groups.get(index)?;
        let column = column_chunk(group, ROLLUP_COLUMNS[2])?;
        match column.statistics(&self.metadata.footer_buf)?.ok()? {
            Statistics::Int64(slots) => Some((slots.min_value?, slots.max_value?)),
            _ => None,
        }
    }

    /// The columns a request reads (all but `auth_id`) of row group
    /// `index` (of `groups()`); `None` when its slots all lie outside
    /// `window`, found from the footer's statistics (or, in
    /// a file without them, by reading its `slot_start` column alone).
    /// `parallel`: decode the columns on the threads.
    ///
    /// Text columns are read as their dictionary's keys, not as a string
    /// view per row: a row's text is a 4-byte key into the row group's few
    /// distinct values ([`Text`]). A column whose pages are not all
    /// dictionary-encoded (a store written by an older writer may hold
    /// some) is read as strings and keyed here.
    pub(crate) fn read_group(&self, index: usize, window: Interval, parallel: bool) -> Result<Option<Group>> {
        let path = self.path;
        let Some(group) = self.metadata.row_groups.get(index) else { return Ok(None) };
        let (min, max) = match self.slot_bounds(index) {
            Some(bounds) => bounds,
            None => {
                let slots = self.column(group, ROLLUP_COLUMNS[2])?;
                let slots = slots.as_any().downcast_ref::<PrimitiveArray<i64>>().ok_or_else(|| {
                    Error::io(path, format!("not a rollup file: '{}' is not int64", ROLLUP_COLUMNS[2]))
                })?;
                slots.values().iter().fold((i64::MAX, i64::MIN), |(min, max), slot| (min.min(*slot), max.max(*slot)))
            }
        };
        if !overlaps((min, max), window) {
            return Ok(None);
        }
        let read = |name: &&str| self.column(group, name);
        let arrays: Vec<Box<dyn Array>> = if parallel {
            ROLLUP_COLUMNS[1..].par_iter().map(read).collect::<Result<_>>()?
        } else {
            ROLLUP_COLUMNS[1..].iter().map(read).collect::<Result<_>>()?
        };
        Ok(Some(Group { height: group.num_rows(), arrays }))
    }

    /// Column `name` of row group `group`, decoded from the file's bytes:
    /// text as a dictionary (keys into the row group's values), the rest as
    /// the file's schema says.
    fn column(&self, group: &RowGroupMetadata, name: &str) -> Result<Box<dyn Array>> {
        let bytes = &self.bytes;
        let path = self.path;
        let broken = |what: String| Error::io(path, format!("not a rollup file: {what}"));
        let meta = column_chunk(group, name).ok_or_else(|| broken(format!("no column '{name}'")))?;
        let field = self.schema.get(name).ok_or_else(|| broken(format!("no column '{name}'")))?;
        // Each page's header is checked before polars decodes it, and the
        // decoding is guarded: a damaged file is an error, never a crash.
        decode_chunk_keyed(bytes, meta, field, group.num_rows())
            .map_err(|why| broken(format!("column '{name}': {why}")))
    }
}

/// One row group's columns as read ([`RollupFile::read_group`]): every
/// column of the file but `auth_id`, in the file's order.
pub(crate) struct Group {
    height: usize,
    arrays: Vec<Box<dyn Array>>,
}

/// The columns of one row group of a rollup file, one array each, read
/// row by row ([`GroupColumns::row`]) by any number of threads.
pub(crate) struct GroupColumns<'f> {
    height: usize,
    subaccount: Keys<'f>,
    slot: &'f [i64],
    product: Keys<'f>,
    type_: Keys<'f>,
    country: Keys<'f>,
    direction: Keys<'f>,
    error_code: Keys<'f>,
    hangup_cause: Keys<'f>,
    records: &'f [i64],
    units: &'f [i128],
    duration: &'f [i128],
    amount: &'f [i128],
    surcharge: &'f [i128],
}

/// A text column of a row group: each row's key into its distinct values.
#[derive(Clone, Copy)]
struct Keys<'f> {
    keys: &'f [u32],
    values: &'f Utf8ViewArray,
}

impl<'f> GroupColumns<'f> {
    /// The columns of `group` (a row group read by
    /// [`RollupFile::read_group`] from `path`, named in messages).
    pub(crate) fn new(path: &Path, group: &'f Group) -> Result<GroupColumns<'f>> {
        let broken = |what: String| Error::io(path, format!("not a rollup file: {what}"));
        let height = group.height;
        let array = |name: &str| -> Result<&'f dyn Array> {
            let at = ROLLUP_COLUMNS[1..].iter().position(|c| *c == name);
            let array = at.and_then(|at| group.arrays.get(at)).ok_or_else(|| broken(format!("no column '{name}'")))?;
            if array.null_count() > 0 {
                return Err(broken(format!("null in '{name}'")));
            }
            Ok(array.as_ref())
        };
        let text = |name: &str| -> Result<Keys<'f>> {
            let dictionary = array(name)?
                .as_any()
                .downcast_ref::<DictionaryArray<u32>>()
                .ok_or_else(|| broken(format!("'{name}' is not text")))?;
            let values = dictionary
                .values()
                .as_any()
                .downcast_ref::<Utf8ViewArray>()
                .ok_or_else(|| broken(format!("'{name}' is not text")))?;
            let keys = dictionary.keys().values().as_slice();
            // Every key names a value (the decoder does not check).
            if values.null_count() > 0 || keys.iter().any(|key| *key as usize >= values.len()) {
                return Err(broken(format!("'{name}' has a key past its dictionary")));
            }
            Ok(Keys { keys, values })
        };
        let int = |name: &str| -> Result<&'f [i64]> {
            let values = array(name)?
                .as_any()
                .downcast_ref::<PrimitiveArray<i64>>()
                .filter(|values| values.dtype() == &ArrowDataType::Int64)
                .ok_or_else(|| broken(format!("'{name}' is not int64")))?;
            Ok(values.values().as_slice())
        };
        let decimal = |name: &str| -> Result<&'f [i128]> {
            let scale = layout::rollup_scale(name)?;
            let values = array(name)?;
            if values.dtype() != &ArrowDataType::Decimal(38, scale) {
                return Err(broken(format!("'{name}' is {:?}, not decimal(38, {scale})", values.dtype())));
            }
            let values = values
                .as_any()
                .downcast_ref::<PrimitiveArray<i128>>()
                .ok_or_else(|| broken(format!("'{name}' is not decimal(38, {scale})")))?;
            Ok(values.values().as_slice())
        };
        Ok(GroupColumns {
            height,
            subaccount: text("subaccount_auth")?,
            slot: int("slot_start")?,
            product: text("product")?,
            type_: text("type")?,
            country: text("country")?,
            direction: text("direction")?,
            error_code: text("error_code")?,
            hangup_cause: text("hangup_cause")?,
            records: int("records")?,
            units: decimal("units")?,
            duration: decimal("duration_seconds")?,
            amount: decimal("amount")?,
            surcharge: decimal("surcharge")?,
        })
    }

    /// Number of rows.
    pub(crate) fn len(&self) -> usize {
        self.height
    }

    /// Row `i` (below [`GroupColumns::len`]), borrowing its text.
    #[inline]
    pub(crate) fn row(&self, i: usize) -> RowText<'f> {
        let text = |column: Keys<'f>| Text { key: column.keys[i], values: column.values };
        RowText {
            subaccount: text(self.subaccount),
            slot: self.slot[i],
            product: text(self.product),
            type_: text(self.type_),
            country: text(self.country),
            direction: text(self.direction),
            error_code: text(self.error_code),
            hangup_cause: text(self.hangup_cause),
            records: self.records[i],
            units: self.units[i],
            duration: self.duration[i],
            amount: self.amount[i],
            surcharge: self.surcharge[i],
        }
    }
}

/// A text column's array.
type Utf8ViewArray = <StringType as PolarsDataType>::Array;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A test's rollup file, read without a sum to check.
    fn unsummed(path: &Path) -> crate::store::Listed<'_> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        crate::store::Listed { store: path.parent().unwrap_or(Path::new(".")), name, sum: None }
    }

    /// A parent-level charge row of account `A1` at `slot`: the tests' row.
    pub(crate) fn charge_row(slot: i64, totals: Totals) -> RollupRef<'static> {
        RollupRef {
            auth_id: "A1",
            slot,
            dims: Dims {
                product: Product::Other,
                type_: "Number Charges",
                subaccount: "",
                country: None,
                direction: None,
                code: "",
            },
            totals,
        }
    }

    fn row(totals: Totals) -> RollupRef<'static> {
        charge_row(0, totals)
    }

    #[test]
    fn sums_past_i64_are_held_and_past_the_columns_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("r.parquet");
        // Units of many records of up to i64::MAX each, and the largest
        // sums the columns hold.
        let largest = 10i128.pow(38) - 1;
        let held = Totals { records: 3, units: 3 * i64::MAX as u128, duration: largest, amount: largest, surcharge: 0 };
        let mut writer = RollupWriter::create(&path).expect("created");
        writer.write(&[row(held)]).expect("written");
        writer.finish(&Syncer::at_once()).expect("finished");
        let frame = read_rollup_slice(&path, 0, 1).expect("read");
        let mut read = Vec::new();
        for_each_rollup_in(&path, &frame, |r| {
            read.push(r.totals);
            Ok(())
        })
        .expect("rows");
        assert_eq!(read, [held]);

        // One more than a column holds is an error, never a wrapped value.
        let too_many_units = Totals { units: 10u128.pow(38), ..held };
        let too_much = Totals { amount: largest + 1, ..held };
        for totals in [too_many_units, too_much] {
            let mut writer = RollupWriter::create(&path).expect("created");
            let error = writer.write(&[row(totals)]).expect_err("refused");
            assert!(matches!(error, Error::Limit(_)), "a capacity limit, not a bug: {error}");
            let error = error.to_string();
            assert!(error.contains("of one rollup group add up to 1000000000000000000000000000000000000"), "{error}");
        }
        // Below the columns' range too, and a record count past Int64, in a
        // row that is not the first.
        let too_little = Totals { duration: -largest - 1, ..held };
        let too_many_records = Totals { records: i64::MAX as u64 + 1, ..held };
        for (totals, says) in [
            (too_little, "duration of one rollup group add up to -1000000000000000000000000000000000000"),
            (too_many_records, "records of one rollup group add up to 9223372036854775808, more than Int64 holds"),
        ] {
            let mut writer = RollupWriter::create(&path).expect("created");
            let error = writer.write(&[row(held), row(totals)]).expect_err("refused");
            assert!(matches!(error, Error::Limit(_)), "a capacity limit, not a bug: {error}");
            let error = error.to_string();
            assert!(error.contains(says) && error.contains("r.parquet"), "{error}");
        }
    }

    /// Rows of several products, subaccounts, types, places and codes.
    fn varied_rows(n: usize) -> Vec<RollupRef<'static>> {
        let subaccounts = ["", "SA1", "SA2", "a subaccount id longer than twelve bytes"];
        let types = ["local", "tollfree", "outbound", "a type name longer than twelve"];
        let codes = ["4000", "200", "", "9999"];
        (0..n)
            .map(|i| {
                let product = [Product::Voice, Product::Message, Product::Other][i % 3];
                let has_place = product.has_country_and_direction();
                RollupRef {
                    auth_id: "A1",
                    slot: (i as i64 / 7) * 900,
                    dims: Dims {
                        product,
                        type_: types[i / 5 % 4],
                        subaccount: if product == Product::Other { "" } else { subaccounts[i / 3 % 4] },
                        country: has_place.then(|| Country::parse(if i % 2 == 0 { b"US" } else { b"DE" })).flatten(),
                        direction: has_place.then_some(if i % 4 < 2 {
                            Direction::Inbound
                        } else {
                            Direction::Outbound
                        }),
                        code: if product.has_error_code() || product.has_hangup_cause() {
                            codes[i / 11 % 4]
                        } else {
                            ""
                        },
                    },
                    totals: Totals { records: i as u64 + 1, units: 2, duration: 3, amount: i as i128, surcharge: 0 },
                }
            })
            .collect()
    }

    /// What a request reads of each row of a rollup file's only row group.
    fn read_back(path: &Path) -> Vec<String> {
        let file = RollupFile::open(path, unsummed(path)).expect("opened");
        let group = file.read_group(0, Interval::ALL, true).expect("read").expect("in the window");
        let columns = GroupColumns::new(path, &group).expect("columns");
        (0..columns.len())
            .map(|i| {
                let r = columns.row(i);
                let texts = [r.subaccount, r.product, r.type_, r.country, r.direction, r.error_code, r.hangup_cause];
                let texts: Vec<&str> = texts.iter().map(|t| t.text()).collect();
                format!("{} {texts:?} {} {} {} {} {}", r.slot, r.records, r.units, r.duration, r.amount, r.surcharge)
            })
            .collect()
    }

    /// Text columns read as dictionary keys give each row its text; a file
    /// whose text pages are plain (an older writer's) reads the same.
    #[test]
    fn text_reads_the_same_from_dictionary_and_plain_pages() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rows = varied_rows(300);
        let path = dir.path().join("dictionary.parquet");
        let mut writer = RollupWriter::create(&path).expect("created");
        writer.write(&rows).expect("written");
        writer.finish(&Syncer::at_once()).expect("finished");
        // The same rows, every text column written plain.
        let plain = dir.path().join("plain.parquet");
        let writer = RollupWriter::create(&plain).expect("created");
        let keyed = rows.iter().map(|row| KeyedRollup { row: *row, ids: [0, 1, 2, 3] });
        let mut columns = rollup_columns(&writer.out, rows.len(), keyed).expect("columns");
        let text = |f: fn(&RollupRef<'static>) -> String| {
            let values: Vec<String> = rows.iter().map(f).collect();
            Column::ids(values.iter().map(|v| v.as_str()), rows.len()).expect("a plain column")
        };
        columns[0] = text(|r| r.auth_id.to_owned());
        columns[1] = text(|r| r.dims.subaccount.to_owned());
        columns[3] = text(|r| r.dims.product.as_str().to_owned());
        columns[4] = text(|r| r.dims.type_.to_owned());
        columns[5] = text(|r| r.dims.country.map_or(String::new(), |c| c.as_str().to_owned()));
        columns[6] = text(|r| r.dims.direction.map_or("", |d| d.as_str()).to_owned());
        columns[7] = text(|r| if r.dims.product.has_error_code() { r.dims.code } else { "" }.to_owned());
        columns[8] = text(|r| if r.dims.product.has_hangup_cause() { r.dims.code } else { "" }.to_owned());
        let mut out = writer.out;
        let group = out.encode(rows.len(), columns).expect("encoded");
        out.write(group).expect("written");
        out.finish(&Syncer::at_once()).expect("finished");
        let expected = read_back(&path);
        assert_eq!(expected.len(), 300);
        assert!(expected[3].starts_with("0 [\"SA1\", \"voice\", \"local\", \"DE\", \"outbound\", \"\", \"4000\"] 4 "));
        let long = "a subaccount id longer than twelve bytes";
        assert!(expected.iter().any(|row| row.contains(long) && row.contains("a type name longer than twelve")));
        assert_eq!(read_back(&plain), expected);
    }

    /// A rollup file damaged anywhere in its column chunks is an error or
    /// rows whose every text reads: never a panic or an abort, never a key
    /// past its dictionary.
    #[test]
    fn damaged_column_chunks_are_errors_not_crashes() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("r.parquet");
        let mut writer = RollupWriter::create(&path).expect("created");
        writer.write(&varied_rows(300)).expect("written");
        writer.finish(&Syncer::at_once()).expect("finished");
        let good = std::fs::read(&path).expect("read");
        let file = RollupFile::open(&path, unsummed(&path)).expect("opened");
        let columns = file.metadata.row_groups[0].parquet_columns();
        let data_end = columns.iter().map(|c| c.byte_range().end as usize).max().expect("columns");
        let damaged = dir.path().join("damaged.parquet");
        let (mut errors, mut read) = (0, 0);
        for (at, flip) in (4..data_end).zip([0xff_u8, 0x01, 0x80, 0x7f, 0x10].into_iter().cycle()) {
            let mut bytes = good.clone();
            bytes[at] ^= flip;
            std::fs::write(&damaged, &bytes).expect("written");
            let outcome = RollupFile::open(&damaged, unsummed(&damaged)).and_then(|file| {
                let Some(group) = file.read_group(0, Interval::ALL, false)? else { return Ok(0) };
                let columns = GroupColumns::new(&damaged, &group)?;
                let row = |i| columns.row(i);
                Ok((0..columns.len()).map(row).map(|r| r.subaccount.text().len() + r.error_code.text().len()).sum())
            });
            match outcome {
                Ok(_) => read += 1,
                Err(_) => errors += 1,
            }
        }
        assert!(errors > 0 && read > 0, "{errors} errors, {read} read");
    }

    /// A row group's slots bound from the footer's statistics, and a row
    /// group wholly outside the window left unread.
    #[test]
    fn a_row_group_outside_the_window_is_skipped_by_its_statistics() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("r.parquet");
        let totals = Totals { records: 1, units: 1, duration: 0, amount: 1, surcharge: 0 };
        let mut writer = RollupWriter::create(&path).expect("created");
        writer.write(&[charge_row(0, totals), charge_row(900, totals)]).expect("written");
        writer.write(&[charge_row(86_400, totals), charge_row(90_000, totals)]).expect("written");
        writer.finish(&Syncer::at_once()).expect("finished");
        let file = RollupFile::open(&path, unsummed(&path)).expect("opened");
        assert_eq!(file.groups(), [(0, 2), (2, 2)]);
        assert_eq!((file.slot_bounds(0), file.slot_bounds(1)), (Some((0, 900)), Some((86_400, 90_000))));
        assert!(file.read_group(0, Interval { start: 86_400, end: 172_800 }, false).expect("read").is_none());
        let second =
            file.read_group(1, Interval { start: 86_400, end: 172_800 }, false).expect("read").expect("in the window");
        let columns = GroupColumns::new(&path, &second).expect("columns");
        let slots: Vec<i64> = (0..columns.len()).map(|i| columns.row(i).slot).collect();
        assert_eq!(slots, [86_400, 90_000]);
        // A window that touches one slot of a group reads the group.
        assert!(file.read_group(0, Interval { start: 900, end: 1800 }, true).expect("read").is_some());
    }
}
