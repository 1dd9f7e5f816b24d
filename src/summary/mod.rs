//! The usage summary: [`build`] turns a data set and a request into a
//! [`Summary`] (every row of the result, sorted, with its totals), and
//! [`Summary::page`] cuts the page the API returns.
//!
//! `summary`, `report` and the HTTP server all go through [`build`] (or
//! [`build_many`] for several accounts in one pass) and [`Summary::page`],
//! so they answer with the same bytes.

mod notices;
pub mod render;
pub mod wire;

pub use notices::{empty_report, notices, unknown_account, Covered};

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};

use crate::aggregate::rows::{self, AccountRows, PackedKey};
pub use crate::aggregate::rows::{RowKey, Rows};
use crate::aggregate::{AccountScope, Aggregate, AggregateOptions, Bucketing, OnBadRow, Selector, Totals};
use crate::dataset::Dataset;
use crate::error::{BadRequest, Error, Result};
use crate::labels;
use crate::money::Amount;
use crate::query::{UsageParams, UsageRequest};
use crate::records::{Country, Product};
use crate::time::{format_instant, Buckets, Interval};
use crate::token::TokenKey;
use wire::{ChargeItem, Decimal, Meta, Page, UsageItem};

/// The whole result of one account's request, before paging.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The request answered.
    pub request: UsageRequest,
    /// Currency of every amount.
    pub currency: String,
    /// The window's buckets; row keys index into them.
    pub buckets: Buckets,
    /// Usage rows, in the report's order.
    pub rows: Rows,
    /// Other charges, when the request returns them.
    pub charges: Option<Rows>,
    /// Sum of every usage row.
    pub usage_spend: Amount,
    /// Usage plus other charges (when returned).
    pub total_spend: Amount,
    /// Usage per subaccount; parent-level rows excluded.
    pub subaccount_spend: BTreeMap<String, Amount>,
    /// What dates the account's records and the data set cover, when the
    /// pass that answered saw them (`None`: answered without one, from a
    /// store's rollups); for [`notices`](crate::summary::notices()), never for the answer.
    pub covered: Option<Covered>,
    content_digest: [u8; 32],
}

/// The selector of a request over `accounts`, bucketed by `bucketing`.
pub fn selector(params: &UsageParams, accounts: AccountScope, bucketing: Bucketing) -> Selector {
    Selector {
        accounts,
        subaccount: params.subaccount_auth.clone(),
        products: params.products,
        country: params.country,
        direction: params.direction,
        error_code: params.error_code.clone(),
        hangup_cause: params.hangup_cause.clone(),
        bucketing,
    }
}

/// Resolves `params` for `auth_id` on `dataset`: the window in the
/// request's time zone, else the account's own (`accounts.csv`), else UTC.
/// The one way `summary`, `serve` and `report` turn parameters into a
/// request.
pub fn resolve(
    dataset: &Dataset,
    auth_id: &str,
    params: UsageParams,
    now: DateTime<Utc>,
    key: &TokenKey,
) -> Result<UsageRequest, BadRequest> {
    let account_tz = dataset.accounts.get(auth_id).and_then(|a| a.timezone);
    UsageRequest::resolve(auth_id, params, now, account_tz, key)
}

/// Answers one request from `dataset`.
pub fn build(dataset: &Dataset, request: &UsageRequest) -> Result<Summary> {
    let buckets = request.window.buckets(request.params.granularity);
    let selector = selector(&request.params, AccountScope::one(&request.auth_id), Bucketing::shared(buckets.clone()));
    let currency = dataset.accounts.currency(&request.auth_id);
    let (rows, pass) = dataset.account_rows(&selector, &request.auth_id)?;
    let mut summary = summarize_rows(request, currency, &buckets, rows)?;
    summary.covered = pass.map(|pass| Covered { account: pass.spans.get(&request.auth_id).copied(), data: pass.span });
    Ok(summary)
}

/// One set of parameters asked of many accounts: what [`build_many`]
/// answers.
#[derive(Clone, Copy, Debug)]
pub struct BatchRequest<'a> {
    /// The checked parameters, shared by every account.
    pub params: &'a UsageParams,
    /// Which accounts.
    pub accounts: &'a AccountScope,
    /// "Now" for the date defaults.
    pub now: DateTime<Utc>,
    /// Fail on a bad row, or set it aside.
    pub on_bad_row: OnBadRow,
}

/// Every account's answer to one set of parameters, from a single pass.
#[derive(Debug)]
pub struct Batch {
    /// One summary per account, by account id.
    pub summaries: BTreeMap<String, Summary>,
    /// The pass itself: counts, set-aside rows, files read.
    pub aggregate: Aggregate,
    /// Accounts asked for by name that are neither in `accounts.csv` nor in
    /// any record: no summary, sorted.
    pub skipped: Vec<String>,
}

/// Answers `request` for every account it names (each in its own time
/// zone, when `accounts.csv` names one and the request does not) in one
/// pass over `dataset`. With [`AccountScope::All`], every account with a
/// row in `accounts.csv` or any current record (in the window or not; a
/// superseded or withdrawn one counts nowhere) is reported.
/// `pass` says who hears the bytes read and where set-aside rows go; the
/// request's `on_bad_row` is the one used.
pub fn build_many(
    dataset: &Dataset,
    request: &BatchRequest<'_>,
    key: &TokenKey,
    pass: AggregateOptions<'_>,
) -> Result<Batch> {
    let BatchRequest { params, accounts, now, on_bad_row } = *request;
    let resolve = |auth_id: &str| resolve(dataset, auth_id, params.clone(), now, key);
    let mut named: BTreeSet<String> = match accounts {
        AccountScope::All => dataset.accounts.iter().map(|a| a.auth_id.clone()).collect(),
        AccountScope::Some(set) => set.clone(),
    };
    let mut requests = BTreeMap::new();
    let mut by_account = FxHashMap::default();
    for auth_id in &named {
        let request = resolve(auth_id)?;
        by_account.insert(auth_id.clone(), request.window.buckets(params.granularity));
        requests.insert(auth_id.clone(), request);
    }
    let default_request = resolve("")?;
    let default = matches!(accounts, AccountScope::All).then(|| default_request.window.buckets(params.granularity));
    let bucketing = Bucketing { default: default.clone(), by_account };
    let selector = selector(params, accounts.clone(), bucketing);
    let aggregate = dataset.aggregate(&selector, AggregateOptions { on_bad_row, ..pass })?;
    // Every account the records know, with `all` (the spans cover each
    // account of the scope, whatever the window): one whose records are
    // all outside the window gets its empty report, as an account of
    // `accounts.csv` without records does. A named account's groups are
    // its own.
    if matches!(accounts, AccountScope::All) {
        named.extend(aggregate.spans.keys().cloned());
    }
    // An account asked for by name that neither `accounts.csv` nor any
    // record knows gets no summary: it is most likely a typo.
    let (named, skipped): (BTreeSet<String>, BTreeSet<String>) =
        named.into_iter().partition(|id| dataset.accounts.get(id).is_some() || aggregate.spans.contains_key(id));
    let skipped: Vec<String> = skipped.into_iter().collect();
    // Each account's summary on the threads (every account's report has 50
    // of them to build); the first error in account order is the error.
    let named: Vec<(String, Option<UsageRequest>)> = named
        .into_iter()
        .map(|auth_id| {
            let request = requests.remove(&auth_id);
            (auth_id, request)
        })
        .collect();
    let built: Vec<Result<(String, Summary)>> = named
        .into_par_iter()
        .map(|(auth_id, request)| {
            let request = match request {
                Some(request) => request,
                None => resolve(&auth_id)?,
            };
            let buckets =
                selector.bucketing.of(&auth_id).cloned().unwrap_or_else(|| request.window.buckets(params.granularity));
            let summary = summarize(&request, dataset.accounts.currency(&auth_id), &buckets, &aggregate)?;
            Ok((auth_id, summary))
        })
        .collect();
    let summaries = built.into_iter().collect::<Result<BTreeMap<String, Summary>>>()?;
    Ok(Batch { summaries, aggregate, skipped })
}

/// The summary of `request`'s account from an aggregate that holds it.
pub fn summarize(request: &UsageRequest, currency: &str, buckets: &Buckets, aggregate: &Aggregate) -> Result<Summary> {
    let covered = Covered { account: aggregate.spans.get(&request.auth_id).copied(), data: aggregate.span };
    let rows = AccountRows::of_groups(&aggregate.groups, &request.auth_id);
    let mut summary = summarize_rows(request, currency, buckets, rows)?;
    summary.covered = Some(covered);
    Ok(summary)
}

/// The summary of `request`'s account from its rows in the report's order
/// (usage rows and other charges apart).
pub(crate) fn summarize_rows(
    request: &UsageRequest,
    currency: &str,
    buckets: &Buckets,
    rows: AccountRows,
) -> Result<Summary> {
    let overflow = || Error::Internal("sum overflow".to_owned());
    let params = &request.params;
    let charges_returned = params.subaccount_auth.is_none() && params.products.contains(Product::Other);
    let AccountRows { strings, usage, charges } = rows;
    let (content_digest, spends) = digest_and_spends(currency, &strings, &usage, &charges, charges_returned);
    let Spends { usage: usage_spend, charges: charge_spend, by_subaccount } = spends.ok_or_else(overflow)?;
    let subaccount_spend =
        by_subaccount.into_iter().map(|(id, spend)| (strings[id as usize].to_string(), spend)).collect();
    let total_spend =
        if charges_returned { usage_spend.checked_add(charge_spend).ok_or_else(overflow)? } else { usage_spend };
    let summary = Summary {
        request: request.clone(),
        currency: currency.to_owned(),
        buckets: buckets.clone(),
        rows: Rows::new(strings.clone(), usage),
        charges: charges_returned.then(|| Rows::new(strings, charges)),
        usage_spend,
        total_spend,
        subaccount_spend,
        covered: None,
        content_digest,
    };
    Ok(summary)
}

impl Summary {
    /// Number of pages (at least one).
    pub fn page_count(&self) -> u64 {
        let size = self.request.params.page_size as u64;
        (self.rows.len() as u64).div_ceil(size).max(1)
    }

    /// The page of the request (its token's offset, or page 1). A token
    /// cut from another result (the data changed since it was issued) is a
    /// 400: its offset would repeat or skip rows of this one.
    pub fn requested_page(&self, key: &TokenKey) -> Result<Page<'_>, BadRequest> {
        if self.request.snapshot.is_some_and(|snapshot| snapshot != self.snapshot()) {
            return Err(BadRequest::new(
                "page_token",
                "invalid page_token: the data changed since it was issued, so its page would repeat or skip rows; \
                 start again from page 1 (send the request without page_token)",
            ));
        }
        self.page(self.request.offset, key)
    }

    /// The snapshot this result's page tokens carry: a digest of every row
    /// of every page, the other charges and the currency (the digest that
    /// goes into `api_id`), with the time zone and every bucket boundary:
    /// rows are numbered by bucket, so an account whose zone changed
    /// between pages would otherwise keep its snapshot while each row's
    /// dates moved. The same data answers the same request with the same
    /// snapshot, from raw files or a store.
    pub fn snapshot(&self) -> [u8; 16] {
        let mut stream = Vec::with_capacity(64 + 8 * self.buckets.bounds().len());
        stream.extend_from_slice(&self.content_digest);
        text_field(&mut stream, self.buckets.tz().name());
        for bound in self.buckets.bounds() {
            stream.extend_from_slice(&bound.to_le_bytes());
        }
        xxhash_rust::xxh3::xxh3_128(&stream).to_le_bytes()
    }

    /// The page whose first row is `offset`, as the API returns it.
    pub fn page(&self, offset: u64, key: &TokenKey) -> Result<Page<'_>, BadRequest> {
        let request = &self.request;
        let params = &request.params;
        let n_rows = self.rows.len() as u64;
        if offset > 0 && offset >= n_rows {
            return Err(BadRequest::new(
                "page_token",
                "invalid page_token: it points past the end of the result (the data changed since it was issued)",
            ));
        }
        let end = (offset + params.page_size as u64).min(n_rows);
        let first_page = offset == 0;
        let tz = self.buckets.tz();
        // Rows come bucket by bucket, so a page formats about one span.
        let mut last: Option<(u32, Period)> = None;
        let mut span = |bucket: u32| match &last {
            Some((b, text)) if *b == bucket => text.clone(),
            _ => {
                let Interval { start, end } = self.buckets.span(bucket);
                let text = Period { from_date: format_instant(start, tz), to_date: format_instant(end, tz) };
                last = Some((bucket, text.clone()));
                text
            }
        };
        let usage = self
            .rows
            .range(offset as usize, end as usize)
            .map(|(key, totals)| usage_item(key, totals, span(key.bucket)))
            .collect();
        let other_charges = match (&self.charges, first_page) {
            (Some(charges), true) => Some(
                charges
                    .iter()
                    .map(|(key, totals)| {
                        let Period { from_date, to_date } = span(key.bucket);
                        ChargeItem {
                            from_date,
                            to_date,
                            description: key.dims.type_,
                            total_units: totals.units,
                            total_amount: Decimal(Amount::from_nanos(totals.amount)),
                        }
                    })
                    .collect(),
            ),
            _ => None,
        };
        let scoped = params.subaccount_auth.is_some();
        let meta = Meta {
            auth_id: &request.auth_id,
            subaccount_auth: params.subaccount_auth.as_deref(),
            granularity: params.granularity.as_str(),
            from_date: format_instant(request.window.start, tz),
            to_date: format_instant(request.window.end, tz),
            timezone: request.timezone_named.then(|| tz.name()),
            currency: &self.currency,
            page_size: params.page_size,
            next_page_token: (end < n_rows).then(|| request.token_at(end, self.snapshot(), key)),
            total_spend: first_page.then_some(Decimal(self.total_spend)),
            total_subaccount_spend: (first_page && scoped).then_some(Decimal(self.usage_spend)),
            subaccount_spend: (first_page && !scoped)
                .then(|| self.subaccount_spend.iter().map(|(k, v)| (k.as_str(), Decimal(*v))).collect()),
        };
        Ok(Page { api_id: self.api_id(offset), meta, usage, other_charges })
    }

    /// Every page, in order, as a client following the tokens would see them.
    pub fn pages<'s>(&'s self, key: &'s TokenKey) -> impl Iterator<Item = Result<Page<'s>, BadRequest>> + 's {
        self.page_offsets().map(move |offset| self.page(offset, key))
    }

    /// The offset of every page's first row, in order ([`Summary::page`]
    /// of each is [`Summary::pages`]).
    pub fn page_offsets(&self) -> impl Iterator<Item = u64> + use<> {
        let size = self.request.params.page_size as u64;
        (0..self.page_count()).map(move |i| i * size)
    }

    /// A request identifier derived from the request and the result, so
    /// that the same inputs always give the same bytes.
    pub fn api_id(&self, offset: u64) -> String {
        let mut hash = Sha256::new();
        hash.update(self.request.digest);
        hash.update(self.request.window.start.to_le_bytes());
        hash.update(self.request.window.end.to_le_bytes());
        hash.update(offset.to_le_bytes());
        hash.update(self.content_digest);
        uuid_text(&hash.finalize())
    }
}

/// What a result's rows spend: usage, other charges, usage per
/// subaccount id (parent-level rows excluded).
#[derive(Default)]
struct Spends {
    usage: Amount,
    charges: Amount,
    by_subaccount: FxHashMap<u32, Amount>,
}

impl Spends {
    /// The spends of usage `rows`; `None` on an overflow.
    fn of_usage(rows: &[(PackedKey, Totals)]) -> Option<Spends> {
        let mut spends = Spends::default();
        for (key, totals) in rows {
            let amount = Amount::from_nanos(totals.amount);
            spends.usage = spends.usage.checked_add(amount)?;
            if key.subaccount != rows::ABSENT {
                let sum = spends.by_subaccount.entry(key.subaccount).or_default();
                *sum = sum.checked_add(amount)?;
            }
        }
        Some(spends)
    }

    /// These spends and `other`'s; `None` on an overflow.
    fn add(mut self, other: Spends) -> Option<Spends> {
        self.usage = self.usage.checked_add(other.usage)?;
        self.charges = self.charges.checked_add(other.charges)?;
        for (subaccount, amount) in other.by_subaccount {
            let sum = self.by_subaccount.entry(subaccount).or_default();
            *sum = sum.checked_add(amount)?;
        }
        Some(self)
    }
}

/// Rows of one block of the digest: each block is hashed on its own, on
/// the threads, and the digest hashes the blocks' hashes in order.
const DIGEST_BLOCK_ROWS: usize = 4096;

/// The digest of a result's content and its spends, in one pass over the
/// rows (blocks of them on the threads side by side).
///
/// The digest covers the currency, every usage row and the other charges
/// when `with_charges`: the same rows give the same digest, from raw files
/// or a store, on any number of threads. It is XXH3-128 over the currency's
/// text field, the numbers of usage and charge rows hashed (u64 each), and
/// the XXH3-128 (16 bytes, little-endian) of each block of
/// [`DIGEST_BLOCK_ROWS`] rows' stream ([`digest_row`]): the usage rows'
/// blocks, then the charges'. The spends cover every row; `None` on an
/// overflow (every block's sums, then the blocks' in order: the same on
/// any number of threads).
fn digest_and_spends(
    currency: &str,
    strings: &[Box<str>],
    usage: &[(PackedKey, Totals)],
    charges: &[(PackedKey, Totals)],
    with_charges: bool,
) -> ([u8; 32], Option<Spends>) {
    let texts = TextFields::new(strings);
    let hashed_charges = if with_charges { charges } else { &[] };
    let block = |buffer: &mut Vec<u8>, rows: &[(PackedKey, Totals)]| -> u128 {
        buffer.clear();
        for (key, totals) in rows {
            digest_row(&texts, buffer, key, totals);
        }
        xxhash_rust::xxh3::xxh3_128(buffer)
    };
    let buffer = || Vec::with_capacity(DIGEST_BLOCK_ROWS * 160);
    // Usage blocks: their hash and spends.
    let usage_blocks: Vec<(u128, Option<Spends>)> = usage
        .par_chunks(DIGEST_BLOCK_ROWS)
        .map_init(buffer, |buffer, rows| (block(buffer, rows), Spends::of_usage(rows)))
        .collect();
    let charge_blocks: Vec<u128> =
        hashed_charges.par_chunks(DIGEST_BLOCK_ROWS).map_init(buffer, |buffer, rows| block(buffer, rows)).collect();
    let mut stream = Vec::with_capacity(64 + 16 * (usage_blocks.len() + charge_blocks.len()));
    text_field(&mut stream, currency);
    stream.extend_from_slice(&(usage.len() as u64).to_le_bytes());
    stream.extend_from_slice(&(hashed_charges.len() as u64).to_le_bytes());
    let hashes = usage_blocks.iter().map(|(hash, _)| *hash).chain(charge_blocks.iter().copied());
    for hash in hashes {
        stream.extend_from_slice(&hash.to_le_bytes());
    }
    let mut digest = [0u8; 32];
    digest[..16].copy_from_slice(&xxhash_rust::xxh3::xxh3_128(&stream).to_le_bytes());
    let charge_spend =
        charges.iter().try_fold(Amount::ZERO, |sum, (_, totals)| sum.checked_add(Amount::from_nanos(totals.amount)));
    let start = charge_spend.map(|charges| Spends { charges, ..Spends::default() });
    let spends = start.and_then(|start| usage_blocks.into_iter().try_fold(start, |sum, (_, block)| sum.add(block?)));
    (digest, spends)
}

/// One row in the digest's stream.
#[inline]
fn digest_row(texts: &TextFields, b: &mut Vec<u8>, key: &PackedKey, totals: &Totals) {
    let mut head = [0u8; 6];
    head[..4].copy_from_slice(&key.bucket.to_le_bytes());
    head[4] = key.product as u8;
    head[5] = key.direction.map_or(0, |d| d as u8 + 1);
    b.extend_from_slice(&head);
    // An absent type reads as the empty text, an absent subaccount or code
    // as no text.
    texts.write(b, key.type_, &TEXT_EMPTY);
    texts.write(b, key.subaccount, &TEXT_NONE);
    match key.country {
        Some(country) => {
            let mut field = [0u8; 10];
            field[..8].copy_from_slice(&3u64.to_le_bytes());
            field[8..].copy_from_slice(country.as_bytes());
            b.extend_from_slice(&field);
        }
        None => b.extend_from_slice(&TEXT_NONE),
    }
    texts.write(b, key.code, &TEXT_NONE);
    let mut sums = [0u8; 72];
    sums[..8].copy_from_slice(&totals.records.to_le_bytes());
    sums[8..24].copy_from_slice(&totals.units.to_le_bytes());
    sums[24..40].copy_from_slice(&totals.duration.to_le_bytes());
    sums[40..56].copy_from_slice(&totals.amount.to_le_bytes());
    sums[56..].copy_from_slice(&totals.surcharge.to_le_bytes());
    b.extend_from_slice(&sums);
}

/// An absent text in the digest's stream: length 0.
const TEXT_NONE: [u8; 8] = 0u64.to_le_bytes();
/// The empty text in the digest's stream: length 0 + 1.
const TEXT_EMPTY: [u8; 8] = 1u64.to_le_bytes();

/// A text in the digest's stream: its length + 1 (u64, little-endian),
/// then its bytes.
fn text_field(buffer: &mut Vec<u8>, text: &str) {
    buffer.extend_from_slice(&(text.len() as u64 + 1).to_le_bytes());
    buffer.extend_from_slice(text.as_bytes());
}

/// Every string of a table as the digest's stream holds it
/// ([`text_field`]), made once. A short field is kept in a fixed-size slot
/// and copied whole (a copy of known size, no call), then the buffer is cut
/// back to the field's length.
struct TextFields {
    fields: Vec<TextSlot>,
}

/// Bytes of a [`TextFields`] slot: fields of texts up to 32 bytes.
const SLOT: usize = 40;

/// One string's field in the digest's stream.
enum TextSlot {
    /// The field in the first `.1` bytes, zeros after.
    Short([u8; SLOT], usize),
    /// A field longer than a slot.
    Long(Vec<u8>),
}

impl TextFields {
    fn new(strings: &[Box<str>]) -> TextFields {
        let fields = strings
            .iter()
            .map(|text| {
                let mut field = Vec::with_capacity(text.len() + 8);
                text_field(&mut field, text);
                if field.len() <= SLOT {
                    let mut slot = [0u8; SLOT];
                    slot[..field.len()].copy_from_slice(&field);
                    TextSlot::Short(slot, field.len())
                } else {
                    TextSlot::Long(field)
                }
            })
            .collect();
        TextFields { fields }
    }

    /// Appends the field of string `id` to `buffer`, `absent` for
    /// [`rows::ABSENT`].
    #[inline]
    fn write(&self, buffer: &mut Vec<u8>, id: u32, absent: &[u8; 8]) {
        if id == rows::ABSENT {
            buffer.extend_from_slice(absent);
            return;
        }
        match &self.fields[id as usize] {
            TextSlot::Short(slot, len) => {
                let end = buffer.len() + len;
                buffer.extend_from_slice(slot);
                buffer.truncate(end);
            }
            TextSlot::Long(field) => buffer.extend_from_slice(field),
        }
    }
}

/// A bucket's bounds as the API writes them.
#[derive(Clone)]
struct Period {
    from_date: String,
    to_date: String,
}

fn usage_item<'a>(key: RowKey<'a>, totals: &Totals, Period { from_date, to_date }: Period) -> UsageItem<'a> {
    let product = key.dims.product;
    let code = key.dims.code;
    let error_reason = match code {
        Some(code) if !code.is_empty() && product.has_error_code() => Some(labels::error_code(code)),
        Some(code) if !code.is_empty() => Some(labels::hangup_cause(code)),
        _ => None,
    };
    UsageItem {
        from_date,
        to_date,
        product: product.as_str(),
        type_: key.dims.type_,
        subaccount_auth: key.dims.subaccount,
        country: key.dims.country.map(Country::as_static_str),
        direction: key.dims.direction.map(|d| d.as_str()),
        total_units: totals.units,
        duration_seconds: (product != Product::Message).then_some(Decimal(Amount::from_nanos(totals.duration))),
        total_amount: Decimal(Amount::from_nanos(totals.amount)),
        surcharge: (product != Product::Transcription).then_some(Decimal(Amount::from_nanos(totals.surcharge))),
        error_code: code.filter(|_| product.has_error_code()),
        hangup_cause: code.filter(|_| product.has_hangup_cause()),
        error_reason,
    }
}

/// Formats the first 16 bytes of a hash as a UUID (version 8, RFC 9562).
pub fn uuid_text(hash: &[u8]) -> String {
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// A page as JSON text: compact, or indented with `pretty`.
pub fn to_json<T: serde::Serialize>(value: &T, pretty: bool) -> Result<String> {
    let text = if pretty { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) };
    text.map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intern::Interner;
    use crate::records::{Country, Direction};

    /// The rows' stream as the digest's contract reads it, field by field
    /// over the rows' borrowed keys: the bytes a block's hash covers.
    fn stream_by_fields(rows: &Rows) -> Vec<u8> {
        let mut b = Vec::new();
        let text = |b: &mut Vec<u8>, value: Option<&str>| match value {
            Some(v) => {
                b.extend_from_slice(&(v.len() as u64 + 1).to_le_bytes());
                b.extend_from_slice(v.as_bytes());
            }
            None => b.extend_from_slice(&0u64.to_le_bytes()),
        };
        for (key, totals) in rows.iter() {
            b.extend_from_slice(&key.bucket.to_le_bytes());
            b.extend_from_slice(&[key.dims.product as u8, key.dims.direction.map_or(0, |d| d as u8 + 1)]);
            text(&mut b, Some(key.dims.type_));
            text(&mut b, key.dims.subaccount);
            text(&mut b, key.dims.country.map(Country::as_static_str));
            text(&mut b, key.dims.code);
            b.extend_from_slice(&totals.records.to_le_bytes());
            b.extend_from_slice(&totals.units.to_le_bytes());
            b.extend_from_slice(&totals.duration.to_le_bytes());
            b.extend_from_slice(&totals.amount.to_le_bytes());
            b.extend_from_slice(&totals.surcharge.to_le_bytes());
        }
        b
    }

    /// The digest made from each string's bytes once, on the threads,
    /// equals its definition over the field-by-field stream: absent and
    /// empty texts, countries, codes, charges (hashed after the usage rows,
    /// or not at all), more rows than one block, on one thread and two;
    /// and the spends are every row's.
    #[test]
    fn the_digest_hashes_the_field_by_field_stream() {
        let mut strings = Interner::default();
        let (sms, sub, code, empty) =
            (strings.intern("sms"), strings.intern("SUB1"), strings.intern("30007"), strings.intern(""));
        let fees = strings.intern("Number Charges");
        let table = strings.into_table();
        let key = |bucket, product, type_, subaccount, country: Option<Country>, direction, code| PackedKey {
            bucket,
            type_,
            subaccount,
            code,
            product,
            country,
            direction,
        };
        let totals = |i: u64| Totals {
            records: i,
            units: u128::from(i) << 70,
            duration: -(i as i128),
            amount: i as i128 * 1_000_000_007,
            surcharge: 3,
        };
        let us = Country::parse(b"US");
        let mut usage: Vec<(PackedKey, Totals)> = Vec::new();
        for i in 0..(2 * DIGEST_BLOCK_ROWS as u32 + 808) {
            let row = match i % 4 {
                0 => key(i, Product::Message, sms, sub, us, Some(Direction::Outbound), code),
                1 => key(i, Product::Message, sms, rows::ABSENT, None, Some(Direction::Inbound), empty),
                2 => key(i, Product::Transcription, rows::ABSENT, rows::ABSENT, None, None, rows::ABSENT),
                _ => key(i, Product::Voice, empty, sub, us, None, rows::ABSENT),
            };
            usage.push((row, totals(u64::from(i))));
        }
        let charge = |bucket| (key(bucket, Product::Other, fees, rows::ABSENT, None, None, rows::ABSENT), totals(9));
        let charges = vec![charge(1499), charge(2999)];
        let expected = |with_charges: bool| {
            let mut stream = Vec::new();
            text_field(&mut stream, "USD");
            let hashed: &[(PackedKey, Totals)] = if with_charges { &charges } else { &[] };
            stream.extend_from_slice(&(usage.len() as u64).to_le_bytes());
            stream.extend_from_slice(&(hashed.len() as u64).to_le_bytes());
            for block in usage.chunks(DIGEST_BLOCK_ROWS).chain(hashed.chunks(DIGEST_BLOCK_ROWS)) {
                let rows = Rows::new(table.clone(), block.to_vec());
                stream.extend_from_slice(&xxhash_rust::xxh3::xxh3_128(&stream_by_fields(&rows)).to_le_bytes());
            }
            xxhash_rust::xxh3::xxh3_128(&stream).to_le_bytes()
        };
        let amount = |rows: &[(PackedKey, Totals)]| rows.iter().map(|(_, t)| t.amount).sum::<i128>();
        let sub_amount: i128 = usage.iter().filter(|(k, _)| k.subaccount == sub).map(|(_, t)| t.amount).sum();
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            for with_charges in [false, true] {
                let (digest, spends) =
                    pool.install(|| digest_and_spends("USD", &table, &usage, &charges, with_charges));
                assert_eq!(digest[..16], expected(with_charges));
                assert_eq!(digest[16..], [0; 16]);
                let spends = spends.expect("no overflow");
                assert_eq!(spends.usage, Amount::from_nanos(amount(&usage)));
                assert_eq!(spends.charges, Amount::from_nanos(amount(&charges)));
                let by_subaccount: Vec<(u32, Amount)> = spends.by_subaccount.into_iter().collect();
                assert_eq!(by_subaccount, [(sub, Amount::from_nanos(sub_amount))]);
            }
        }
        assert_ne!(expected(false), expected(true));
    }
}
