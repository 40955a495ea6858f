//! The `known` profile: a server that offers only what the public facts about the service show
//! (`spec/service-facts.md` §8), where the default profile fills every gap of the spec with a
//! choice of ours. Each rule below names the line of the fact sheet it rests on; the table in
//! `docs/guides/testing.md` lists them.
//!
//! The profile is the default schema with parts taken away (the SDL is filtered line by line,
//! so the schema file stays the single description of the model) and a narrower filter
//! language; paging is graphene-django's in both profiles (§5.3).

/// Which model of the service the emulator serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Everything the schema file models, our choices included.
    #[default]
    Default,
    /// Only what `service-facts.md` confirms.
    Known,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Known => "known",
        }
    }

    pub fn parse(name: &str) -> Result<Profile, String> {
        match name {
            "default" => Ok(Profile::Default),
            "known" => Ok(Profile::Known),
            other => Err(format!("unknown emulator profile {other:?}; expected \"default\" or \"known\"")),
        }
    }
}

/// §6.1 [C]: the FindingsView fields seen in public code (IT-FQ), and nothing more.
const VIEW_FIELDS: &[&str] = &[
    "id",
    "id_int",
    "title",
    "score",
    "remediation_sub_phase",
    "cloud_account",
    "cloud_account_friendly_name",
    "cloud_provider",
    "resource_name",
    "resource_type",
    "sla_status",
    "age",
    "datasource_tags_values",
    "source",
    "tickets",
    "actual_status",
];

/// §8 sort [I]: `<FIELD>_ASC` / `<FIELD>_DESC` for these fields only.
const SORT_FIELDS: &[&str] = &["ID", "SEVERITY", "SCORE", "DISCOVERED_TIME", "LAST_REPORTED_TIME"];

/// §6.3 [C]: the leaf conditions of the filter language (SPARK-PARSER); no range condition.
pub const CONDITIONS: &[&str] = &[
    "in",
    "not_in",
    "equals",
    "not_equals",
    "contains",
    "not_contains",
    "exists",
    "overlap",
    "notoverlapping",
    "overlapilikelist",
    "notoverlapilikelist",
];

/// §6.3 [C] fields seen in filters, plus the plain-valued FindingsView fields of §6.1 (§8).
const FILTER_FIELDS: &[&str] = &[
    "id",
    "severity",
    "ticket_status",
    "finding_type",
    "fix_subtype",
    "cve",
    "tags_values",
    "tags_key_values",
    "resource_type",
    "id_int",
    "title",
    "score",
    "remediation_sub_phase",
    "cloud_account",
    "cloud_account_friendly_name",
    "cloud_provider",
    "resource_name",
    "sla_status",
    "age",
    "datasource_tags_values",
    "source",
];

/// §6.3 [C]: `actual_status` is filtered through a nested relation filter on these sub-fields.
const STATUS_FIELDS: &[&str] = &["category", "key"];

/// Checks one leaf of a filter as a facts-only server would; `field` is the full dotted name
/// (a nested relation filter gives `actual_status.category`).
pub fn check_leaf(field: &str, cond: &str) -> Result<(), String> {
    let known_field = FILTER_FIELDS.contains(&field)
        || field.strip_prefix("actual_status.").is_some_and(|sub| STATUS_FIELDS.contains(&sub));
    if !known_field {
        return Err(format!("Unknown filter field {field:?}"));
    }
    if !CONDITIONS.contains(&cond) {
        return Err(format!("Unknown filter condition {cond:?}; expected one of: {}", CONDITIONS.join(", ")));
    }
    Ok(())
}

/// What to keep of one block of the SDL.
enum Keep {
    Only(&'static [&'static str]),
    Without(&'static [&'static str]),
    SortValues,
}

impl Keep {
    fn keeps(&self, member: &str) -> bool {
        match self {
            Keep::Only(names) => names.contains(&member),
            Keep::Without(names) => !names.contains(&member),
            Keep::SortValues => SORT_FIELDS
                .iter()
                .any(|f| member.strip_prefix(f).is_some_and(|rest| rest == "_ASC" || rest == "_DESC")),
        }
    }
}

fn block_of(line: &str) -> Option<Keep> {
    if line.starts_with("type FindingsView ") {
        Some(Keep::Only(VIEW_FIELDS))
    } else if line.starts_with("type FindingConnection ") {
        // §5.3 [?]: no total count on the findings_view connection.
        Some(Keep::Without(&["total_count"]))
    } else if line.starts_with("enum FindingsViewSortEnum ") {
        Some(Keep::SortValues)
    } else {
        None
    }
}

/// The member a line of a block declares: a field (`name(args): Type`) or an enum value.
fn member(line: &str) -> &str {
    let t = line.trim_start();
    let end = t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(t.len());
    t.get(..end).unwrap_or(t)
}

/// The default SDL with what the facts do not show taken away. Every block it edits must be
/// found, so a renamed type cannot silently leave the profile serving our model.
pub fn sdl(full: &str) -> Result<String, String> {
    let mut out = String::with_capacity(full.len());
    let mut block: Option<Keep> = None;
    let mut seen = 0usize;
    // A member's description ("""...""", one line or several) waits for the member it belongs to.
    let mut pending: Vec<&str> = Vec::new();
    let mut in_description = false;
    for line in full.lines() {
        let Some(keep) = &block else {
            block = block_of(line);
            seen += usize::from(block.is_some());
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let t = line.trim();
        if in_description || t.starts_with("\"\"\"") {
            pending.push(line);
            let closes =
                if in_description { t.ends_with("\"\"\"") } else { t.len() >= 6 && t.ends_with("\"\"\"") };
            in_description = !closes;
            continue;
        }
        if t == "}" {
            block = None;
            pending.clear();
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if t.is_empty() || keep.keeps(member(line)) {
            for p in pending.drain(..) {
                out.push_str(p);
                out.push('\n');
            }
            out.push_str(line);
            out.push('\n');
        } else {
            pending.clear();
        }
    }
    if seen != 3 {
        return Err(format!("the known profile found {seen} of the 3 schema blocks it edits"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdl_keeps_only_the_facts() {
        let sdl = sdl(secfindings_schema::SDL).unwrap();
        let doc = async_graphql::parser::parse_schema(&sdl).unwrap();
        let mut fields = None;
        let mut sorts = None;
        let mut conn = None;
        for def in &doc.definitions {
            let async_graphql::parser::types::TypeSystemDefinition::Type(t) = def else { continue };
            let name = t.node.name.node.as_str();
            match &t.node.kind {
                async_graphql::parser::types::TypeKind::Object(o) => {
                    let names: Vec<String> = o.fields.iter().map(|f| f.node.name.node.to_string()).collect();
                    if name == "FindingsView" {
                        fields = Some(names);
                    } else if name == "FindingConnection" {
                        conn = Some(names);
                    }
                }
                async_graphql::parser::types::TypeKind::Enum(e) if name == "FindingsViewSortEnum" => {
                    sorts = Some(e.values.iter().map(|v| v.node.value.node.to_string()).collect::<Vec<_>>());
                }
                _ => {}
            }
        }
        let mut fields = fields.unwrap();
        fields.sort();
        let mut want: Vec<String> = VIEW_FIELDS.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(fields, want);
        assert_eq!(conn.unwrap(), vec!["pageInfo", "edges"]);
        let sorts = sorts.unwrap();
        assert_eq!(sorts.len(), 10);
        assert!(sorts.contains(&"LAST_REPORTED_TIME_DESC".to_owned()));
        assert!(!sorts.contains(&"DUE_DATE_ASC".to_owned()));
        // Other types keep their members: Finding still has its times and a description.
        assert!(sdl.contains("type Finding implements"));
        assert_eq!(
            sdl.matches("total_count: Int").count() + 1,
            secfindings_schema::SDL.matches("total_count: Int").count()
        );
    }

    #[test]
    fn leaves_are_checked_against_the_facts() {
        assert!(check_leaf("severity", "in").is_ok());
        assert!(check_leaf("actual_status.category", "in").is_ok());
        assert!(check_leaf("id", "gte").unwrap_err().contains("Unknown filter condition"));
        assert!(check_leaf("last_reported_time", "in").unwrap_err().contains("Unknown filter field"));
        assert!(check_leaf("actual_status.title", "in").is_err());
        assert!(check_leaf("severity", "eq").is_err());
    }
}
