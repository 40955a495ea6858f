//! The identity provider: Cognito's `InitiateAuth` over the awsJson 1.1 protocol.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};

use crate::auth::ExchangeError;
use crate::fault::Fault;
use crate::response::{respond, status_fault, truncate, Conn, ResetConnection, RespBody};
use crate::stats::Counters;

const TARGET: &str = "AWSCognitoIdentityProviderService.InitiateAuth";
const AMZ_JSON: &str = "application/x-amz-json-1.1";

pub(crate) async fn handle(
    conn: &Conn,
    parts: &Parts,
    body: Bytes,
) -> Result<Response<RespBody>, ResetConnection> {
    let shared = &conn.shared;
    Counters::bump(&shared.counters.idp_requests);
    let mut truncated = false;
    match shared.idp_faults.take() {
        None => {}
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Fault::Truncated) => truncated = true,
        Some(Fault::Reset) => return Err(conn.reset()),
        Some(fault) => return Ok(fault_response(conn, fault)),
    }
    let response = answer(conn, parts, &body);
    Ok(if truncated { truncate(response) } else { response })
}

/// Answers for faults other than delay, reset and truncation, as the identity provider.
fn fault_response(conn: &Conn, fault: Fault) -> Response<RespBody> {
    match fault {
        Fault::Status(code) => status_fault(code),
        Fault::RateLimited { .. } => too_many_requests(),
        Fault::IdpError { error_type, message, status } => error(status, &error_type, &message),
        Fault::Challenge(name) => challenge(conn, &name),
        Fault::Delay(_) | Fault::Reset | Fault::Truncated => status_fault(500),
    }
}

fn answer(conn: &Conn, parts: &Parts, body: &[u8]) -> Response<RespBody> {
    let shared = &conn.shared;
    if shared.idp_limit.check("").is_err() {
        return too_many_requests();
    }
    if parts.method != Method::POST {
        return error(405, "UnknownOperationException", "Method Not Allowed");
    }
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok());
    if target != Some(TARGET) {
        return error(400, "UnknownOperationException", "");
    }
    let content_type = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !content_type.trim_start().starts_with(AMZ_JSON) {
        return error(400, "UnknownOperationException", "");
    }
    let Ok(serde_json::Value::Object(request)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return error(
            400,
            "InvalidParameterException",
            "Invalid request body: the body must be a JSON object.",
        );
    };
    let auth_flow = request.get("AuthFlow").and_then(|v| v.as_str());
    match auth_flow {
        Some("REFRESH_TOKEN_AUTH" | "REFRESH_TOKEN") => {}
        Some(
            "USER_SRP_AUTH"
            | "CUSTOM_AUTH"
            | "ADMIN_NO_SRP_AUTH"
            | "USER_PASSWORD_AUTH"
            | "ADMIN_USER_PASSWORD_AUTH"
            | "USER_AUTH",
        ) => {
            return error(400, "InvalidParameterException", "Auth flow not enabled for this client");
        }
        Some(other) => {
            let message = format!(
                "1 validation error detected: Value '{other}' at 'authFlow' failed to satisfy constraint: \
                 Member must satisfy enum value set: [USER_SRP_AUTH, REFRESH_TOKEN_AUTH, REFRESH_TOKEN, \
                 CUSTOM_AUTH, ADMIN_NO_SRP_AUTH, USER_PASSWORD_AUTH, ADMIN_USER_PASSWORD_AUTH, USER_AUTH]"
            );
            return error(400, "InvalidParameterException", &message);
        }
        None => {
            return error(
                400,
                "InvalidParameterException",
                "1 validation error detected: Value null at 'authFlow' failed to satisfy constraint: \
                 Member must not be null",
            );
        }
    }
    let Some(client_id) = request.get("ClientId").and_then(|v| v.as_str()) else {
        return error(
            400,
            "InvalidParameterException",
            "1 validation error detected: Value null at 'clientId' failed to satisfy constraint: \
             Member must not be null",
        );
    };
    if client_id != shared.auth.client_id() {
        return error(
            400,
            "ResourceNotFoundException",
            &format!("User pool client {client_id} does not exist."),
        );
    }
    let refresh_token =
        request.get("AuthParameters").and_then(|p| p.get("REFRESH_TOKEN")).and_then(|v| v.as_str());
    let Some(refresh_token) = refresh_token else {
        return error(400, "InvalidParameterException", "Missing required parameter REFRESH_TOKEN");
    };
    match shared.auth.exchange(refresh_token) {
        Ok(issued) => {
            Counters::bump(&shared.counters.token_exchanges);
            let body = serde_json::json!({
                "AuthenticationResult": {
                    "AccessToken": issued.access_token,
                    "ExpiresIn": issued.expires_in,
                    "TokenType": "Bearer",
                    "IdToken": issued.id_token,
                },
                "ChallengeParameters": {},
            });
            ok(body)
        }
        Err(ExchangeError::Unknown) => error(400, "NotAuthorizedException", "Invalid Refresh Token."),
        Err(ExchangeError::Revoked) => error(400, "NotAuthorizedException", "Refresh Token has been revoked"),
    }
}

fn ok(body: serde_json::Value) -> Response<RespBody> {
    let mut response = respond(StatusCode::OK, AMZ_JSON, Bytes::from(body.to_string()));
    if let Ok(value) = HeaderValue::from_str(&request_id()) {
        response.headers_mut().insert("x-amzn-requestid", value);
    }
    response
}

fn challenge(conn: &Conn, name: &str) -> Response<RespBody> {
    let session =
        base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, conn.shared.auth.random());
    ok(serde_json::json!({"ChallengeName": name, "Session": session, "ChallengeParameters": {}}))
}

fn too_many_requests() -> Response<RespBody> {
    error(400, "TooManyRequestsException", "Rate exceeded")
}

/// A Cognito error: the type in `x-amzn-ErrorType` (with the trailing colon real answers carry) and
/// in the body's `__type`.
fn error(status: u16, error_type: &str, message: &str) -> Response<RespBody> {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = serde_json::json!({"__type": error_type, "message": message});
    let mut response = respond(status, AMZ_JSON, Bytes::from(body.to_string()));
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("{error_type}:")) {
        headers.insert("x-amzn-errortype", value);
    }
    if let Ok(value) = HeaderValue::from_str(message) {
        if !message.is_empty() {
            headers.insert("x-amzn-errormessage", value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(&request_id()) {
        headers.insert("x-amzn-requestid", value);
    }
    response
}

/// Request ids only need to be distinct, not unpredictable.
fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = crate::auth::now_secs();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        t & 0xffff_ffff,
        (n >> 48) & 0xffff,
        (n >> 36) & 0xfff,
        (n >> 24) & 0xfff,
        n & 0xff_ffff
    )
}
