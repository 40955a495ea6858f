//! The one schema of the project, in GraphQL SDL: the emulator serves it, the client's core
//! types columns and checks documents against it (the built-in schema when a server refuses
//! introspection), and the Python generator reads the same file. Where the public specification
//! does not show a type's fields, the schema models them and says so in its descriptions.

/// `schema.graphql`, as text.
pub const SDL: &str = include_str!("schema.graphql");
