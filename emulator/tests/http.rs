//! The emulator over real HTTP on loopback: identity provider, JWT checks, rate limits, faults,
//! GraphQL status codes and shutdown.

// Helpers outside `#[test]` functions fail the test the same way; the lints guard library code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use secfindings_emulator::{
    Emulator, EmulatorConfig, Fault, FaultTarget, FindingUpdate, LimitScope, RateLimit,
};
use serde_json::{json, Value};

const TARGET: &str = "AWSCognitoIdentityProviderService.InitiateAuth";
const AMZ_JSON: &str = "application/x-amz-json-1.1";
/// Valid against any schema, so the tests do not depend on the GraphQL layer's fields.
const PING: &str = r#"{"query":"{ __typename }"}"#;
const PONG: &str = r#"{"data":{"__typename":"Query"}}"#;
const HOUR: Duration = Duration::from_secs(3600);

fn start() -> Emulator {
    start_with(EmulatorConfig { findings: 10, ..EmulatorConfig::default() })
}

fn start_with(config: EmulatorConfig) -> Emulator {
    Emulator::start(config).expect("emulator starts")
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(|v| v.to_str().unwrap()).unwrap_or_default()
    }
}

async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    Reply { status, headers, text }
}

/// POSTs raw bytes to the identity provider the way the documented script (and boto3) does.
async fn idp_raw(emu: &Emulator, target: &str, body: Vec<u8>) -> Reply {
    let response = reqwest::Client::new()
        .post(emu.auth_url())
        .header("X-Amz-Target", target)
        .header("Content-Type", AMZ_JSON)
        .body(body)
        .send()
        .await
        .expect("idp request");
    reply(response).await
}

async fn exchange(emu: &Emulator, api_token: &str) -> Reply {
    idp_raw(emu, TARGET, STANDARD.decode(api_token).expect("api token is base64")).await
}

async fn jwt_for(emu: &Emulator, api_token: &str) -> String {
    let reply = exchange(emu, api_token).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.json()["AuthenticationResult"]["AccessToken"].as_str().expect("AccessToken").to_owned()
}

async fn api(emu: &Emulator, jwt: Option<&str>, body: &str) -> Reply {
    let mut request = reqwest::Client::new().post(emu.base_url()).header("Content-Type", "application/json");
    if let Some(jwt) = jwt {
        request = request.header("Authorization", format!("Bearer {jwt}"));
    }
    reply(request.body(body.to_owned()).send().await.expect("api request")).await
}

fn assert_idp_error(reply: &Reply, status: u16, error_type: &str, message: &str) {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.text);
    assert_eq!(reply.header("x-amzn-errortype"), format!("{error_type}:"));
    assert_eq!(reply.header("content-type"), AMZ_JSON);
    assert!(!reply.header("x-amzn-requestid").is_empty());
    let body = reply.json();
    assert_eq!(body["__type"], error_type);
    assert_eq!(body["message"], message);
    if !message.is_empty() {
        assert_eq!(reply.header("x-amzn-errormessage"), message);
    }
}

fn assert_rate_limited(reply: &Reply, max_retry_after: u64) {
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.text);
    assert_eq!(reply.text, r#"{"error":"rate_limited","message":"Too Many Requests"}"#);
    let retry_after: u64 = reply.header("retry-after").parse().expect("Retry-After is whole seconds");
    assert!((1..=max_retry_after).contains(&retry_after), "Retry-After {retry_after}");
    assert!(retry_after + 10 >= max_retry_after, "Retry-After {retry_after} counts down from the window");
}

// ---------------------------------------------------------------- identity provider

#[tokio::test]
async fn token_exchange_returns_cognito_shaped_tokens() {
    let emu = start();
    let api_token = emu.create_api_token("acme", "ci");
    let decoded: Value = serde_json::from_slice(&STANDARD.decode(&api_token).unwrap()).unwrap();
    assert_eq!(decoded["AuthFlow"], "REFRESH_TOKEN_AUTH");
    assert!(decoded["ClientId"].as_str().unwrap().len() == 26);
    assert!(decoded["AuthParameters"]["REFRESH_TOKEN"].as_str().unwrap().len() > 40);

    let reply = exchange(&emu, &api_token).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.header("content-type"), AMZ_JSON);
    let body = reply.json();
    assert_eq!(body["ChallengeParameters"], json!({}));
    let result = &body["AuthenticationResult"];
    assert_eq!(result["ExpiresIn"], 3600);
    assert_eq!(result["TokenType"], "Bearer");
    assert!(result.get("RefreshToken").is_none(), "a refresh returns no new refresh token");
    assert!(result["IdToken"].is_string());

    let jwt = result["AccessToken"].as_str().unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3);
    let decode = |part: &str| -> Value {
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap())
            .unwrap()
    };
    let header = decode(parts[0]);
    assert_eq!((header["alg"].as_str(), header["typ"].as_str()), (Some("HS256"), Some("JWT")));
    assert!(header["kid"].is_string());
    let claims = decode(parts[1]);
    assert_eq!(claims["token_use"], "access");
    assert_eq!(claims["scope"], "aws.cognito.signin.user.admin");
    assert_eq!(claims["iss"], "https://cognito-idp.eu-central-1.amazonaws.com/eu-central-1_EMULATOR");
    assert_eq!(claims["client_id"], decoded["ClientId"]);
    assert_eq!(claims["username"], claims["sub"]);
    assert_eq!(claims["customer"], "acme");
    assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 3600);
    for claim in ["auth_time", "jti", "event_id"] {
        assert!(!claims[claim].is_null(), "{claim}");
    }

    let reply = api(&emu, Some(jwt), PING).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json(), serde_json::from_str::<Value>(PONG).unwrap());
    assert_eq!(reply.header("content-type"), "application/json");

    // The legacy flow name is accepted too, and the configured lifetime shows in ExpiresIn.
    emu.set_jwt_lifetime(Duration::from_secs(300));
    let mut legacy = decoded.clone();
    legacy["AuthFlow"] = json!("REFRESH_TOKEN");
    let reply = idp_raw(&emu, TARGET, legacy.to_string().into_bytes()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json()["AuthenticationResult"]["ExpiresIn"], 300);

    let stats = emu.stats();
    assert_eq!((stats.idp_requests, stats.token_exchanges, stats.api_requests), (2, 2, 1));
}

#[tokio::test]
async fn unknown_refresh_token_is_not_authorized() {
    let emu = start();
    let mut body: Value =
        serde_json::from_slice(&STANDARD.decode(emu.create_api_token("acme", "ci")).unwrap()).unwrap();
    body["AuthParameters"]["REFRESH_TOKEN"] = json!("eyJjdHkiOiJKV1QifQ.not.a.known.token");
    let reply = idp_raw(&emu, TARGET, body.to_string().into_bytes()).await;
    assert_idp_error(&reply, 400, "NotAuthorizedException", "Invalid Refresh Token.");
    // A token of another emulator carries another client id.
    let other = start();
    let reply = exchange(&emu, &other.create_api_token("acme", "ci")).await;
    assert_eq!(reply.json()["__type"], "ResourceNotFoundException");
    assert_eq!(emu.stats().token_exchanges, 0);
}

#[tokio::test]
async fn revoked_token_stops_exchanges_and_its_jwts() {
    let emu = start();
    let api_token = emu.create_api_token("acme", "ci");
    let kept = emu.create_api_token("acme", "other");
    let jwt = jwt_for(&emu, &api_token).await;
    let kept_jwt = jwt_for(&emu, &kept).await;
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);

    assert!(emu.revoke_api_token(&api_token));
    assert!(!emu.revoke_api_token(&api_token), "already revoked");
    assert!(!emu.revoke_api_token("bm90IGEgdG9rZW4="), "unknown");

    let reply = exchange(&emu, &api_token).await;
    assert_idp_error(&reply, 400, "NotAuthorizedException", "Refresh Token has been revoked");
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api(&emu, Some(&kept_jwt), PING).await.status, StatusCode::OK);
}

#[tokio::test]
async fn malformed_exchange_requests_are_invalid_parameters() {
    let emu = start();
    let reply = idp_raw(&emu, TARGET, b"{not json".to_vec()).await;
    assert_eq!(reply.json()["__type"], "InvalidParameterException");
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    let decoded: Value =
        serde_json::from_slice(&STANDARD.decode(emu.create_api_token("a", "b")).unwrap()).unwrap();
    let client_id = decoded["ClientId"].clone();
    for body in [
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": client_id}),
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": client_id, "AuthParameters": {}}),
        json!({"ClientId": client_id, "AuthParameters": {"REFRESH_TOKEN": "x"}}),
        json!({"AuthFlow": "NOPE", "ClientId": client_id, "AuthParameters": {"REFRESH_TOKEN": "x"}}),
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "AuthParameters": {"REFRESH_TOKEN": "x"}}),
    ] {
        let reply = idp_raw(&emu, TARGET, body.to_string().into_bytes()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(reply.json()["__type"], "InvalidParameterException", "{body}");
        assert!(reply.header("x-amzn-errortype").starts_with("InvalidParameterException:"));
    }
    let reply = idp_raw(
        &emu,
        TARGET,
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": "someoneelse", "AuthParameters": {"REFRESH_TOKEN": "x"}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_idp_error(
        &reply,
        400,
        "ResourceNotFoundException",
        "User pool client someoneelse does not exist.",
    );
    assert_eq!(emu.stats().idp_requests, 7);
}

#[tokio::test]
async fn other_targets_and_content_types_are_unknown_operations() {
    let emu = start();
    let body = STANDARD.decode(emu.create_api_token("acme", "ci")).unwrap();
    let reply = idp_raw(&emu, "AWSCognitoIdentityProviderService.GetUser", body.clone()).await;
    assert_idp_error(&reply, 400, "UnknownOperationException", "");

    let response = reqwest::Client::new()
        .post(emu.auth_url())
        .header("X-Amz-Target", TARGET)
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_idp_error(&reply_of(response).await, 400, "UnknownOperationException", "");

    let response =
        reqwest::Client::new().post(emu.auth_url()).header("Content-Type", AMZ_JSON).body(body).send();
    assert_idp_error(&reply_of(response.await.unwrap()).await, 400, "UnknownOperationException", "");
}

async fn reply_of(response: reqwest::Response) -> Reply {
    reply(response).await
}

// ---------------------------------------------------------------- JWT checks

#[tokio::test]
async fn expired_jwts_are_refused_and_new_exchanges_work() {
    let emu = start();
    let api_token = emu.create_api_token("acme", "ci");
    let old = jwt_for(&emu, &api_token).await;
    let issued = emu.issue_jwt("acme", "direct", HOUR);
    assert_eq!(api(&emu, Some(&old), PING).await.status, StatusCode::OK);
    assert_eq!(api(&emu, Some(&issued), PING).await.status, StatusCode::OK);

    emu.expire_jwts();
    assert_eq!(api(&emu, Some(&old), PING).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api(&emu, Some(&issued), PING).await.status, StatusCode::UNAUTHORIZED);

    let fresh = jwt_for(&emu, &api_token).await;
    assert_eq!(api(&emu, Some(&fresh), PING).await.status, StatusCode::OK);
    let reissued = emu.issue_jwt("acme", "direct", HOUR);
    assert_eq!(api(&emu, Some(&reissued), PING).await.status, StatusCode::OK);

    // exp = now is already past.
    let stillborn = emu.issue_jwt("acme", "direct", Duration::ZERO);
    assert_eq!(api(&emu, Some(&stillborn), PING).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn missing_or_bad_bearer_tokens_get_401() {
    let emu = start();
    let good = emu.issue_jwt("acme", "ci", HOUR);
    let other_emulator_jwt = start().issue_jwt("acme", "ci", HOUR);
    let mut tampered = good.clone();
    tampered.insert(good.find('.').unwrap() + 5, 'x');
    let id_token = exchange(&emu, &emu.create_api_token("acme", "ci")).await.json()["AuthenticationResult"]
        ["IdToken"]
        .as_str()
        .unwrap()
        .to_owned();

    let client = reqwest::Client::new();
    let cases: Vec<Option<String>> = vec![
        None,
        Some(String::new()),
        Some(format!("Basic {good}")),
        Some("Bearer ".to_owned()),
        Some("Bearer not-a-jwt".to_owned()),
        Some(format!("Bearer {tampered}")),
        Some(format!("Bearer {other_emulator_jwt}")),
        Some(format!("Bearer {id_token}")),
    ];
    for case in &cases {
        let mut request = client.post(emu.base_url()).body(PING);
        if let Some(value) = case {
            request = request.header("Authorization", value);
        }
        let reply = reply(request.send().await.unwrap()).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{case:?}");
        assert_eq!(reply.text, r#"{"message":"Unauthorized"}"#);
        assert_eq!(reply.header("www-authenticate"), "Bearer");
    }
    // The scheme is case-insensitive.
    let reply = reply(
        client
            .post(emu.base_url())
            .header("Authorization", format!("bearer {good}"))
            .body(PING)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(emu.stats().unauthorized, cases.len() as u64);
}

// ---------------------------------------------------------------- rate limits

fn limit(requests: u32) -> Option<RateLimit> {
    Some(RateLimit { requests, window: HOUR })
}

#[tokio::test]
async fn global_limit_counts_every_request() {
    let emu =
        start_with(EmulatorConfig { global_limit: limit(3), findings: 10, ..EmulatorConfig::default() });
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    assert_eq!(api(&emu, None, PING).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);
    assert_eq!(api(&emu, Some(&emu.issue_jwt("other", "ci", HOUR)), PING).await.status, StatusCode::OK);
    assert_rate_limited(&api(&emu, Some(&jwt), PING).await, 3600);
    // Unidentified requests are limited by the global limit before the JWT is looked at.
    assert_rate_limited(&api(&emu, None, PING).await, 3600);
    assert_eq!(emu.stats().rate_limited, 2);

    emu.set_rate_limit(LimitScope::Global, None);
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);
}

#[tokio::test]
async fn customer_limit_is_shared_by_the_customers_tokens() {
    let emu = start();
    emu.set_rate_limit(
        LimitScope::Customer,
        Some(RateLimit { requests: 2, window: Duration::from_secs(60) }),
    );
    let first = jwt_for(&emu, &emu.create_api_token("acme", "one")).await;
    let second = emu.issue_jwt("acme", "two", HOUR);
    let elsewhere = emu.issue_jwt("globex", "one", HOUR);
    assert_eq!(api(&emu, Some(&first), PING).await.status, StatusCode::OK);
    assert_eq!(api(&emu, Some(&second), PING).await.status, StatusCode::OK);
    assert_rate_limited(&api(&emu, Some(&first), PING).await, 60);
    assert_rate_limited(&api(&emu, Some(&second), PING).await, 60);
    assert_eq!(api(&emu, Some(&elsewhere), PING).await.status, StatusCode::OK);
    // The limit applies after authentication: a bad JWT is still a 401.
    assert_eq!(api(&emu, Some("bad"), PING).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn token_limit_is_per_api_token() {
    let emu = start();
    emu.set_rate_limit(LimitScope::Token, Some(RateLimit { requests: 1, window: Duration::from_secs(10) }));
    let api_token = emu.create_api_token("acme", "one");
    let first = jwt_for(&emu, &api_token).await;
    let first_again = jwt_for(&emu, &api_token).await;
    let second = jwt_for(&emu, &emu.create_api_token("acme", "two")).await;
    assert_eq!(api(&emu, Some(&first), PING).await.status, StatusCode::OK);
    // A new JWT of the same API token shares its budget.
    assert_rate_limited(&api(&emu, Some(&first_again), PING).await, 10);
    assert_eq!(api(&emu, Some(&second), PING).await.status, StatusCode::OK);
    assert_eq!(emu.stats().rate_limited, 1);
}

#[tokio::test]
async fn idp_limit_answers_too_many_requests() {
    let emu = start_with(EmulatorConfig { idp_limit: limit(1), findings: 10, ..EmulatorConfig::default() });
    let api_token = emu.create_api_token("acme", "one");
    assert_eq!(exchange(&emu, &api_token).await.status, StatusCode::OK);
    assert_idp_error(&exchange(&emu, &api_token).await, 400, "TooManyRequestsException", "Rate exceeded");
    emu.set_rate_limit(LimitScope::Idp, None);
    assert_eq!(exchange(&emu, &api_token).await.status, StatusCode::OK);
    assert_eq!(emu.stats().token_exchanges, 2);
}

// ---------------------------------------------------------------- faults

#[tokio::test]
async fn status_faults_look_like_the_infrastructure() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    emu.inject(FaultTarget::Api, Fault::Status(502), 2);
    emu.inject(FaultTarget::Api, Fault::Status(503), 1);
    emu.inject(FaultTarget::Api, Fault::Status(504), 1);
    emu.inject(FaultTarget::Api, Fault::Status(500), 1);
    for _ in 0..2 {
        let reply = api(&emu, Some(&jwt), PING).await;
        assert_eq!(reply.status.as_u16(), 502);
        assert!(reply.header("content-type").starts_with("text/html"));
        assert!(reply.text.contains("<title>502 Bad Gateway</title>"));
    }
    let reply = api(&emu, Some(&jwt), PING).await;
    assert_eq!((reply.status.as_u16(), reply.json()["message"].as_str()), (503, Some("Service Unavailable")));
    let reply = api(&emu, Some(&jwt), PING).await;
    assert_eq!(reply.status.as_u16(), 504);
    assert!(reply.json()["message"].is_string());
    let reply = api(&emu, Some(&jwt), PING).await;
    assert_eq!((reply.status.as_u16(), reply.text.as_str()), (500, "Internal Server Error"));
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK, "the queue is used up");

    // Faults come before authentication, and clear_faults empties the queue.
    emu.inject(FaultTarget::Api, Fault::Status(503), 1);
    assert_eq!(api(&emu, None, PING).await.status.as_u16(), 503);
    emu.inject(FaultTarget::Api, Fault::Status(503), 5);
    emu.clear_faults();
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);

    emu.inject(FaultTarget::Idp, Fault::Status(502), 1);
    let reply = exchange(&emu, &emu.create_api_token("acme", "ci")).await;
    assert_eq!(reply.status.as_u16(), 502);
}

#[tokio::test]
async fn rate_limited_fault_is_a_real_429() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    emu.inject(FaultTarget::Api, Fault::RateLimited { retry_after: 3597 }, 1);
    assert_rate_limited(&api(&emu, Some(&jwt), PING).await, 3597);
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);
    assert_eq!(emu.stats().rate_limited, 1);

    emu.inject(FaultTarget::Idp, Fault::RateLimited { retry_after: 2 }, 1);
    let reply = exchange(&emu, &emu.create_api_token("acme", "ci")).await;
    assert_idp_error(&reply, 400, "TooManyRequestsException", "Rate exceeded");
}

#[tokio::test]
async fn idp_error_and_challenge_faults() {
    let emu = start();
    let api_token = emu.create_api_token("acme", "ci");
    emu.inject(
        FaultTarget::Idp,
        Fault::IdpError {
            error_type: "InternalErrorException".into(),
            message: "An internal error occurred.".into(),
            status: 500,
        },
        1,
    );
    emu.inject(FaultTarget::Idp, Fault::Challenge("NEW_PASSWORD_REQUIRED".into()), 1);
    assert_idp_error(
        &exchange(&emu, &api_token).await,
        500,
        "InternalErrorException",
        "An internal error occurred.",
    );
    let reply = exchange(&emu, &api_token).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    assert_eq!(body["ChallengeName"], "NEW_PASSWORD_REQUIRED");
    assert!(body["Session"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(body["ChallengeParameters"], json!({}));
    assert!(body.get("AuthenticationResult").is_none());
    assert_eq!(exchange(&emu, &api_token).await.status, StatusCode::OK);
    assert_eq!(emu.stats().token_exchanges, 1);
}

#[tokio::test]
async fn delay_fault_answers_late_but_normally() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    emu.inject(FaultTarget::Api, Fault::Delay(Duration::from_millis(300)), 1);
    let started = Instant::now();
    let reply = api(&emu, Some(&jwt), PING).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text, PONG);
}

/// A raw HTTP/1.1 exchange, so the test sees exactly what went over the socket.
fn raw_post(emu: &Emulator, path: &str, headers: &str, body: &str) -> (std::io::Result<usize>, Vec<u8>) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", emu.port())).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (Ok(received.len()), received),
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) => return (Err(e), received),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_fault_drops_the_connection_without_an_answer() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    emu.inject(FaultTarget::Api, Fault::Reset, 1);
    let auth = format!("Authorization: Bearer {jwt}\r\n");
    let (result, received) = tokio::task::block_in_place(|| raw_post(&emu, "/api/v1", &auth, PING));
    assert!(received.is_empty(), "no bytes of an answer: {}", String::from_utf8_lossy(&received));
    let error = result.expect_err("the connection is reset, not closed");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset);
    // The client library sees a transport error too.
    emu.inject(FaultTarget::Idp, Fault::Reset, 1);
    let failed = reqwest::Client::new()
        .post(emu.auth_url())
        .header("X-Amz-Target", TARGET)
        .header("Content-Type", AMZ_JSON)
        .body(STANDARD.decode(emu.create_api_token("a", "b")).unwrap())
        .send()
        .await;
    assert!(failed.is_err());
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);
    assert_eq!(emu.request_log()[0].status, 0, "a reset is logged with status 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_fault_sends_part_of_the_announced_body() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    emu.inject(FaultTarget::Api, Fault::Truncated, 1);
    let auth = format!("Authorization: Bearer {jwt}\r\n");
    let (_, received) = tokio::task::block_in_place(|| raw_post(&emu, "/api/v1", &auth, PING));
    let text = String::from_utf8(received).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let announced: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
        })
        .expect("Content-Length");
    assert_eq!(announced, PONG.len());
    assert!(body.len() < announced && !body.is_empty(), "{} of {announced}: {body:?}", body.len());

    emu.inject(FaultTarget::Api, Fault::Truncated, 1);
    let response =
        reqwest::Client::new().post(emu.base_url()).bearer_auth(&jwt).body(PING).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.bytes().await.is_err(), "the body is incomplete");
}

// ---------------------------------------------------------------- GraphQL over HTTP

#[tokio::test]
async fn graphql_request_errors_are_400_and_results_200() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    let jwt = Some(jwt.as_str());

    let reply = api(&emu, jwt, r#"{"query":"{ __typename "}"#).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "syntax error: {}", reply.text);
    let body = reply.json();
    assert!(body.get("data").is_none(), "only errors: {body}");
    assert!(body["errors"][0]["message"].is_string());
    assert!(body["errors"][0]["locations"].is_array());

    let reply = api(&emu, jwt, r#"{"query":"{ nope }"}"#).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "unknown field: {}", reply.text);
    assert!(reply.json().get("data").is_none());

    let reply =
        api(&emu, jwt, r#"{"query":"query A { __typename } query B { __typename }","operationName":"C"}"#)
            .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "unknown operation: {}", reply.text);

    let body =
        r#"{"query":"query A { __typename } query B { __typename }","operationName":"B","variables":{}}"#;
    let reply = api(&emu, jwt, body).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json(), serde_json::from_str::<Value>(PONG).unwrap());
    let reply = api(&emu, jwt, r#"{"query":"{ __typename }","variables":"{}","operationName":null}"#).await;
    assert_eq!(reply.status, StatusCode::OK, "variables as JSON text: {}", reply.text);

    let log = emu.request_log();
    assert_eq!(log.len(), 5);
    assert_eq!(log[3].operation_name.as_deref(), Some("B"));
    assert_eq!(log[3].variables, json!({}));
    assert_eq!(log[0].status, 400);
    assert_eq!(log[3].status, 200);
    assert_eq!(log[0].query, "{ __typename ");
    emu.clear_request_log();
    assert!(emu.request_log().is_empty());
}

#[tokio::test]
async fn unusable_bodies_get_graphene_messages() {
    let emu = start();
    let bearer = emu.issue_jwt("acme", "ci", HOUR);
    let jwt = Some(bearer.as_str());
    let message = |reply: &Reply| reply.json()["errors"][0]["message"].as_str().unwrap().to_owned();
    for (body, expected) in [
        ("{oops", "POST body sent invalid JSON."),
        ("[1, 2]", "POST body sent invalid JSON."),
        (r#"{"variables":{}}"#, "Must provide query string."),
        (r#"{"query":""}"#, "Must provide query string."),
        (r#"{"query":"{ __typename }","variables":[1]}"#, "Variables are invalid JSON."),
        (r#"{"query":"{ __typename }","variables":"{oops"}"#, "Variables are invalid JSON."),
    ] {
        let reply = api(&emu, jwt, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(message(&reply), expected, "{body}");
        assert_eq!(reply.text, format!(r#"{{"errors":[{{"message":"{expected}"}}]}}"#));
    }
    // The 401 check comes before the body is looked at.
    assert_eq!(api(&emu, None, "{oops").await.status, StatusCode::UNAUTHORIZED);

    let reply = reply(reqwest::Client::new().get(emu.base_url()).send().await.unwrap()).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.text, r#"{"errors":[{"message":"GraphQL only supports GET and POST requests."}]}"#);
    let with_slash = format!("{}/", emu.base_url());
    let response =
        reqwest::Client::new().post(with_slash).bearer_auth(&bearer).body(PING).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let elsewhere = emu.base_url().replace("/api/v1", "/api/v2");
    assert_eq!(reqwest::Client::new().post(elsewhere).send().await.unwrap().status(), StatusCode::NOT_FOUND);
    let stats = emu.stats();
    assert_eq!(stats.api_requests, 9);
    emu.reset_stats();
    assert_eq!(emu.stats(), Default::default());
}

#[tokio::test]
async fn concurrent_requests_over_keep_alive() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (client, url, jwt) = (client.clone(), emu.base_url(), jwt.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let response = client.post(&url).bearer_auth(&jwt).body(PING).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                assert_eq!(response.bytes().await.unwrap().as_ref(), PONG.as_bytes());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(emu.stats().api_requests, 400);
}

#[test]
fn urls_sdl_and_config() {
    let emu = start();
    assert_eq!(emu.base_url(), format!("http://127.0.0.1:{}/api/v1", emu.port()));
    assert_eq!(emu.auth_url(), format!("http://127.0.0.1:{}/", emu.port()));
    assert!(emu.sdl().contains("type Query"));
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Emulator>();
    // A port already taken is a bind error.
    let taken = Emulator::start(EmulatorConfig { port: emu.port(), ..EmulatorConfig::default() });
    assert!(matches!(taken, Err(secfindings_emulator::EmulatorError::Bind(_))), "{taken:?}");
}

#[test]
fn shutdown_is_prompt_idempotent_and_closes_the_port() {
    let emu = start();
    let port = emu.port();
    // A keep-alive connection that stays open must not hold shutdown up.
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.write_all(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // Not a time bound on this machine's speed: a watchdog for a shutdown that never returns.
    returns_within_a_minute(move || {
        emu.shutdown();
        emu.shutdown();
        drop(emu);
    });
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "nothing listens any more");
    drop(idle);
}

/// Runs `f` on a thread of its own and fails the test if it has not returned within a minute
/// (a hang, whatever the machine's speed).
fn returns_within_a_minute(f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    assert!(finished.recv_timeout(Duration::from_secs(60)).is_ok(), "it hung");
}

#[tokio::test]
async fn dropping_inside_an_async_context_does_not_hang_or_panic() {
    let emu = start();
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    assert_eq!(api(&emu, Some(&jwt), PING).await.status, StatusCode::OK);
    // Dropped on a runtime thread (where blocking on the workers panics): it must return.
    let (done, finished) = tokio::sync::oneshot::channel();
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Handle::current().block_on(async move { drop(emu) });
        let _ = done.send(());
    });
    assert!(tokio::time::timeout(Duration::from_secs(60), finished).await.is_ok(), "the drop hung");
}

/// Not a benchmark, a check that the server is not the bottleneck: run with
/// `cargo test -p secfindings-emulator --release --test http -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "timing; run on demand in release"]
async fn throughput_smoke() {
    let emu = start_with(EmulatorConfig { findings: 10, worker_threads: 1, ..EmulatorConfig::default() });
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, url, jwt) = (client.clone(), emu.base_url(), jwt.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..2000 {
                let response = client.post(&url).bearer_auth(&jwt).body(PING).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                response.bytes().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    println!("32000 requests in {elapsed:?}: {:.0} req/s", 32000.0 / elapsed.as_secs_f64());
}

#[tokio::test]
async fn the_response_cache_forgets_what_a_test_hook_changed() {
    let emu = start_with(EmulatorConfig { findings: 20, response_cache: true, ..EmulatorConfig::default() });
    let jwt = emu.issue_jwt("acme", "ci", HOUR);
    let q = r#"{"query":"{ finding(id: 1) { finding_score { severity } } }"}"#;
    let severity = |r: &Reply| r.json()["data"]["finding"]["finding_score"]["severity"].clone();
    let before = severity(&api(&emu, Some(&jwt), q).await);
    let other = if before == 1 { 2 } else { 1 };
    emu.update_finding(1, FindingUpdate { severity: Some(other), ..FindingUpdate::default() }, "updated")
        .unwrap();
    assert_eq!(severity(&api(&emu, Some(&jwt), q).await), other, "a cached answer from before the change");
    let q2 = r#"{"query":"{ findings_view(first: 100) { edges { node { id_int } } } }"}"#;
    let count = |r: &Reply| r.json()["data"]["findings_view"]["edges"].as_array().map_or(0, Vec::len);
    assert_eq!(count(&api(&emu, Some(&jwt), q2).await), 20);
    emu.create_finding(3, None, None).unwrap();
    assert_eq!(count(&api(&emu, Some(&jwt), q2).await), 21);
}
