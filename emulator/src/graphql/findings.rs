//! Findings at output time: values derived from the compact records (finding_id, description,
//! tickets, comments, attachments...), the lazy `Finding` / `FindingsView` object, sorting and
//! the cache of filtered + sorted id lists that makes deep paging O(page).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_graphql::Value;

use super::data::{
    Data, FindingRec, ResourceRec, Template, CODE, DATASOURCES, MISCONFIG, NO_SCORE, PEOPLE, SECRET,
    STATUSES, SUB_PHASES, TEMPLATES, TICKET_STATUSES,
};
use super::util::{dt, enum_v, format_date_days, mix, obj, opt, s, to_global_id, DAY};

pub const AT_RISK_DAYS: i64 = 7;

pub fn fix_subtype(t: &Template) -> &'static str {
    if t.package.is_some() {
        return "PACKAGE_UPGRADE";
    }
    match t.kind {
        MISCONFIG => "CONFIGURATION",
        SECRET => "SECRET_ROTATION",
        CODE => "CODE_CHANGE",
        _ => "OS_PATCH",
    }
}

fn uuid(h: u64, h2: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        0x8000 | (h2 >> 48 & 0x3fff),
        h2 & 0xffff_ffff_ffff
    )
}

pub fn finding_id(data: &Data, i: usize, rec: &FindingRec) -> String {
    let h = mix(u64::from(rec.seed), i as u64);
    let h2 = mix(h, 3);
    let r = data.resource(rec.resource);
    let a = r.account();
    match rec.datasource().dtype {
        "aws_security_hub" => format!("arn:aws:securityhub:{}:{}:finding/{}", r.region(), a.id, uuid(h, h2)),
        "snyk" => {
            let pkg = rec.template().package.unwrap_or("code").to_uppercase().replace('/', "-");
            format!("SNYK-JS-{pkg}-{}", 1_000_000 + h % 9_000_000)
        }
        "tenable_io" => format!("{}:{}", 100_000 + h % 90_000, uuid(h2, h)),
        "prisma_cloud" => format!("P-{}", 10_000 + h % 900_000),
        "github_advanced_security" => format!("{}#alert-{}", r.name(), 1 + h % 5000),
        "azure_defender" => {
            format!("/subscriptions/{}/providers/Microsoft.Security/assessments/{}", a.id, uuid(h, h2))
        }
        "orca" => format!("orca-{}", 100_000 + h % 900_000),
        _ => uuid(h, h2),
    }
}

pub fn original_status(rec: &FindingRec) -> &'static str {
    let bucket = match rec.status().key {
        "12" => 1,
        "20" | "21" => 2,
        "30" | "31" => 3,
        _ => 0,
    };
    rec.datasource().statuses.get(bucket).copied().unwrap_or("")
}

pub fn original_score(rec: &FindingRec) -> Option<f64> {
    (rec.original_score != NO_SCORE).then(|| f64::from(rec.original_score) / 100.0)
}

pub fn age(data: &Data, rec: &FindingRec) -> i64 {
    (data.today - i64::from(rec.discovered)).div_euclid(DAY)
}

pub fn sla_status(data: &Data, rec: &FindingRec) -> &'static str {
    if rec.status().category != "OPEN" {
        return "CLOSED";
    }
    if rec.due == 0 {
        return "NO_SLA";
    }
    let due = i64::from(rec.due);
    if due < data.today {
        "OVERDUE"
    } else if due - data.today <= AT_RISK_DAYS * DAY {
        "AT_RISK"
    } else {
        "ON_TRACK"
    }
}

fn ticket_status(i: usize, rec: &FindingRec, k: usize) -> &'static str {
    let h = mix(u64::from(rec.seed), (i * 4 + k) as u64 + 11);
    let pick = |options: &[usize]| {
        let idx = options.get((h as usize) % options.len().max(1)).copied().unwrap_or(0);
        TICKET_STATUSES.get(idx).copied().unwrap_or("BACKLOG")
    };
    if k > 0 {
        return pick(&[3, 4]);
    }
    match rec.sub_phase {
        2 => pick(&[0, 2]),
        3 => pick(&[1]),
        4 | 5 => pick(&[3, 3, 3, 4]),
        _ => pick(&[0]),
    }
}

pub fn ticket_statuses(i: usize, rec: &FindingRec) -> Vec<&'static str> {
    (0..rec.tickets()).map(|k| ticket_status(i, rec, k)).collect()
}

fn between(h: u64, from: i64, to: i64) -> i64 {
    from + (h % ((to - from).max(1) as u64)) as i64
}

pub fn ticket_value(data: &Data, i: usize, rec: &FindingRec, k: usize) -> Value {
    let pk = (i as u64 + 1) * 4 + k as u64;
    let h = mix(u64::from(rec.seed), pk);
    let jira = h % 10 < 7;
    let number = 1000 + h % 9000;
    let (external, link) = if jira {
        let ext = format!("SEC-{number}");
        let link = format!("https://acme.atlassian.net/browse/{ext}");
        (ext, link)
    } else {
        let ext = format!("INC00{number}");
        let link =
            format!("https://acme.service-now.com/nav_to.do?uri=incident.do?sysparm_query=number={ext}");
        (ext, link)
    };
    let created = between(h >> 8, i64::from(rec.discovered), data.today);
    let queue = (h >> 20) % 3;
    obj([
        ("id", Value::String(to_global_id("Ticket", pk))),
        ("id_int", Value::from(pk)),
        ("external_id", Value::String(external)),
        ("link", Value::String(link)),
        ("assignee", s(PEOPLE.get((h >> 12) as usize % PEOPLE.len()).copied().unwrap_or("unassigned"))),
        ("status", enum_v(ticket_status(i, rec, k))),
        ("created_by_remediation_queue_id", if queue == 0 { Value::Null } else { Value::from(queue) }),
        ("provider_type", enum_v(if jira { "JIRA" } else { "SERVICENOW" })),
        ("title", Value::String(format!("[Security] {}", rec.template().title))),
        ("created_time", dt(created)),
    ])
}

const COMMENTS: &[&str] = &[
    "Assigned to **{team}** for triage.",
    "Confirmed on the affected resource.\n\n- owner: {person}\n- next step: patch in the next maintenance window",
    "Is this reachable from the internet? The resource sits behind the VPN according to the CMDB.",
    "Fix merged; waiting for the next scan to verify.\n\n```\nchange: bump `{package}`\n```",
];

pub fn comment_values(data: &Data, i: usize, rec: &FindingRec) -> Vec<Value> {
    let r = data.resource(rec.resource);
    let mut out: Vec<Value> = (0..rec.comments())
        .map(|k| {
            let pk = (i as u64 + 1) * 8 + k as u64;
            let h = mix(u64::from(rec.seed), pk);
            let person = PEOPLE.get(h as usize % PEOPLE.len()).copied().unwrap_or("system");
            let text = COMMENTS
                .get(k % COMMENTS.len())
                .copied()
                .unwrap_or("")
                .replace("{team}", r.team())
                .replace("{person}", person)
                .replace("{package}", rec.template().package.unwrap_or("the dependency"));
            obj([
                ("id", Value::String(to_global_id("Comment", pk))),
                ("id_int", Value::from(pk)),
                ("text", Value::String(text)),
                ("author", s(person)),
                ("created_time", dt(between(h >> 4, i64::from(rec.discovered), data.today))),
            ])
        })
        .collect();
    if let Some(extra) = data.extra_comments.get(&(i as u32)) {
        out.extend(extra.iter().map(|c| {
            obj([
                ("id", Value::String(to_global_id("Comment", c.pk))),
                ("id_int", Value::from(c.pk)),
                ("text", Value::String(c.text.to_string())),
                ("author", s(&c.author)),
                ("created_time", dt(c.created)),
            ])
        }));
    }
    out
}

pub fn attachment_values(data: &Data, i: usize, rec: &FindingRec) -> Vec<Value> {
    (0..rec.attachments())
        .map(|k| {
            let pk = (i as u64 + 1) * 4 + k as u64;
            let h = mix(u64::from(rec.seed), pk + 7);
            let (name, ctype) = match k {
                0 => (format!("scan-report-{}.pdf", i + 1), "application/pdf"),
                1 => (format!("screenshot-{}.png", i + 1), "image/png"),
                _ => (format!("evidence-{}.json", i + 1), "application/json"),
            };
            obj([
                ("id", Value::String(to_global_id("Attachment", pk))),
                ("id_int", Value::from(pk)),
                ("file_name", Value::String(name)),
                ("content_type", s(ctype)),
                ("size", Value::from(2048 + h % 500_000)),
                ("url", Value::String(format!("https://files.acme.example/attachments/{pk}"))),
                ("uploaded_by", s(PEOPLE.get(h as usize % PEOPLE.len()).copied().unwrap_or("system"))),
                ("created_time", dt(between(h >> 3, i64::from(rec.discovered), data.today))),
            ])
        })
        .collect()
}

pub fn description(data: &Data, i: usize, rec: &FindingRec) -> String {
    let t = rec.template();
    let r = data.resource(rec.resource);
    let a = r.account();
    let mut out = format!(
        "## {}\n\n{}\n\n**Resource:** `{}` ({})  \n**Account:** `{}` ({} / {})  \n**Detected by:** {}\n",
        t.title,
        t.body,
        r.name(),
        r.rtype(),
        a.id,
        a.provider,
        r.region(),
        rec.datasource().source
    );
    if let Some(pkg) = t.package {
        let h = mix(u64::from(rec.seed), i as u64 + 5);
        out.push_str(&format!("**Package:** `{pkg}` {}.{}.{}\n", 1 + h % 3, (h >> 4) % 12, (h >> 8) % 20));
    }
    if let Some(cve) = t.cve {
        out.push_str(&format!("**CVE:** [{cve}](https://nvd.nist.gov/vuln/detail/{cve})\n"));
    }
    out.push_str("\n### Remediation\n\n");
    out.push_str(&t.remediation.replace("{package}", t.package.unwrap_or("the package")));
    out
}

pub fn additional_data(data: &Data, i: usize, rec: &FindingRec) -> Value {
    let t = rec.template();
    let r = data.resource(rec.resource);
    let label = ["", "INFORMATIONAL", "LOW", "MEDIUM", "HIGH", "CRITICAL"]
        .get(usize::from(rec.severity))
        .copied()
        .unwrap_or("LOW");
    let tags: serde_json::Map<String, serde_json::Value> =
        r.tags().iter().map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v))).collect();
    let mut raw = serde_json::json!({
        "source": rec.datasource().dtype,
        "source_severity": label,
        "resource_id": r.resource_id(),
        "region": r.region(),
        "first_observed": format_date_days(i64::from(rec.discovered).div_euclid(DAY)),
        "tags": tags,
    });
    if let (Some(cve), serde_json::Value::Object(m)) = (t.cve, &mut raw) {
        m.insert("cve".into(), cve.into());
        m.insert("exploit_available".into(), mix(u64::from(rec.seed), 9).is_multiple_of(3).into());
    }
    obj([
        ("id", Value::String(to_global_id("FindingAdditionalData", i as u64 + 1))),
        ("data", Value::String(raw.to_string())),
    ])
}

pub fn datasource_value(idx: usize) -> Value {
    match DATASOURCES.get(idx) {
        Some(d) => obj([
            ("id", Value::String(to_global_id("Datasource", idx as u64 + 1))),
            ("id_int", Value::from(idx + 1)),
            ("friendly_name", s(d.name)),
            ("source", s(d.source)),
            ("datasource_type", s(d.dtype)),
        ]),
        None => Value::Null,
    }
}

pub fn status_value(idx: usize) -> Value {
    match STATUSES.get(idx) {
        Some(st) => obj([
            ("id", Value::String(to_global_id("Status", idx as u64 + 1))),
            ("id_int", Value::from(idx + 1)),
            ("key", s(st.key)),
            ("title", s(st.title)),
            ("category", enum_v(st.category)),
            ("type", enum_v("SYSTEM")),
            ("description", s(st.description)),
        ]),
        None => Value::Null,
    }
}

pub fn resource_value(idx: usize, r: &ResourceRec) -> Value {
    let a = r.account();
    let tags: async_graphql::indexmap::IndexMap<async_graphql::Name, Value> =
        r.tags().iter().map(|(k, v)| (async_graphql::Name::new(k), s(v))).collect();
    obj([
        ("id", Value::String(to_global_id("CHResource", idx as u64 + 1))),
        ("id_int", Value::from(idx + 1)),
        ("resource_id", Value::String(r.resource_id())),
        ("resource_name", Value::String(r.name())),
        ("resource_type", s(r.rtype())),
        ("cloud_provider", s(a.provider)),
        ("cloud_account", s(a.id)),
        ("cloud_account_friendly_name", s(a.name)),
        ("region", s(r.region())),
        ("tags", Value::Object(tags)),
        ("findings_count", Value::from(r.findings)),
        ("first_seen", dt(i64::from(r.first_seen))),
        ("last_seen", dt(i64::from(r.last_seen))),
    ])
}

// ------------------------------------------------------------------ the lazy object

/// The parent value of `Finding` and `FindingsView` fields: a record in a store snapshot.
pub struct FindingObj {
    pub data: Arc<Data>,
    pub idx: u32,
    pub view: bool,
}

/// The fields of `Finding` / `FindingsView`, resolved from the name once at schema build time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Out {
    Id,
    IdInt,
    FindingId,
    LastReported,
    Discovered,
    CloudProvider,
    OriginalStatus,
    CloudAccount,
    CloudAccountName,
    Package,
    Datasource,
    DatasourceName,
    MainResource,
    ResourceName,
    ResourceType,
    Title,
    FindingScore,
    Score,
    Severity,
    OriginalScore,
    Age,
    Description,
    Status,
    SubPhase,
    SlaStatus,
    DueDate,
    TagsValues,
    Source,
    AdditionalData,
    Tickets,
    Comments,
    Attachments,
}

impl Out {
    pub fn from_name(name: &str) -> Option<Out> {
        Some(match name {
            "id" => Out::Id,
            "id_int" => Out::IdInt,
            "finding_id" => Out::FindingId,
            "last_reported_time" => Out::LastReported,
            "discovered_time" => Out::Discovered,
            "cloud_provider" => Out::CloudProvider,
            "original_status" => Out::OriginalStatus,
            "cloud_account" => Out::CloudAccount,
            "cloud_account_friendly_name" => Out::CloudAccountName,
            "package_name" => Out::Package,
            "datasource" => Out::Datasource,
            "datasource_friendly_name" => Out::DatasourceName,
            "main_resource" => Out::MainResource,
            "resource_name" => Out::ResourceName,
            "resource_type" => Out::ResourceType,
            "title" => Out::Title,
            "finding_score" => Out::FindingScore,
            "score" => Out::Score,
            "severity" => Out::Severity,
            "original_score" => Out::OriginalScore,
            "age" => Out::Age,
            "description" => Out::Description,
            "status" | "actual_status" => Out::Status,
            "remediation_sub_phase" => Out::SubPhase,
            "sla_status" => Out::SlaStatus,
            "due_date" => Out::DueDate,
            "datasource_tags_values" => Out::TagsValues,
            "source" => Out::Source,
            "additional_data" => Out::AdditionalData,
            "tickets" => Out::Tickets,
            "comments" => Out::Comments,
            "attachments" => Out::Attachments,
            _ => return None,
        })
    }
}

/// A finding field as a value; the connection fields give their whole list of nodes.
pub fn finding_field(obj_: &FindingObj, f: Out) -> Value {
    let data = &*obj_.data;
    let i = obj_.idx as usize;
    let Some(rec) = data.finding(i) else { return Value::Null };
    let r = data.resource(rec.resource);
    let t = rec.template();
    match f {
        Out::Id => {
            Value::String(to_global_id(if obj_.view { "FindingsView" } else { "Finding" }, i as u64 + 1))
        }
        Out::IdInt => Value::from(i + 1),
        Out::FindingId => Value::String(finding_id(data, i, rec)),
        Out::LastReported => dt(i64::from(rec.last_reported)),
        Out::Discovered => dt(i64::from(rec.discovered)),
        Out::CloudProvider => s(r.account().provider),
        Out::OriginalStatus => s(original_status(rec)),
        Out::CloudAccount => s(r.account().id),
        Out::CloudAccountName => s(r.account().name),
        Out::Package => opt(t.package),
        Out::Datasource => datasource_value(usize::from(rec.datasource)),
        Out::DatasourceName => s(rec.datasource().name),
        Out::MainResource => resource_value(rec.resource as usize, r),
        Out::ResourceName => Value::String(r.name()),
        Out::ResourceType => s(r.rtype()),
        Out::Title => s(t.title),
        Out::FindingScore => obj([
            ("score", Value::from(f64::from(rec.score) / 100.0)),
            ("severity", Value::from(rec.severity)),
            ("original_score", opt(original_score(rec))),
        ]),
        Out::Score => Value::from(f64::from(rec.score) / 100.0),
        Out::Severity => Value::from(rec.severity),
        Out::OriginalScore => opt(original_score(rec)),
        Out::Age => Value::from(age(data, rec)),
        Out::Description => Value::String(description(data, i, rec)),
        Out::Status => status_value(usize::from(rec.status)),
        Out::SubPhase => s(SUB_PHASES.get(usize::from(rec.sub_phase)).copied().unwrap_or("NEW")),
        Out::SlaStatus => s(sla_status(data, rec)),
        Out::DueDate => {
            if rec.due == 0 {
                Value::Null
            } else {
                dt(i64::from(rec.due))
            }
        }
        Out::TagsValues => Value::List(r.tags().iter().map(|(_, v)| s(v)).collect()),
        Out::Source => s(rec.datasource().source),
        Out::AdditionalData => additional_data(data, i, rec),
        Out::Tickets => Value::List((0..rec.tickets()).map(|k| ticket_value(data, i, rec, k)).collect()),
        Out::Comments => Value::List(comment_values(data, i, rec)),
        Out::Attachments => Value::List(attachment_values(data, i, rec)),
    }
}

// ------------------------------------------------------------------ sorting and the view cache

fn rank_of<T: Ord + Clone>(keys: &[T]) -> Vec<i64> {
    let mut sorted: Vec<T> = keys.to_vec();
    sorted.sort();
    sorted.dedup();
    keys.iter().map(|k| sorted.binary_search(k).map_or(0, |p| p as i64)).collect()
}

/// Sorts finding indices by `FindingsViewSortEnum` values; ties keep id order.
pub fn sort_ids(data: &Data, ids: &mut Vec<u32>, sort: &[String]) -> Result<(), String> {
    for key in sort.iter().rev() {
        let (field, desc) = match key.rsplit_once('_') {
            Some((f, "ASC")) => (f, false),
            Some((f, "DESC")) => (f, true),
            _ => return Err(format!("Unknown sort value {key:?}")),
        };
        if field == "ID" {
            if desc {
                ids.reverse();
            } else {
                ids.sort_unstable();
            }
            continue;
        }
        let titles = rank_of(&TEMPLATES.iter().map(|t| t.title).collect::<Vec<_>>());
        let providers = rank_of(&super::data::ACCOUNTS.iter().map(|a| a.provider).collect::<Vec<_>>());
        let accounts = rank_of(&super::data::ACCOUNTS.iter().map(|a| a.id).collect::<Vec<_>>());
        let sources = rank_of(&DATASOURCES.iter().map(|d| d.source).collect::<Vec<_>>());
        let names = if field == "RESOURCE_NAME" { Some(data.resource_name_rank()) } else { None };
        let key_of = |rec: &FindingRec| -> i64 {
            let res = data.resource(rec.resource);
            match field {
                "TITLE" => titles.get(usize::from(rec.template)).copied().unwrap_or(0),
                "SEVERITY" => i64::from(rec.severity),
                "SCORE" => i64::from(rec.score),
                "AGE" => age(data, rec),
                "DISCOVERED_TIME" => i64::from(rec.discovered),
                "LAST_REPORTED_TIME" => i64::from(rec.last_reported),
                // NULLs sort last ascending and first descending, as in PostgreSQL.
                "DUE_DATE" => {
                    if rec.due == 0 {
                        i64::MAX / 2
                    } else {
                        i64::from(rec.due)
                    }
                }
                "CLOUD_PROVIDER" => providers.get(usize::from(res.account)).copied().unwrap_or(0),
                "CLOUD_ACCOUNT" => accounts.get(usize::from(res.account)).copied().unwrap_or(0),
                "RESOURCE_NAME" => {
                    names.and_then(|n| n.get(rec.resource as usize)).map_or(0, |v| i64::from(*v))
                }
                "SOURCE" => sources.get(usize::from(rec.datasource)).copied().unwrap_or(0),
                "STATUS" => i64::from(rec.status),
                _ => 0,
            }
        };
        if ![
            "TITLE",
            "SEVERITY",
            "SCORE",
            "AGE",
            "DISCOVERED_TIME",
            "LAST_REPORTED_TIME",
            "DUE_DATE",
            "CLOUD_PROVIDER",
            "CLOUD_ACCOUNT",
            "RESOURCE_NAME",
            "SOURCE",
            "STATUS",
        ]
        .contains(&field)
        {
            return Err(format!("Unknown sort value {key:?}"));
        }
        // (key, position) pairs make each pass stable, so earlier passes break later ties.
        let mut pairs: Vec<(i64, u32)> = ids
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let k = data.finding(i as usize).map_or(0, &key_of);
                (if desc { -k } else { k }, pos as u32)
            })
            .collect();
        pairs.sort_unstable();
        let old = std::mem::take(ids);
        *ids = pairs.iter().filter_map(|(_, pos)| old.get(*pos as usize).copied()).collect();
    }
    Ok(())
}

/// A small most-recently-used cache of filtered + sorted finding index lists, keyed by store
/// version, filters and sort, so that paging deep into a large result costs only the page.
pub struct ViewCache {
    entries: Mutex<VecDeque<(String, Arc<Vec<u32>>)>>,
    capacity: usize,
}

impl ViewCache {
    pub fn new(capacity: usize) -> Self {
        Self { entries: Mutex::new(VecDeque::new()), capacity }
    }

    pub fn get_or_compute(
        &self,
        key: String,
        compute: impl FnOnce() -> Result<Vec<u32>, String>,
    ) -> Result<Arc<Vec<u32>>, String> {
        if let Ok(mut entries) = self.entries.lock() {
            if let Some(pos) = entries.iter().position(|(k, _)| *k == key) {
                if let Some(hit) = entries.remove(pos) {
                    let ids = Arc::clone(&hit.1);
                    entries.push_front(hit);
                    return Ok(ids);
                }
            }
        }
        // Computed outside the lock: a slow filter must not block readers of other views.
        let ids = Arc::new(compute()?);
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|(k, _)| *k != key);
            entries.push_front((key, Arc::clone(&ids)));
            entries.truncate(self.capacity);
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graphql::data::seed;

    #[test]
    fn sorting_is_correct_and_stable() {
        let d = seed(2000, 5).unwrap();
        let mut ids: Vec<u32> = (0..2000).collect();
        sort_ids(&d, &mut ids, &["SEVERITY_DESC".into(), "SCORE_ASC".into()]).unwrap();
        for w in ids.windows(2) {
            let (a, b) = (&d.findings[w[0] as usize], &d.findings[w[1] as usize]);
            assert!(a.severity > b.severity || (a.severity == b.severity && a.score <= b.score));
            if a.severity == b.severity && a.score == b.score {
                assert!(w[0] < w[1], "ties keep id order");
            }
        }
        let mut ids: Vec<u32> = (0..2000).collect();
        sort_ids(&d, &mut ids, &["ID_DESC".into()]).unwrap();
        assert_eq!(ids[0], 1999);
        let mut ids: Vec<u32> = (0..2000).collect();
        sort_ids(&d, &mut ids, &["RESOURCE_NAME_ASC".into()]).unwrap();
        let names: Vec<String> =
            ids.iter().map(|i| d.resource(d.findings[*i as usize].resource).name()).collect();
        assert!(names.windows(2).all(|w| w[0] <= w[1]));
        assert!(sort_ids(&d, &mut ids, &["BOGUS_ASC".into()]).is_err());
    }

    #[test]
    fn derived_values_are_deterministic() {
        let d = seed(500, 9).unwrap();
        let e = seed(500, 9).unwrap();
        for i in 0..500 {
            let (a, b) = (&d.findings[i], &e.findings[i]);
            assert_eq!(finding_id(&d, i, a), finding_id(&e, i, b));
            assert_eq!(description(&d, i, a), description(&e, i, b));
            assert_eq!(comment_values(&d, i, a), comment_values(&e, i, b));
        }
        let desc = description(&d, 0, &d.findings[0]);
        assert!(desc.contains('\n') && desc.starts_with("## "));
    }

    #[test]
    fn view_cache_reuses_entries() {
        let c = ViewCache::new(2);
        let mut calls = 0;
        for _ in 0..3 {
            c.get_or_compute("a".into(), || {
                calls += 1;
                Ok(vec![1, 2])
            })
            .unwrap();
        }
        assert_eq!(calls, 1);
        c.get_or_compute("b".into(), || Ok(vec![])).unwrap();
        c.get_or_compute("c".into(), || Ok(vec![])).unwrap();
        let mut again = false;
        c.get_or_compute("a".into(), || {
            again = true;
            Ok(vec![])
        })
        .unwrap();
        assert!(again, "evicted after capacity");
    }
}
