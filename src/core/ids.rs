//! Relay global ids: base64 of `TypeName:pk` (graphql-relay's `to_global_id` / `from_global_id`).

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;

use super::error::{Error, Result};

fn is_type_name(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `("Finding", "17")` -> `"RmluZGluZzoxNw=="`.
pub(crate) fn to_global_id(type_name: &str, pk: &str) -> Result<String> {
    if !is_type_name(type_name) {
        return Err(Error::validation(format!(
            "type_name must be a GraphQL type name (letters, digits, _), got {type_name:?}"
        )));
    }
    Ok(STANDARD.encode(format!("{type_name}:{pk}")))
}

/// `"RmluZGluZzoxNw=="` -> `("Finding", "17")`. Splits on the first ':' and strips trailing
/// whitespace (ids copied from fixtures sometimes carry an encoded newline).
pub(crate) fn from_global_id(id: &str) -> Result<(String, String)> {
    let bad = || Error::validation(format!("{id:?} is not a global id (base64 of \"TypeName:pk\")"));
    let raw = id.trim();
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(raw).ok())
        .ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let text = text.trim_end();
    match text.split_once(':') {
        Some((t, pk))
            if !t.is_empty()
                && !pk.is_empty()
                && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            Ok((t.to_string(), pk.to_string()))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_the_fact_sheet() {
        assert_eq!(to_global_id("ScopeGroup", "1").unwrap(), "U2NvcGVHcm91cDox");
        assert_eq!(to_global_id("FindingFilter", "171").unwrap(), "RmluZGluZ0ZpbHRlcjoxNzE=");
        assert_eq!(from_global_id("U2NvcGVHcm91cDox").unwrap(), ("ScopeGroup".into(), "1".into()));
        // The fixture with an encoded trailing newline.
        assert_eq!(
            from_global_id("VGlja2V0UHJvdmlkZXI6MQo=").unwrap(),
            ("TicketProvider".into(), "1".into())
        );
        assert_eq!(from_global_id("RmluZGluZ0ZpbHRlcjoxNzE").unwrap().1, "171");
        let id = to_global_id("Finding", "a:b").unwrap();
        assert_eq!(from_global_id(&id).unwrap(), ("Finding".into(), "a:b".into()));
    }

    #[test]
    fn rejects_what_is_not_a_global_id() {
        for bad in ["", "17", "!!!", "Zm9v", "OmZvbw=="] {
            assert!(from_global_id(bad).is_err(), "{bad}");
        }
        assert!(to_global_id("A:B", "1").is_err());
        assert!(to_global_id("", "1").is_err());
        assert!(to_global_id("Fin ding", "1").is_err());
    }
}
