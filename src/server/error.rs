//! The one error type of the handlers. Every error answers
//! `{"api_id": "...", "error": "..."}`; the body is written by the request
//! middleware, which owns the request's `api_id` (see [`super::app`]).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::{BadRequest, Error};

/// The generic message of a 502: the details go to the log only.
pub const UPSTREAM_MESSAGE: &str = "the usage service failed to answer; retry later";

/// A refused or failed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The `error` text of the body.
    pub message: String,
    /// Seconds for `Retry-After` (429).
    pub retry_after: Option<u64>,
    /// What the log gets beyond the message (a 502's cause).
    pub detail: Option<String>,
    /// Whether the connection closes after this answer (`connection:
    /// close`): the request's body was not read whole.
    pub close: bool,
}

/// The error of a response, left in its extensions for the middleware to
/// write with the request's `api_id`.
#[derive(Clone, Debug)]
pub struct PendingError {
    /// The `error` text.
    pub message: String,
    /// Logged, never sent.
    pub detail: Option<String>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), retry_after: None, detail: None, close: false }
    }

    /// The error, answered on a connection that then closes.
    pub fn closing(self) -> ApiError {
        ApiError { close: true, ..self }
    }

    /// 404 `not found`.
    pub fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not found")
    }

    /// 502 with the generic message; `detail` is logged.
    pub fn upstream(detail: impl Into<String>) -> ApiError {
        ApiError { detail: Some(detail.into()), ..ApiError::new(StatusCode::BAD_GATEWAY, UPSTREAM_MESSAGE) }
    }
}

impl From<BadRequest> for ApiError {
    fn from(bad: BadRequest) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, bad.message)
    }
}

impl From<Error> for ApiError {
    /// A 400 keeps its message; anything else from the engine is a 502.
    fn from(error: Error) -> ApiError {
        match error {
            Error::BadRequest(bad) => bad.into(),
            other => ApiError::upstream(other.chain()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.close {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"telemeter\""));
        }
        response.extensions_mut().insert(PendingError { message: self.message, detail: self.detail });
        response
    }
}
