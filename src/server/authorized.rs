//! [`Authorized`]: the preamble of every handler under
//! `/v1/Account/{auth_id}/`, as an extractor. It reads the path (a 404 when
//! it cannot be decoded), takes the generation the request is answered
//! from, and checks the credentials and the client address against it (401,
//! 403), so a handler starts at its own work. Its rejection is an
//! [`ApiError`], written by the request middleware like every other error.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::StatusCode;

use super::error::ApiError;
use super::{Generation, Server};

/// A request allowed to act for `auth_id`, with the generation it was
/// authorized against (and is to be answered from).
pub(super) struct Authorized {
    /// The account of the path.
    pub auth_id: String,
    /// The data set, resources and credentials of the request.
    pub generation: Arc<Generation>,
}

impl FromRequestParts<Arc<Server>> for Authorized {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, server: &Arc<Server>) -> Result<Authorized, ApiError> {
        // Every parameter of the path, so that one that cannot be decoded is
        // a 404 before the credentials are looked at (the handler's own
        // `Path` then reads the same parameters again, and cannot fail).
        let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, server)
            .await
            .map_err(|_| ApiError::not_found())?;
        let auth_id = params.into_iter().find(|(name, _)| name == "auth_id").map(|(_, value)| value);
        let auth_id = auth_id.ok_or_else(ApiError::not_found)?;
        let ConnectInfo(peer) = ConnectInfo::<SocketAddr>::from_request_parts(parts, server)
            .await
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no client address"))?;
        let generation = server.current.get();
        server.authorize(&generation, &auth_id, &parts.headers, peer)?;
        Ok(Authorized { auth_id, generation })
    }
}
