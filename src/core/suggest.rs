//! "Did you mean" for names (arguments, input keys, variables): one rule for the whole core.
//! A ground-floor module: it imports nothing of ours.

/// The candidate closest to `name` by edit distance, when it is close enough to be a typo:
/// at most 2 edits, or a quarter of the candidate's length for long names.
pub(crate) fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// At most this many candidates are compared by edit distance (those nearest in length): the
/// choices may come from a server (an enum of its schema), which must not make a typo slow.
pub(crate) const MAX_CANDIDATES: usize = 1000;

/// The candidates `name` was probably meant to be, best first, for messages shown to a person:
/// the one equal but for case; else, with `prefixes`, the few (at most `n`) that start with it
/// ignoring case; else up to `n` within a third of the candidate's length (at least 2 edits),
/// ignoring case, nearest first
/// (ties in the candidates' order). The work is bounded by [`MAX_CANDIDATES`].
pub(crate) fn suggestions<'a>(name: &str, candidates: &[&'a str], n: usize, prefixes: bool) -> Vec<&'a str> {
    let folded = name.to_lowercase();
    if let Some(same) = candidates.iter().find(|c| c.to_lowercase() == folded) {
        return vec![same];
    }
    if prefixes && folded.chars().nth(1).is_some() {
        let starts: Vec<&'a str> =
            candidates.iter().copied().filter(|c| c.to_lowercase().starts_with(&folded)).collect();
        if !starts.is_empty() && starts.len() <= n {
            return starts;
        }
    }
    let len = folded.chars().count();
    let mut pool: Vec<(usize, &'a str)> =
        candidates.iter().map(|c| (c.chars().count().abs_diff(len), *c)).collect();
    if pool.len() > MAX_CANDIDATES {
        pool.sort_by_key(|(gap, _)| *gap);
        pool.truncate(MAX_CANDIDATES);
    }
    let mut near: Vec<(usize, usize, &'a str)> = pool
        .into_iter()
        .enumerate()
        .filter_map(|(at, (_, c))| {
            let d = strsim::levenshtein(&folded, &c.to_lowercase());
            (d <= 2.max(c.chars().count() / 3) && d < len.max(1)).then_some((d, at, c))
        })
        .collect();
    near.sort_unstable();
    let mut out: Vec<&'a str> = Vec::new();
    for (_, _, c) in near {
        if !out.iter().any(|o| o.to_lowercase() == c.to_lowercase()) {
            out.push(c);
        }
        if out.len() >= n {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{closest, suggestions};

    #[test]
    fn suggestions_fold_case_then_prefixes_then_distance() {
        let names = ["critical", "high", "medium", "low", "info"];
        assert_eq!(suggestions("CRITICAL", &names, 3, true), vec!["critical"]);
        assert_eq!(suggestions("crit", &names, 3, true), vec!["critical"]);
        assert_eq!(suggestions("crit", &names, 3, false), Vec::<&str>::new());
        assert_eq!(suggestions("hihg", &names, 3, true), vec!["high"]);
        assert_eq!(suggestions("lwo", &names, 1, false), vec!["low"]);
        assert_eq!(suggestions("severity", &["severities", "status"], 3, false), vec!["severities"]);
        assert_eq!(suggestions("zzzzzzzz", &names, 3, true), Vec::<&str>::new());
        // One letter is no basis for a guess.
        assert_eq!(suggestions("x", &["y", "xy"], 3, false), Vec::<&str>::new());
        let many: Vec<String> = (0..5000).map(|i| format!("name{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(suggestions("nam1", &refs, 1, false), vec!["name1"]);
    }

    #[test]
    fn typos_are_matched_and_strangers_are_not() {
        assert_eq!(closest("idd", ["id", "after"]), Some("id"));
        assert_eq!(closest("filtres_config", ["filters_config", "sort"]), Some("filters_config"));
        assert_eq!(closest("colour", ["id", "after"]), None);
        assert_eq!(closest("x", std::iter::empty()), None);
    }
}
