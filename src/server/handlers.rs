//! The operations of api.md section 4, one function each. A handler under
//! `/v1/Account/{auth_id}/` takes an [`Authorized`] request: the path read,
//! the credentials and the client address checked.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::authorized::Authorized;
use super::error::ApiError;
use super::{json_response, ApiId, Server};
use crate::query::UsageParams;
use crate::resources::wire::{EndpointBody, ListMeta, RecordingBody, RecordingItem, RecordingList};
use crate::resources::ListQuery;
use crate::summary;

/// The OpenAPI document, written by hand to match this module.
const OPENAPI: &str = include_str!("openapi.json");

pub(super) async fn healthz() -> Response {
    json_response(StatusCode::OK, r#"{"status":"ok"}"#.to_owned())
}

/// The schema, with this server's rate limit in its text.
pub(super) async fn openapi(State(server): State<Arc<Server>>) -> Response {
    let text = OPENAPI
        .replace("{RATE_LIMIT}", &server.rate.limit().to_string())
        .replace("{RATE_WINDOW}", &server.rate.window().as_secs().to_string());
    json_response(StatusCode::OK, text)
}

pub(super) async fn not_found() -> ApiError {
    ApiError::not_found()
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
}

fn now_us(server: &Server) -> i64 {
    server.now().timestamp_micros()
}

/// Runs `work` on the blocking pool; a panic or a cancelled task is a 502.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::upstream(format!("worker failed: {e}")))?
}

/// Runs `work` on the blocking pool and answers the JSON it makes with 200.
async fn json_on_pool(work: impl FnOnce() -> Result<String, ApiError> + Send + 'static) -> Result<Response, ApiError> {
    let text = blocking(work).await?;
    Ok(json_response(StatusCode::OK, text))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, ApiError> {
    summary::to_json(value, false).map_err(ApiError::from)
}

/// `GET /v1/Account/{auth_id}/UsageSummary/`
pub(super) async fn usage_summary(
    State(server): State<Arc<Server>>,
    Extension(ApiId(api_id)): Extension<ApiId>,
    Authorized { auth_id, generation }: Authorized,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    // On the blocking pool: a limit shared through the store's database
    // may wait on its lock, which must not hold an async worker.
    let admitted = {
        let (server, auth_id) = (server.clone(), auth_id.clone());
        blocking(move || Ok(server.rate.admit(&auth_id))).await?
    };
    if let Err(wait) = admitted {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return Err(ApiError {
            retry_after: Some(seconds.max(1)),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "rate limit exceeded: {} requests per {} seconds; retry later",
                    server.rate.limit(),
                    server.rate.window().as_secs()
                ),
            )
        });
    }
    let params = UsageParams::parse_query(query.as_deref().unwrap_or(""))?;
    let request = summary::resolve(&generation.dataset, &auth_id, params, server.now(), &server.token_key)?;
    json_on_pool(move || {
        let summary = summary::build(&generation.dataset, &request)?;
        let mut page = summary.requested_page(&server.token_key)?;
        page.api_id = api_id;
        to_json(&page)
    })
    .await
}

/// `GET /v1/Account/{auth_id}/Endpoint/{endpoint_id}/`
pub(super) async fn endpoint(
    State(server): State<Arc<Server>>,
    Extension(ApiId(api_id)): Extension<ApiId>,
    Authorized { auth_id, generation }: Authorized,
    Path((_, endpoint_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let now = now_us(&server);
    json_on_pool(move || {
        let store = &generation.resources;
        let endpoint = store.endpoint(&auth_id, &endpoint_id)?.ok_or_else(ApiError::not_found)?;
        let registration = store.active_registration(&endpoint_id, now)?;
        to_json(&EndpointBody::new(&endpoint, registration.as_ref(), &api_id, &server.sip_domain))
    })
    .await
}

/// `GET /v1/Account/{auth_id}/Recording/{recording_id}/`
pub(super) async fn recording(
    State(server): State<Arc<Server>>,
    Extension(ApiId(api_id)): Extension<ApiId>,
    Authorized { auth_id, generation }: Authorized,
    Path((_, recording_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let now = now_us(&server);
    json_on_pool(move || {
        let recording = generation.resources.recording(&auth_id, &recording_id)?.ok_or_else(ApiError::not_found)?;
        to_json(&RecordingBody::new(&recording, &api_id, now))
    })
    .await
}

/// `GET /v1/Account/{auth_id}/Recording/`
pub(super) async fn list_recordings(
    State(server): State<Arc<Server>>,
    Extension(ApiId(api_id)): Extension<ApiId>,
    Authorized { auth_id, generation }: Authorized,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let list = ListQuery::parse(query.as_deref().unwrap_or(""), now_us(&server))?;
    json_on_pool(move || {
        let (total, rows) = generation.resources.list_recordings(&auth_id, &list)?;
        let link = |offset: u64| {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (key, value) in &list.filters {
                query.append_pair(key, value);
            }
            query.append_pair("limit", &list.limit.to_string());
            query.append_pair("offset", &offset.to_string());
            format!("/v1/Account/{}/Recording/?{}", crate::resources::wire::path_segment(&auth_id), query.finish())
        };
        let limit = u64::from(list.limit);
        let meta = ListMeta {
            limit: list.limit,
            offset: list.offset,
            total_count: total,
            next: (list.offset.saturating_add(limit) < total).then(|| link(list.offset + limit)),
            previous: (list.offset > 0).then(|| link(list.offset.saturating_sub(limit))),
        };
        to_json(&RecordingList { api_id: &api_id, meta, objects: rows.iter().map(RecordingItem::new).collect() })
    })
    .await
}

/// `DELETE /v1/Account/{auth_id}/Recording/{recording_id}/`
pub(super) async fn delete_recording(
    State(server): State<Arc<Server>>,
    Authorized { auth_id, generation }: Authorized,
    Path((_, recording_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    if !generation.resources.writable() {
        let message = "this server answers from a store it cannot write: a recording cannot be deleted now";
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message));
    }
    let now = now_us(&server);
    let deleted = blocking(move || Ok(generation.resources.delete_recording(&auth_id, &recording_id, now)?)).await?;
    if !deleted {
        return Err(ApiError::not_found());
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::OPENAPI;

    /// The schema's closed lists are the server's own: every time zone the
    /// server takes (and no other), every product name.
    #[test]
    fn the_schema_lists_what_the_server_takes() {
        let schema: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json");
        let listed = |value: &serde_json::Value| -> Vec<String> {
            value.as_array().expect("an enum").iter().map(|v| v.as_str().expect("a string").to_owned()).collect()
        };
        let zones = listed(&schema["components"]["schemas"]["TimeZone"]["enum"]);
        let known: Vec<String> = chrono_tz::TZ_VARIANTS.iter().map(|zone| zone.name().to_owned()).collect();
        assert_eq!(zones, known, "regenerate the TimeZone enum from chrono_tz::TZ_VARIANTS");
        let parameters =
            schema["paths"]["/v1/Account/{auth_id}/UsageSummary/"]["get"]["parameters"].as_array().expect("parameters");
        let product = parameters.iter().find(|p| p["name"] == "product").expect("product");
        let names = listed(&product["schema"]["items"]["enum"]);
        for name in &names {
            let parsed = crate::query::UsageParams::parse_query(&format!("product={name}"));
            assert!(parsed.is_ok(), "{name}: {parsed:?}");
        }
        assert_eq!(names.len(), crate::records::Product::ALL.len() + 1, "every product, and all");
    }
}
