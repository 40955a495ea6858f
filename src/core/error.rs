//! The one error type the core returns. The Python layer maps it to the exception hierarchy of
//! API.md in a single exhaustive match, so every variant here is a distinct thing a user can catch.

use std::time::Duration;

/// Everything that can go wrong in a call, with the fields a user needs to act on it.
///
/// Messages never contain a token or JWT: they are built from our own text and from server
/// answers that pass through [`crate::core::secret::Redactor`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad or missing settings, found at construction.
    #[error("{0}")]
    Configuration(String),
    /// Bad variables or arguments, found before anything was sent.
    #[error("{0}")]
    Validation(String),
    /// The identity provider rejected the API token, or the API answered 401 after a refresh.
    #[error("{message}")]
    Authentication {
        /// The identity provider's error type (`NotAuthorizedException`, ...), when it gave one.
        error_type: Option<String>,
        message: String,
    },
    /// The connection failed or broke, or the body could not be read or decoded.
    #[error("{0}")]
    Transport(String),
    /// An attempt took longer than the configured timeout.
    #[error("{0}")]
    Timeout(String),
    /// A non-success HTTP status that is neither a rate limit nor a GraphQL error answer.
    #[error("HTTP {status}: {message}")]
    ApiStatus { status: u16, message: String, body: String, headers: Vec<(String, String)> },
    /// 429 after the retries, or a Retry-After longer than the client will wait.
    #[error("{message}")]
    RateLimit {
        status: u16,
        message: String,
        body: String,
        headers: Vec<(String, String)>,
        retry_after: Option<f64>,
    },
    /// The response carried GraphQL `errors`; `data` is the partial data, if any.
    #[error("{message}")]
    GraphQL { message: String, errors: Vec<serde_json::Value>, data: Option<serde_json::Value> },
    /// A paged walk could not go on safely (a repeated cursor, a missing pageInfo).
    #[error("{0}")]
    Pagination(String),
    /// The client was closed, or used in a process other than the one that created it.
    #[error("{0}")]
    Closed(String),
}

impl Error {
    pub(crate) fn config(msg: impl Into<String>) -> Self {
        Self::Configuration(msg.into())
    }

    pub(crate) fn validation(msg: impl Into<String>) -> Self {
        Self::Validation(msg.into())
    }

    /// Builds the error for a GraphQL `errors` answer, with a message that names the first error.
    pub(crate) fn graphql(errors: Vec<serde_json::Value>, data: Option<serde_json::Value>) -> Self {
        let first = errors
            .first()
            .and_then(|e| e.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown error");
        let message = match errors.len() {
            0 | 1 => format!("GraphQL error: {first}"),
            n => format!("GraphQL error: {first} (and {} more)", n - 1),
        };
        Self::GraphQL { message, errors, data }
    }
}

/// Formats a duration the way log lines and messages show it: seconds with two decimals.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
