//! The filter JSON language of `filters_config` (fact sheet 6.3), compiled to a predicate over
//! the compact finding records.
//!
//! A leaf on a field with a small domain (templates, accounts, statuses, resources...) is
//! evaluated once per domain value into a mask, so testing a finding is a table lookup; only
//! per-finding fields (id, score, times, finding_id, ...) are evaluated finding by finding.

use std::cmp::Ordering;
use std::collections::HashSet;

use serde_json::Value as Json;

use super::data::{
    Data, FiltersConfig, FindingRec, ACCOUNTS, DATASOURCES, KINDS, RTYPES, STATUSES, SUB_PHASES, TEMPLATES,
};
use super::findings as fx;
use super::util::{format_datetime, parse_datetime};

/// A field value as the filter language sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum FV {
    Null,
    Int(i64),
    Float(f64),
    Time(i64),
    Str(String),
    List(Vec<String>),
}

impl FV {
    fn is_empty(&self) -> bool {
        match self {
            FV::Null => true,
            FV::Str(s) => s.is_empty(),
            FV::List(l) => l.is_empty(),
            _ => false,
        }
    }

    fn text(&self) -> String {
        match self {
            FV::Null => String::new(),
            FV::Int(i) => i.to_string(),
            FV::Float(f) => f.to_string(),
            FV::Time(t) => format_datetime(*t),
            FV::Str(s) => s.clone(),
            FV::List(l) => l.join(","),
        }
    }
}

/// Where a field's value comes from: the finding itself or a small table it points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dom {
    Finding,
    Template,
    Resource,
    Account,
    RType,
    Datasource,
    Status,
    Severity,
    SubPhase,
}

impl Dom {
    pub fn index(self, data: &Data, rec: &FindingRec) -> usize {
        match self {
            Dom::Finding => 0,
            Dom::Template => usize::from(rec.template),
            Dom::Resource => rec.resource as usize,
            Dom::Account => usize::from(data.resource(rec.resource).account),
            Dom::RType => usize::from(data.resource(rec.resource).rtype),
            Dom::Datasource => usize::from(rec.datasource),
            Dom::Status => usize::from(rec.status),
            Dom::Severity => usize::from(rec.severity),
            Dom::SubPhase => usize::from(rec.sub_phase),
        }
    }

    fn len(self, data: &Data) -> usize {
        match self {
            Dom::Finding => 0,
            Dom::Template => TEMPLATES.len(),
            Dom::Resource => data.statics.resources.len(),
            Dom::Account => ACCOUNTS.len(),
            Dom::RType => RTYPES.len(),
            Dom::Datasource => DATASOURCES.len(),
            Dom::Status => STATUSES.len(),
            Dom::Severity => 6,
            Dom::SubPhase => SUB_PHASES.len(),
        }
    }
}

/// The filterable (and groupable) fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum F {
    Id,
    FindingId,
    Title,
    Severity,
    Score,
    OriginalScore,
    Age,
    Discovered,
    LastReported,
    DueDate,
    CloudProvider,
    CloudAccount,
    CloudAccountName,
    ResourceName,
    ResourceId,
    ResourceType,
    Region,
    Source,
    DatasourceName,
    DatasourceId,
    StatusKey,
    StatusCategory,
    StatusTitle,
    OriginalStatus,
    Package,
    Cve,
    FindingType,
    FixSubtype,
    TagsValues,
    TagsKeyValues,
    TicketStatus,
    SlaStatus,
    SubPhase,
    Description,
}

impl F {
    pub fn parse(name: &str) -> Result<F, String> {
        let n = name.trim();
        let n = n.strip_prefix("finding.").unwrap_or(n);
        Ok(match n {
            "id" | "id_int" => F::Id,
            "finding_id" => F::FindingId,
            "title" => F::Title,
            "severity" | "finding_score.severity" => F::Severity,
            "score" | "finding_score.score" => F::Score,
            "original_score" | "finding_score.original_score" => F::OriginalScore,
            "age" => F::Age,
            "discovered_time" => F::Discovered,
            "last_reported_time" => F::LastReported,
            "due_date" => F::DueDate,
            "cloud_provider" | "main_resource.cloud_provider" | "resource.cloud_provider" => F::CloudProvider,
            "cloud_account" | "main_resource.cloud_account" | "resource.cloud_account" => F::CloudAccount,
            "cloud_account_friendly_name" | "main_resource.cloud_account_friendly_name" => {
                F::CloudAccountName
            }
            "resource_name" | "main_resource.resource_name" | "resource.resource_name" | "resource.name" => {
                F::ResourceName
            }
            "resource_id" | "main_resource.resource_id" | "resource.resource_id" => F::ResourceId,
            "resource_type" | "main_resource.resource_type" | "resource.resource_type" => F::ResourceType,
            "region" | "main_resource.region" | "resource.region" => F::Region,
            "source" | "datasource.source" => F::Source,
            "datasource" | "datasource.friendly_name" | "datasource_friendly_name" => F::DatasourceName,
            "datasource_id" | "datasource.id" | "datasource.id_int" => F::DatasourceId,
            "actual_status" | "status" | "actual_status.key" | "status.key" | "actual_status_key" => {
                F::StatusKey
            }
            "actual_status.category" | "status.category" | "status_category" => F::StatusCategory,
            "actual_status.title" | "actual_status.name" | "status.title" | "status.name" => F::StatusTitle,
            "original_status" => F::OriginalStatus,
            "package_name" | "package" => F::Package,
            "cve" => F::Cve,
            "finding_type" => F::FindingType,
            "fix_subtype" => F::FixSubtype,
            "tags_values" | "datasource_tags_values" => F::TagsValues,
            "tags_key_values" => F::TagsKeyValues,
            "ticket_status" | "tickets.status" | "tickets" => F::TicketStatus,
            "sla_status" => F::SlaStatus,
            "remediation_sub_phase" => F::SubPhase,
            "description" => F::Description,
            _ => return Err(format!("Unknown filter field {name:?}")),
        })
    }

    pub fn dom(self) -> Dom {
        match self {
            F::Title | F::Package | F::Cve | F::FindingType | F::FixSubtype => Dom::Template,
            F::Severity => Dom::Severity,
            F::CloudProvider | F::CloudAccount | F::CloudAccountName => Dom::Account,
            F::ResourceName | F::ResourceId | F::Region | F::TagsValues | F::TagsKeyValues => Dom::Resource,
            F::ResourceType => Dom::RType,
            F::Source | F::DatasourceName | F::DatasourceId => Dom::Datasource,
            F::StatusKey | F::StatusCategory | F::StatusTitle => Dom::Status,
            F::SubPhase => Dom::SubPhase,
            _ => Dom::Finding,
        }
    }

    /// The value of the field for domain index `i` (a finding index for `Dom::Finding`).
    pub fn value(self, data: &Data, i: usize) -> FV {
        let str_of = |s: Option<&str>| s.map_or(FV::Null, |s| FV::Str(s.to_owned()));
        match self {
            F::Title => str_of(TEMPLATES.get(i).map(|t| t.title)),
            F::Package => str_of(TEMPLATES.get(i).and_then(|t| t.package)),
            F::Cve => str_of(TEMPLATES.get(i).and_then(|t| t.cve)),
            F::FindingType => str_of(TEMPLATES.get(i).and_then(|t| KINDS.get(usize::from(t.kind)).copied())),
            F::FixSubtype => str_of(TEMPLATES.get(i).map(fx::fix_subtype)),
            F::Severity => FV::Int(i as i64),
            F::CloudProvider => str_of(ACCOUNTS.get(i).map(|a| a.provider)),
            F::CloudAccount => str_of(ACCOUNTS.get(i).map(|a| a.id)),
            F::CloudAccountName => str_of(ACCOUNTS.get(i).map(|a| a.name)),
            F::ResourceName => data.statics.resources.get(i).map_or(FV::Null, |r| FV::Str(r.name())),
            F::ResourceId => data.statics.resources.get(i).map_or(FV::Null, |r| FV::Str(r.resource_id())),
            F::Region => data.statics.resources.get(i).map_or(FV::Null, |r| FV::Str(r.region().to_owned())),
            F::TagsValues => data
                .statics
                .resources
                .get(i)
                .map_or(FV::Null, |r| FV::List(r.tags().iter().map(|(_, v)| (*v).to_owned()).collect())),
            F::TagsKeyValues => {
                data.statics.resources.get(i).map_or(FV::Null, |r| {
                    FV::List(r.tags().iter().map(|(k, v)| format!("{k}:{v}")).collect())
                })
            }
            F::ResourceType => str_of(RTYPES.get(i).copied()),
            F::Source => str_of(DATASOURCES.get(i).map(|d| d.source)),
            F::DatasourceName => str_of(DATASOURCES.get(i).map(|d| d.name)),
            F::DatasourceId => FV::Int(i as i64 + 1),
            F::StatusKey => str_of(STATUSES.get(i).map(|s| s.key)),
            F::StatusCategory => str_of(STATUSES.get(i).map(|s| s.category)),
            F::StatusTitle => str_of(STATUSES.get(i).map(|s| s.title)),
            F::SubPhase => str_of(SUB_PHASES.get(i).copied()),
            // Per-finding fields.
            _ => match data.finding(i) {
                Some(rec) => self.finding_value(data, i, rec),
                None => FV::Null,
            },
        }
    }

    fn finding_value(self, data: &Data, i: usize, rec: &FindingRec) -> FV {
        match self {
            F::Id => FV::Int(i as i64 + 1),
            F::FindingId => FV::Str(fx::finding_id(data, i, rec)),
            F::Score => FV::Float(f64::from(rec.score) / 100.0),
            F::OriginalScore => fx::original_score(rec).map_or(FV::Null, FV::Float),
            F::Age => FV::Int(fx::age(data, rec)),
            F::Discovered => FV::Time(i64::from(rec.discovered)),
            F::LastReported => FV::Time(i64::from(rec.last_reported)),
            F::DueDate => {
                if rec.due == 0 {
                    FV::Null
                } else {
                    FV::Time(i64::from(rec.due))
                }
            }
            F::OriginalStatus => FV::Str(fx::original_status(rec).to_owned()),
            F::TicketStatus => {
                FV::List(fx::ticket_statuses(i, rec).iter().map(|s| (*s).to_owned()).collect())
            }
            F::SlaStatus => FV::Str(fx::sla_status(data, rec).to_owned()),
            F::Description => FV::Str(fx::description(data, i, rec)),
            other => {
                let dom = other.dom();
                other.value(data, dom.index(data, rec))
            }
        }
    }

    /// The value of the field for a finding.
    pub fn of(self, data: &Data, i: usize, rec: &FindingRec) -> FV {
        match self.dom() {
            Dom::Finding => self.finding_value(data, i, rec),
            dom => self.value(data, dom.index(data, rec)),
        }
    }
}

// ------------------------------------------------------------------ conditions

#[derive(Clone, Debug)]
struct Lit {
    s: String,
    lower: String,
    num: Option<f64>,
    time: Option<i64>,
    null: bool,
}

impl Lit {
    fn new(v: &Json) -> Lit {
        let (s, null) = match v {
            Json::String(s) => (s.clone(), false),
            Json::Null => (String::new(), true),
            other => (other.to_string(), false),
        };
        let num = match v {
            Json::Number(n) => n.as_f64(),
            Json::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        let time = match v {
            Json::String(s) if s.len() >= 10 => parse_datetime(s).ok(),
            _ => None,
        };
        Lit { lower: s.to_lowercase().replace('%', ""), s, num, time, null }
    }

    fn eq(&self, v: &FV) -> bool {
        match v {
            FV::Null => self.null,
            FV::Int(i) => self.num == Some(*i as f64),
            FV::Float(f) => self.num.is_some_and(|n| (n - f).abs() < 1e-9),
            FV::Time(t) => self.time == Some(*t) || self.num == Some(*t as f64),
            FV::Str(s) => *s == self.s,
            FV::List(l) => l.contains(&self.s),
        }
    }

    fn cmp(&self, v: &FV) -> Option<Ordering> {
        match v {
            FV::Int(i) => (*i as f64).partial_cmp(&self.num?),
            FV::Float(f) => f.partial_cmp(&self.num?),
            FV::Time(t) => match self.time {
                Some(x) => Some(t.cmp(&x)),
                None => (*t as f64).partial_cmp(&self.num?),
            },
            FV::Str(s) => Some(s.as_str().cmp(self.s.as_str())),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    In,
    Equals,
    Contains,
    Exists,
    Overlap,
    OverlapIlike,
    Gt,
    Gte,
    Lt,
    Lte,
}

#[derive(Clone, Debug)]
pub struct Cond {
    op: Op,
    negate: bool,
    lits: Vec<Lit>,
    truthy: bool,
}

const CONDITIONS: &str = "in, not_in, equals, not_equals, contains, not_contains, exists, overlap, \
notoverlapping, overlapilikelist, notoverlapilikelist, gt, gte, lt, lte";

impl Cond {
    fn parse(cond: &str, value: &Json) -> Result<Cond, String> {
        let (op, negate) = match cond.trim().to_ascii_lowercase().as_str() {
            "in" => (Op::In, false),
            "not_in" | "notin" => (Op::In, true),
            "equals" | "eq" | "exact" => (Op::Equals, false),
            "not_equals" | "ne" => (Op::Equals, true),
            "contains" | "icontains" => (Op::Contains, false),
            "not_contains" => (Op::Contains, true),
            "exists" => (Op::Exists, false),
            "overlap" | "overlapping" => (Op::Overlap, false),
            "notoverlapping" | "not_overlap" => (Op::Overlap, true),
            "overlapilikelist" => (Op::OverlapIlike, false),
            "notoverlapilikelist" => (Op::OverlapIlike, true),
            "gt" => (Op::Gt, false),
            "gte" => (Op::Gte, false),
            "lt" => (Op::Lt, false),
            "lte" => (Op::Lte, false),
            other => {
                return Err(format!("Unknown filter condition {other:?}; expected one of: {CONDITIONS}"))
            }
        };
        let lits: Vec<Lit> = match value {
            Json::Array(items) => items.iter().map(Lit::new).collect(),
            other => vec![Lit::new(other)],
        };
        let truthy = match value {
            Json::Bool(b) => *b,
            Json::String(s) => s.eq_ignore_ascii_case("true"),
            Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
            _ => false,
        };
        Ok(Cond { op, negate, lits, truthy })
    }

    pub fn test(&self, v: &FV) -> bool {
        let hit = match self.op {
            Op::In | Op::Overlap => self.lits.iter().any(|l| l.eq(v)),
            Op::Equals => match (v, self.lits.len()) {
                (FV::List(items), n) if n != 1 => {
                    let a: HashSet<&str> = items.iter().map(String::as_str).collect();
                    let b: HashSet<&str> = self.lits.iter().map(|l| l.s.as_str()).collect();
                    a == b
                }
                _ => self.lits.first().is_some_and(|l| l.eq(v)),
            },
            Op::Contains => {
                let needle = self.lits.first().map_or("", |l| l.lower.as_str());
                match v {
                    FV::Null => false,
                    FV::List(items) => items.iter().any(|x| x.to_lowercase().contains(needle)),
                    other => other.text().to_lowercase().contains(needle),
                }
            }
            Op::Exists => v.is_empty() != self.truthy,
            Op::OverlapIlike => {
                let hay: Vec<String> = match v {
                    FV::Null => Vec::new(),
                    FV::List(items) => items.iter().map(|x| x.to_lowercase()).collect(),
                    other => vec![other.text().to_lowercase()],
                };
                hay.iter().any(|h| self.lits.iter().any(|l| h.contains(l.lower.as_str())))
            }
            Op::Gt | Op::Gte | Op::Lt | Op::Lte => {
                let want = |o: Ordering| match self.op {
                    Op::Gt => o == Ordering::Greater,
                    Op::Gte => o != Ordering::Less,
                    Op::Lt => o == Ordering::Less,
                    _ => o != Ordering::Greater,
                };
                let first = self.lits.first();
                match v {
                    FV::List(items) => {
                        items.iter().any(|x| first.and_then(|l| l.cmp(&FV::Str(x.clone()))).is_some_and(want))
                    }
                    other => first.and_then(|l| l.cmp(other)).is_some_and(want),
                }
            }
        };
        hit != self.negate
    }
}

// ------------------------------------------------------------------ syntax

#[derive(Clone, Debug, PartialEq)]
pub enum Ast {
    Group { or: bool, items: Vec<Ast> },
    Leaf { field: String, cond: String, value: Json },
}

const MAX_DEPTH: usize = 32;

pub fn parse_text(text: &str) -> Result<Option<Ast>, String> {
    let t = text.trim();
    if t.is_empty() || t == "null" {
        return Ok(None);
    }
    let json: Json = serde_json::from_str(t).map_err(|e| format!("Badly formed filter JSON: {e}"))?;
    parse(&json, None, 0).map(Some)
}

pub fn parse(v: &Json, prefix: Option<&str>, depth: usize) -> Result<Ast, String> {
    if depth > MAX_DEPTH {
        return Err("Filter JSON is nested too deeply".into());
    }
    match v {
        Json::String(s) => {
            let inner: Json =
                serde_json::from_str(s).map_err(|e| format!("Badly formed filter JSON: {e}"))?;
            parse(&inner, prefix, depth + 1)
        }
        Json::Null => Ok(Ast::Group { or: false, items: Vec::new() }),
        Json::Object(m) if m.contains_key("operator") || m.contains_key("operands") => {
            let op = m.get("operator").and_then(Json::as_str).unwrap_or("and").to_ascii_lowercase();
            let or = match op.as_str() {
                "and" => false,
                "or" => true,
                other => {
                    return Err(format!("Unknown filter operator {other:?}; expected \"and\" or \"or\""))
                }
            };
            let items = match m.get("operands") {
                None | Some(Json::Null) => Vec::new(),
                Some(Json::Array(ops)) => {
                    ops.iter().map(|o| parse(o, prefix, depth + 1)).collect::<Result<Vec<_>, _>>()?
                }
                Some(other) => return Err(format!("\"operands\" must be a list, got {other}")),
            };
            Ok(Ast::Group { or, items })
        }
        Json::Object(m) if m.contains_key("field") => {
            let field = m.get("field").and_then(Json::as_str).ok_or("\"field\" must be a string")?;
            let full = match prefix {
                Some(p) => format!("{p}.{field}"),
                None => field.to_owned(),
            };
            let cond = m.get("condition").and_then(Json::as_str).unwrap_or("").to_owned();
            let value = m.get("value").cloned().unwrap_or(Json::Null);
            if cond.trim().is_empty() {
                let nested = match &value {
                    Json::String(s) => serde_json::from_str::<Json>(s).ok().filter(Json::is_object),
                    Json::Object(_) => Some(value.clone()),
                    _ => None,
                };
                return match nested {
                    Some(n) => parse(&n, Some(&full), depth + 1),
                    None => Err(format!("Filter on {full:?} has no condition")),
                };
            }
            Ok(Ast::Leaf { field: full, cond, value })
        }
        Json::Object(m) if m.is_empty() => Ok(Ast::Group { or: false, items: Vec::new() }),
        other => Err(format!("Invalid filter node: {other}")),
    }
}

fn field_in(field: &str, list: &[String]) -> bool {
    let head = field.split('.').next().unwrap_or(field);
    list.iter().any(|x| x == field || x == head)
}

fn prune(ast: Ast, keep: &dyn Fn(&str) -> bool) -> Option<Ast> {
    match ast {
        Ast::Leaf { ref field, .. } => keep(field).then_some(ast),
        Ast::Group { or, items } => {
            let items: Vec<Ast> = items.into_iter().filter_map(|a| prune(a, keep)).collect();
            (!items.is_empty()).then_some(Ast::Group { or, items })
        }
    }
}

fn leaf_fields(ast: &Ast, out: &mut Vec<String>) {
    match ast {
        Ast::Leaf { field, .. } => out.push(field.clone()),
        Ast::Group { items, .. } => items.iter().for_each(|a| leaf_fields(a, out)),
    }
}

// ------------------------------------------------------------------ predicates

#[derive(Clone, Debug)]
pub enum Pred {
    True,
    False,
    And(Vec<Pred>),
    Or(Vec<Pred>),
    Mask { dom: Dom, mask: Vec<bool> },
    Ids(HashSet<u32>, bool),
    PerFinding { field: F, cond: Cond },
}

impl Pred {
    pub fn test(&self, data: &Data, i: usize, rec: &FindingRec) -> bool {
        match self {
            Pred::True => true,
            Pred::False => false,
            Pred::And(ps) => ps.iter().all(|p| p.test(data, i, rec)),
            Pred::Or(ps) => ps.iter().any(|p| p.test(data, i, rec)),
            Pred::Mask { dom, mask } => mask.get(dom.index(data, rec)).copied().unwrap_or(false),
            Pred::Ids(ids, negate) => ids.contains(&(i as u32 + 1)) != *negate,
            Pred::PerFinding { field, cond } => cond.test(&field.finding_value(data, i, rec)),
        }
    }

    fn and(items: Vec<Pred>) -> Pred {
        let mut out = Vec::new();
        for p in items {
            match p {
                Pred::True => {}
                Pred::False => return Pred::False,
                Pred::And(inner) => out.extend(inner),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Pred::True,
            1 => out.pop().unwrap_or(Pred::True),
            _ => Pred::And(out),
        }
    }

    fn or(items: Vec<Pred>) -> Pred {
        if items.is_empty() {
            return Pred::True;
        }
        let mut out = Vec::new();
        for p in items {
            match p {
                Pred::True => return Pred::True,
                Pred::False => {}
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Pred::False,
            1 => out.pop().unwrap_or(Pred::False),
            _ => Pred::Or(out),
        }
    }
}

pub fn compile(ast: &Ast, data: &Data) -> Result<Pred, String> {
    match ast {
        Ast::Group { or, items } => {
            let ps = items.iter().map(|a| compile(a, data)).collect::<Result<Vec<_>, _>>()?;
            Ok(if *or { Pred::or(ps) } else { Pred::and(ps) })
        }
        Ast::Leaf { field, cond, value } => {
            if data.profile == super::known::Profile::Known {
                super::known::check_leaf(field, cond)?;
            }
            let f = F::parse(field)?;
            let c = Cond::parse(cond, value)?;
            if f == F::Id && c.op == Op::In {
                let ids: Option<HashSet<u32>> = c.lits.iter().map(|l| l.num.map(|n| n as u32)).collect();
                if let Some(ids) = ids {
                    return Ok(Pred::Ids(ids, c.negate));
                }
            }
            let dom = f.dom();
            if dom == Dom::Finding {
                return Ok(Pred::PerFinding { field: f, cond: c });
            }
            let mask: Vec<bool> = (0..dom.len(data)).map(|i| c.test(&f.value(data, i))).collect();
            Ok(if mask.iter().all(|b| *b) {
                Pred::True
            } else if !mask.iter().any(|b| *b) {
                Pred::False
            } else {
                Pred::Mask { dom, mask }
            })
        }
    }
}

/// Validates a filter JSON text (for rules and saved filters) without a dataset.
pub fn validate(text: &str) -> Result<(), String> {
    fn check(ast: &Ast) -> Result<(), String> {
        match ast {
            Ast::Group { items, .. } => items.iter().try_for_each(check),
            Ast::Leaf { field, cond, value } => {
                F::parse(field)?;
                Cond::parse(cond, value).map(|_| ())
            }
        }
    }
    match parse_text(text)? {
        Some(ast) => check(&ast),
        None => Ok(()),
    }
}

/// Compiles a whole `filters_config` (filters side AND scopes side) against the store.
pub fn compile_config(fc: &FiltersConfig, data: &Data) -> Result<Pred, String> {
    let mut filters: Vec<Ast> = Vec::new();
    if let Some(text) = &fc.filtersjson {
        filters.extend(parse_text(text)?);
    }
    if let Some(pk) = fc.filtersid {
        let f = data
            .filters
            .iter()
            .find(|f| f.pk == pk)
            .ok_or_else(|| format!("FindingFilter matching query does not exist (id {pk})."))?;
        filters.extend(parse_text(&f.filter)?);
    }
    let mut scopes: Vec<Ast> = Vec::new();
    if let Some(text) = &fc.scopesjson {
        scopes.extend(parse_text(text)?);
    }
    for pk in [fc.scopesid, fc.scope_group].into_iter().flatten() {
        let g = data
            .scope_groups
            .iter()
            .find(|g| g.pk == pk)
            .ok_or_else(|| format!("ScopeGroup matching query does not exist (id {pk})."))?;
        let mut items = Vec::new();
        for sid in &g.scopes {
            if let Some(s) = data.filters.iter().find(|f| f.pk == *sid) {
                items.extend(parse_text(&s.filter)?);
            }
        }
        if !items.is_empty() {
            scopes.push(Ast::Group { or: true, items });
        }
    }
    let side = |asts: Vec<Ast>, incl: &[String], excl: &[String], over: &[String], other: &[Ast]| {
        let mut other_fields = Vec::new();
        other.iter().for_each(|a| leaf_fields(a, &mut other_fields));
        let keep = |field: &str| {
            (incl.is_empty() || field_in(field, incl))
                && !field_in(field, excl)
                && !(field_in(field, over) && field_in(field, &other_fields))
        };
        asts.into_iter().filter_map(|a| prune(a, &keep)).collect::<Vec<_>>()
    };
    let f_side = side(
        filters.clone(),
        &fc.filters_fields_to_include,
        &fc.filters_fields_to_exclude,
        &fc.filters_fields_to_override,
        &scopes,
    );
    let s_side = side(
        scopes,
        &fc.scopes_fields_to_include,
        &fc.scopes_fields_to_exclude,
        &fc.scopes_fields_to_override,
        &filters,
    );
    let all = Ast::Group { or: false, items: f_side.into_iter().chain(s_side).collect() };
    compile(&all, data)
}

/// The indices of the findings matching `pred`, in id order (removed findings never match).
pub fn matching(data: &Data, pred: &Pred) -> Vec<u32> {
    let live = |i: &u32| data.finding(*i as usize).is_some_and(|r| !r.removed());
    match pred {
        Pred::True => (0..data.findings.len() as u32).filter(live).collect(),
        Pred::False => Vec::new(),
        Pred::Ids(ids, false) => {
            let mut v: Vec<u32> = ids
                .iter()
                .filter(|id| (1..=data.findings.len() as u32).contains(id))
                .map(|id| id - 1)
                .filter(live)
                .collect();
            v.sort_unstable();
            v
        }
        p => data
            .findings
            .iter()
            .enumerate()
            .filter(|(i, rec)| !rec.removed() && p.test(data, *i, rec))
            .map(|(i, _)| i as u32)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graphql::data::seed;

    fn count(data: &Data, json: &str) -> usize {
        let fc = FiltersConfig::json(json);
        matching(data, &compile_config(&fc, data).unwrap()).len()
    }

    fn brute(data: &Data, f: impl Fn(usize, &FindingRec) -> bool) -> usize {
        data.findings.iter().enumerate().filter(|(i, r)| f(*i, r)).count()
    }

    #[test]
    fn leaves_match_brute_force() {
        let d = seed(3000, 11).unwrap();
        let n = count(&d, r#"{"field":"severity","condition":"in","value":["4","5"]}"#);
        assert_eq!(n, brute(&d, |_, r| r.severity >= 4));
        assert!(n > 0 && n < 3000);
        // ints work like strings
        assert_eq!(n, count(&d, r#"{"field":"severity","condition":"in","value":[4,5]}"#));
        let not = count(&d, r#"{"field":"severity","condition":"not_in","value":["4","5"]}"#);
        assert_eq!(n + not, 3000);
        assert_eq!(
            count(&d, r#"{"field":"cloud_provider","condition":"equals","value":"AWS"}"#),
            brute(&d, |_, r| d.resource(r.resource).account().provider == "AWS")
        );
        assert_eq!(
            count(&d, r#"{"field":"title","condition":"contains","value":"PUBLIC"}"#),
            brute(&d, |_, r| r.template().title.to_lowercase().contains("public"))
        );
        assert_eq!(
            count(&d, r#"{"field":"package_name","condition":"exists","value":"true"}"#),
            brute(&d, |_, r| r.template().package.is_some())
        );
        assert_eq!(
            count(&d, r#"{"field":"package_name","condition":"exists","value":"false"}"#),
            brute(&d, |_, r| r.template().package.is_none())
        );
        assert_eq!(
            count(&d, r#"{"field":"score","condition":"gte","value":9}"#),
            brute(&d, |_, r| r.score >= 900)
        );
        assert_eq!(count(&d, r#"{"field":"id","condition":"in","value":[1,2,3,999999]}"#), 3);
        assert_eq!(count(&d, r#"{"field":"id","condition":"not_in","value":[1,2,3]}"#), 2997);
    }

    #[test]
    fn groups_nested_relations_and_lists() {
        let d = seed(3000, 12).unwrap();
        let open = brute(&d, |_, r| r.status().category == "OPEN");
        let nested = r#"{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}"#;
        assert_eq!(count(&d, nested), open);
        assert_eq!(
            count(&d, r#"{"field":"actual_status.category","condition":"in","value":["OPEN"]}"#),
            open
        );
        let keys = r#"{"field":"actual_status","condition":"","value":{"field":"key","condition":"in","value":["11","12"]}}"#;
        assert_eq!(count(&d, keys), brute(&d, |_, r| ["11", "12"].contains(&r.status().key)));
        let and = format!(
            r#"{{"operator":"and","operands":[{nested},{{"field":"severity","condition":"in","value":["5"]}}]}}"#
        );
        assert_eq!(count(&d, &and), brute(&d, |_, r| r.status().category == "OPEN" && r.severity == 5));
        // An operand may be a JSON text.
        let or = r#"{"operator":"or","operands":["{\"field\":\"severity\",\"condition\":\"in\",\"value\":[\"1\"]}",{"field":"severity","condition":"in","value":["2"]}]}"#;
        assert_eq!(count(&d, or), brute(&d, |_, r| r.severity <= 2));
        assert_eq!(
            count(&d, r#"{"field":"tags_values","condition":"overlap","value":["prod","nothing"]}"#),
            brute(&d, |_, r| d.resource(r.resource).account().env == "prod")
        );
        assert_eq!(
            count(&d, r#"{"field":"tags_values","condition":"notoverlapping","value":["prod"]}"#),
            brute(&d, |_, r| d.resource(r.resource).account().env != "prod")
        );
        assert_eq!(
            count(&d, r#"{"field":"tags_key_values","condition":"overlapilikelist","value":["ENV:PR"]}"#),
            brute(&d, |_, r| d.resource(r.resource).account().env == "prod")
        );
        assert_eq!(count(&d, r#"{"operator":"and","operands":[]}"#), 3000);
        assert_eq!(count(&d, "{}"), 3000);
    }

    #[test]
    fn errors_are_clear() {
        let d = seed(100, 1).unwrap();
        let err = |j: &str| compile_config(&FiltersConfig::json(j), &d).unwrap_err();
        assert!(err(r#"{"field":"nope","condition":"in","value":[1]}"#).contains("Unknown filter field"));
        assert!(err(r#"{"field":"severity","condition":"like","value":[1]}"#)
            .contains("Unknown filter condition"));
        assert!(err("{not json").contains("Badly formed"));
        assert!(err(r#"{"operator":"xor","operands":[]}"#).contains("operator"));
        assert!(validate(r#"{"field":"severity","condition":"in","value":["3"]}"#).is_ok());
    }

    #[test]
    fn saved_filters_scopes_and_field_lists() {
        let d = seed(3000, 13).unwrap();
        // Seeded scope group 1 = AWS or Azure or GCP scopes.
        let fc = FiltersConfig { scopesid: Some(1), ..Default::default() };
        let n = matching(&d, &compile_config(&fc, &d).unwrap()).len();
        assert_eq!(n, brute(&d, |_, r| d.resource(r.resource).account().provider != "GitHub"));
        // Saved filter 2 = title contains public.
        let fc = FiltersConfig { filtersid: Some(2), ..Default::default() };
        let n = matching(&d, &compile_config(&fc, &d).unwrap()).len();
        assert_eq!(n, brute(&d, |_, r| r.template().title.to_lowercase().contains("public")));
        let fc = FiltersConfig {
            filtersjson: Some(
                r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["5"]},{"field":"cloud_provider","condition":"in","value":["AWS"]}]}"#
                    .into(),
            ),
            filters_fields_to_exclude: vec!["severity".into()],
            ..Default::default()
        };
        let n = matching(&d, &compile_config(&fc, &d).unwrap()).len();
        assert_eq!(n, brute(&d, |_, r| d.resource(r.resource).account().provider == "AWS"));
        let fc = FiltersConfig { filtersid: Some(999), ..Default::default() };
        assert!(compile_config(&fc, &d).is_err());
    }
}
