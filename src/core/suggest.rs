//! "Did you mean" for names (arguments, input keys, variables): one rule for the whole core.
//! A ground-floor module: it imports nothing of ours.

/// The candidate closest to `name` by edit distance, when it is close enough to be a typo:
/// at most 2 edits, or a quarter of the candidate's length for long names.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_are_matched_and_strangers_are_not() {
        assert_eq!(closest("idd", ["id", "after"]), Some("id"));
        assert_eq!(closest("filtres_config", ["filters_config", "sort"]), Some("filters_config"));
        assert_eq!(closest("colour", ["id", "after"]), None);
        assert_eq!(closest("x", std::iter::empty()), None);
    }
}
