//! Who is calling the GraphQL endpoint, as established from the bearer JWT.

/// The authenticated caller of one API request. The HTTP layer builds it from the verified JWT
/// and hands it to the GraphQL layer in the request data (`ctx.data::<Caller>()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The customer (tenant) the API token belongs to.
    pub customer: String,
    /// The name given to the API token at creation.
    pub token_name: String,
    /// The JWT's `sub` claim (a stable UUID-like id of the token's user).
    pub subject: String,
}
