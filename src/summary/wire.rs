//! The JSON shapes of api.md section 2.3, field order fixed by the types.
//!
//! Optional fields are omitted, never null. Decimals are written from the
//! exact value with a point and no exponent (see [`Decimal`]).

use std::collections::BTreeMap;

use serde::ser::Error as _;
use serde::{Serialize, Serializer};

use crate::money::Amount;

/// An exact decimal written as a JSON number (`12.5`, `3.0`, `0.0085`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal(pub Amount);

impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = serde_json::value::RawValue::from_string(self.0.to_json_number()).map_err(S::Error::custom)?;
        raw.serialize(serializer)
    }
}

/// One page of the usage summary.
#[derive(Debug, Serialize)]
pub struct Page<'a> {
    /// Request identifier.
    pub api_id: String,
    /// Request and totals.
    pub meta: Meta<'a>,
    /// Usage rows of this page.
    pub usage: Vec<UsageItem<'a>>,
    /// Other charges: page 1 only, and only when returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_charges: Option<Vec<ChargeItem<'a>>>,
}

/// `meta` of a page.
#[derive(Debug, Serialize)]
pub struct Meta<'a> {
    /// The account.
    pub auth_id: &'a str,
    /// The scoped subaccount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subaccount_auth: Option<&'a str>,
    /// Bucket size.
    pub granularity: &'static str,
    /// Window start.
    pub from_date: String,
    /// Window end, exclusive.
    pub to_date: String,
    /// The reporting zone, when the request or the account named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<&'static str>,
    /// Currency of every amount.
    pub currency: &'a str,
    /// Rows per page.
    pub page_size: u32,
    /// Cursor of the next page, absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
    /// Usage plus other charges over the whole window (page 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_spend: Option<Decimal>,
    /// Usage of the scoped subaccount (page 1, scoped requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_subaccount_spend: Option<Decimal>,
    /// Usage per subaccount (page 1, unscoped requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subaccount_spend: Option<BTreeMap<&'a str, Decimal>>,
}

/// One `usage` row.
#[derive(Debug, Serialize)]
pub struct UsageItem<'a> {
    /// Bucket start, clipped to the window.
    pub from_date: String,
    /// Bucket end, clipped to the window.
    pub to_date: String,
    /// Product name.
    pub product: &'static str,
    /// Sub-type.
    #[serde(rename = "type")]
    pub type_: &'a str,
    /// Subaccount, absent on parent-level rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subaccount_auth: Option<&'a str>,
    /// Country, absent when empty or not a dimension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<&'a str>,
    /// Direction, absent when not a dimension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<&'static str>,
    /// Units.
    pub total_units: u128,
    /// Seconds, for voice, zentrunk and transcription.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<Decimal>,
    /// Charge.
    pub total_amount: Decimal,
    /// Surcharge, for message, voice and zentrunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surcharge: Option<Decimal>,
    /// Message error code (`""` when delivered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'a str>,
    /// Call hangup cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hangup_cause: Option<&'a str>,
    /// Label of the non-empty code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<&'static str>,
}

/// One `other_charges` item.
#[derive(Debug, Serialize)]
pub struct ChargeItem<'a> {
    /// Bucket start, clipped to the window.
    pub from_date: String,
    /// Bucket end, clipped to the window.
    pub to_date: String,
    /// Customer-facing label.
    pub description: &'a str,
    /// Units billed.
    pub total_units: u128,
    /// Amount charged.
    pub total_amount: Decimal,
}

/// The error body of every failed request.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// Request identifier.
    pub api_id: &'a str,
    /// The message.
    pub error: &'a str,
}
