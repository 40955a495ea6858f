//! The one error type the core returns. The Python layer maps it to the exception hierarchy of
//! API.md in a single exhaustive match, so every variant here is a distinct thing a user can catch.

use std::time::Duration;

use super::secret::Redactor;

/// Everything that can go wrong in a call, with the fields a user needs to act on it.
///
/// Messages never contain a token or JWT: they are built from our own text and from server
/// answers that pass through [`crate::core::secret::Redactor`].
#[derive(Clone, Debug, thiserror::Error)]
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
    /// The response carried GraphQL `errors`; `data` is the partial data, if any. `not_found`:
    /// every error says the object asked for does not exist (decided here, from the answer).
    #[error("{message}")]
    GraphQL {
        message: String,
        errors: Vec<serde_json::Value>,
        data: Option<serde_json::Value>,
        not_found: bool,
    },
    /// A paged walk could not go on safely (a repeated cursor, no progress, a missing pageInfo).
    /// `cursor` is where to resume from (`after=`), when the walk got that far.
    #[error("{message}")]
    Pagination { message: String, cursor: Option<String> },
    /// A subscription ended because it could not go on: it could not be resumed (connecting
    /// failed too often), or the server judged it invalid. `cursor` is the last event's cursor.
    #[error("{message}")]
    Subscription { message: String, cursor: Option<String> },
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

    pub(crate) fn pagination(msg: impl Into<String>) -> Self {
        Self::Pagination { message: msg.into(), cursor: None }
    }

    /// The same error with every server-supplied text scrubbed of the client's secrets: a server
    /// (or a proxy) may echo a token back in a message, a header, a body or a GraphQL error.
    #[must_use]
    pub fn redact(self, r: &Redactor) -> Self {
        let s = |t: String| r.scrub(&t);
        let pairs = |h: Vec<(String, String)>| -> Vec<(String, String)> {
            h.into_iter().map(|(k, v)| (k, r.scrub(&v))).collect()
        };
        match self {
            Self::Configuration(m) => Self::Configuration(s(m)),
            Self::Validation(m) => Self::Validation(s(m)),
            Self::Authentication { error_type, message } => {
                Self::Authentication { error_type: error_type.map(s), message: s(message) }
            }
            Self::Transport(m) => Self::Transport(s(m)),
            Self::Timeout(m) => Self::Timeout(s(m)),
            Self::ApiStatus { status, message, body, headers } => {
                Self::ApiStatus { status, message: s(message), body: s(body), headers: pairs(headers) }
            }
            Self::RateLimit { status, message, body, headers, retry_after } => Self::RateLimit {
                status,
                message: s(message),
                body: s(body),
                headers: pairs(headers),
                retry_after,
            },
            Self::GraphQL { message, mut errors, mut data, not_found } => {
                errors.iter_mut().for_each(|e| r.scrub_json(e));
                if let Some(d) = data.as_mut() {
                    r.scrub_json(d);
                }
                Self::GraphQL { message: s(message), errors, data, not_found }
            }
            Self::Pagination { message, cursor } => {
                Self::Pagination { message: s(message), cursor: cursor.map(s) }
            }
            Self::Subscription { message, cursor } => {
                Self::Subscription { message: s(message), cursor: cursor.map(s) }
            }
            Self::Closed(m) => Self::Closed(s(m)),
        }
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
        let not_found = is_not_found(&errors);
        Self::GraphQL { message, errors, data, not_found }
    }
}

/// Every error says the object does not exist: graphene-django's `DoesNotExist` text ("Finding
/// matching query does not exist."), the service's answer to an id that names nothing.
fn is_not_found(errors: &[serde_json::Value]) -> bool {
    !errors.is_empty()
        && errors.iter().all(|e| {
            e.get("message")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|m| m.contains("matching query does not exist"))
        })
}

/// Formats a duration the way log lines and messages show it: seconds with two decimals.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Error;

    #[test]
    fn not_found_is_decided_from_the_answer() {
        let gone = json!({"message": "Finding matching query does not exist.", "path": ["finding"]});
        let other = json!({"message": "Cannot query field 'x' on type 'Query'."});
        assert!(matches!(Error::graphql(vec![gone.clone()], None), Error::GraphQL { not_found: true, .. }));
        assert!(matches!(
            Error::graphql(vec![gone, other.clone()], None),
            Error::GraphQL { not_found: false, .. }
        ));
        assert!(matches!(Error::graphql(vec![other], None), Error::GraphQL { not_found: false, .. }));
        assert!(matches!(Error::graphql(vec![], None), Error::GraphQL { not_found: false, .. }));
    }
}
