//! Builds the executable schema mechanically from the SDL in `schema/schema.graphql`.
//!
//! Every object field gets a generic resolver (read the same-named member of the parent
//! value; page it when the field's type is a `*Connection`), except the root Query / Mutation
//! fields, which must each have a hand-written resolver registered by name. This keeps the
//! SDL the single description of the model and avoids derive macros on ~100 types.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_graphql::dynamic::{
    Enum, EnumItem, Field, FieldFuture, FieldValue, InputObject, InputValue, Interface, InterfaceField,
    Object, ResolverContext, Scalar, Schema, Subscription, SubscriptionField, SubscriptionFieldFuture,
    TypeRef,
};
use async_graphql::parser::types::{
    BaseType, ConstDirective, FieldDefinition, InputValueDefinition, Type, TypeKind, TypeSystemDefinition,
};
use async_graphql::{Positioned, Value};

use super::data::Store;
use super::events::{Body, Event, EventBus};
use super::findings::{finding_field, FindingObj, Out, ViewCache};
use super::paging::{window, PageArgs};

/// Shared state of all resolvers.
pub struct Env {
    pub store: Store,
    pub views: ViewCache,
    pub events: Arc<EventBus>,
    /// Root mutation fields that ran without an error.
    pub mutations_applied: std::sync::atomic::AtomicU64,
}

/// The parent value of `FindingEvent` / `RuleEvent` fields.
pub struct EventObj {
    pub event: Arc<Event>,
    pub data: Arc<super::data::Data>,
}

/// A hand-written root field resolver. `Ok(None)` is GraphQL null.
pub type RootFn = fn(&Env, &ResolverContext<'_>) -> Result<Option<FieldValue<'static>>, String>;

/// A node of a connection page.
pub enum NodeItem {
    Val(Value),
    Finding(FindingObj),
}

pub struct EdgeObj {
    pub cursor: String,
    pub node: NodeItem,
}

/// One page of a connection: the parent value of `*Connection` fields.
pub struct ConnPage {
    pub edges: Vec<EdgeObj>,
    pub page_info: Value,
    pub total: usize,
}

impl ConnPage {
    /// Pages a list of `len` items; `make` builds only the nodes of the page.
    pub fn build(
        args: &PageArgs,
        len: usize,
        field: &str,
        mut make: impl FnMut(usize) -> NodeItem,
    ) -> Result<ConnPage, String> {
        let w = window(args, len, field)?;
        let edges =
            (w.start..w.end).map(|i| EdgeObj { cursor: super::paging::cursor(i), node: make(i) }).collect();
        Ok(ConnPage { edges, page_info: w.page_info(), total: len })
    }

    pub fn from_values(args: &PageArgs, items: Vec<Value>, field: &str) -> Result<ConnPage, String> {
        let w = window(args, items.len(), field)?;
        let total = items.len();
        let edges = items
            .into_iter()
            .enumerate()
            .skip(w.start)
            .take(w.len())
            .map(|(i, v)| EdgeObj { cursor: super::paging::cursor(i), node: NodeItem::Val(v) })
            .collect();
        Ok(ConnPage { edges, page_info: w.page_info(), total })
    }
}

/// The name of the field being resolved (graphene's `info.field_name`, never the alias).
pub fn field_name<'a>(ctx: &ResolverContext<'a>) -> &'a str {
    ctx.ctx.item.node.name.node.as_str()
}

/// Records a resolver error with its path and position, as graphene reports resolver
/// errors; the field itself becomes null.
pub fn report(ctx: &ResolverContext<'_>, message: String) {
    let err = async_graphql::Error::new(message).into_server_error(ctx.ctx.item.pos);
    ctx.add_error(ctx.set_error_path(err));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Leaf,
    Object,
    LeafList,
    ObjectList,
    Connection,
}

struct Plan {
    name: String,
    shape: Shape,
    out: Option<Out>,
}

fn parent_value<'a>(fv: &'a FieldValue<'a>) -> Option<&'a Value> {
    fv.as_value().or_else(|| fv.downcast_ref::<Value>())
}

fn borrowed_member<'a>(
    plan: &Plan,
    member: &'a Value,
    ctx: &ResolverContext<'a>,
) -> Result<Option<FieldValue<'a>>, String> {
    if matches!(member, Value::Null) {
        return Ok(None);
    }
    Ok(Some(match plan.shape {
        Shape::Leaf | Shape::LeafList => FieldValue::value(member.clone()),
        Shape::Object => FieldValue::borrowed_any(member),
        Shape::ObjectList => match member {
            Value::List(items) => FieldValue::list(items.iter().map(|x| FieldValue::borrowed_any(x))),
            _ => return Ok(None),
        },
        Shape::Connection => {
            let items = match member {
                Value::List(items) => items.clone(),
                _ => return Ok(None),
            };
            let args = PageArgs::from_args(&ctx.args)?;
            FieldValue::owned_any(ConnPage::from_values(&args, items, field_name(ctx))?)
        }
    }))
}

fn owned_member<'a>(
    plan: &Plan,
    member: Value,
    ctx: &ResolverContext<'a>,
) -> Result<Option<FieldValue<'a>>, String> {
    if matches!(member, Value::Null) {
        return Ok(None);
    }
    Ok(Some(match plan.shape {
        Shape::Leaf | Shape::LeafList | Shape::Object => FieldValue::value(member),
        Shape::ObjectList => match member {
            Value::List(items) => FieldValue::list(items.into_iter().map(FieldValue::value)),
            _ => return Ok(None),
        },
        Shape::Connection => {
            let items = match member {
                Value::List(items) => items,
                _ => return Ok(None),
            };
            let args = PageArgs::from_args(&ctx.args)?;
            FieldValue::owned_any(ConnPage::from_values(&args, items, field_name(ctx))?)
        }
    }))
}

fn generic<'a>(plan: &Plan, ctx: &ResolverContext<'a>) -> Result<Option<FieldValue<'a>>, String> {
    let parent = ctx.parent_value;
    if let Some(v) = parent_value(parent) {
        return match v {
            Value::Object(m) => match m.get(plan.name.as_str()) {
                Some(member) => borrowed_member(plan, member, ctx),
                None => Ok(None),
            },
            _ => Ok(None),
        };
    }
    if let Some(f) = parent.downcast_ref::<FindingObj>() {
        return match plan.out {
            Some(out) => owned_member(plan, finding_field(f, out), ctx),
            None => Ok(None),
        };
    }
    if let Some(p) = parent.downcast_ref::<ConnPage>() {
        return Ok(match plan.name.as_str() {
            "edges" => Some(FieldValue::list(p.edges.iter().map(|e| FieldValue::borrowed_any(e)))),
            "pageInfo" => Some(FieldValue::value(p.page_info.clone())),
            "total_count" => Some(FieldValue::value(Value::from(p.total))),
            _ => None,
        });
    }
    if let Some(e) = parent.downcast_ref::<EventObj>() {
        return Ok(event_member(e, plan.name.as_str()));
    }
    if let Some(e) = parent.downcast_ref::<EdgeObj>() {
        return Ok(match plan.name.as_str() {
            "cursor" => Some(FieldValue::value(Value::String(e.cursor.clone()))),
            "node" => match &e.node {
                NodeItem::Val(Value::Null) => None,
                NodeItem::Val(v) => Some(FieldValue::borrowed_any(v)),
                NodeItem::Finding(f) => Some(FieldValue::borrowed_any(f)),
            },
            _ => None,
        });
    }
    Ok(None)
}

/// `(kind, rule_type)` of a mutation that changes a rule (`add_scoring_rule` -> add, scoring_rule).
fn rule_mutation(name: &str) -> Option<(&'static str, &'static str)> {
    let (verb, rest) = name.split_once('_')?;
    let kind = ["add", "edit", "delete", "activate", "enable"].into_iter().find(|k| *k == verb)?;
    let rule_type =
        ["scoring_rule", "status_rule", "sla_rule", "ticket_sla_rule"].into_iter().find(|t| *t == rest)?;
    Some((kind, rule_type))
}

/// The first `id` member of a mutation's answer, one or two levels down.
fn find_id(v: &Value) -> Option<Value> {
    let Value::Object(m) = v else { return None };
    if let Some(id) = m.get("id") {
        return Some(id.clone());
    }
    m.values().find_map(|inner| match inner {
        Value::Object(inner) => inner.get("id").cloned(),
        _ => None,
    })
}

fn event_member<'a>(e: &EventObj, name: &str) -> Option<FieldValue<'a>> {
    let ev = &e.event;
    let value = match (name, &ev.body) {
        ("cursor", _) => Value::String(ev.seq.to_string()),
        ("kind", _) => Value::String(ev.kind.clone()),
        ("occurred_at", _) => Value::String(super::util::format_datetime(ev.at)),
        ("finding", Body::Finding { idx, .. }) => {
            let idx = *idx;
            return e
                .data
                .finding(idx as usize)
                .map(|_| FieldValue::owned_any(FindingObj { data: Arc::clone(&e.data), idx, view: false }));
        }
        ("rule_type", Body::Rule { rule_type, .. }) => Value::String(rule_type.clone()),
        ("rule_id", Body::Rule { rule_id: Some(id), .. }) => Value::String(id.clone()),
        _ => return None,
    };
    Some(FieldValue::value(value))
}

/// A `Subscription` field: the event stream of `name`, resumed after the `after` cursor.
fn subscription_field(def: &FieldDefinition, env: &Arc<Env>) -> Result<SubscriptionField, String> {
    let name: &'static str = match def.name.node.as_str() {
        "finding_created" => "finding_created",
        "finding_changed" => "finding_changed",
        "rule_changed" => "rule_changed",
        other => return Err(format!("no event source for Subscription.{other}")),
    };
    let env = Arc::clone(env);
    let mut field = SubscriptionField::new(name, type_ref(&def.ty.node), move |ctx| {
        let env = Arc::clone(&env);
        SubscriptionFieldFuture::new(async move {
            use futures_util::StreamExt as _;
            let after = match ctx.args.get("after").map(|v| v.as_value().clone()) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(
                    s.parse::<u64>()
                        .map_err(|_| async_graphql::Error::new(format!("invalid cursor: {s:?}")))?,
                ),
                Some(other) => return Err(async_graphql::Error::new(format!("invalid cursor: {other}"))),
            };
            let severities: Option<Vec<u8>> = match ctx.args.get("severities").map(|v| v.as_value().clone()) {
                Some(Value::List(items)) => Some(
                    items
                        .iter()
                        .filter_map(|v| match v {
                            Value::Number(n) => n.as_u64().and_then(|n| u8::try_from(n).ok()),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => None,
            };
            let env2 = Arc::clone(&env);
            let events = env.events.stream(name, after).filter_map(move |event| {
                let keep = match (&severities, &event.body) {
                    (Some(wanted), Body::Finding { severity, .. }) => wanted.contains(severity),
                    _ => true,
                };
                let out = keep.then(|| {
                    Ok::<_, async_graphql::Error>(FieldValue::owned_any(EventObj {
                        event,
                        data: env2.store.snapshot(),
                    }))
                });
                std::future::ready(out)
            });
            Ok(events)
        })
    });
    if let Some(d) = &def.description {
        field = field.description(d.node.clone());
    }
    for arg in &def.arguments {
        field = field.argument(input_value(&arg.node));
    }
    Ok(field)
}

fn type_ref(t: &Type) -> TypeRef {
    let base = match &t.base {
        BaseType::Named(n) => TypeRef::Named(n.to_string().into()),
        BaseType::List(inner) => TypeRef::List(Box::new(type_ref(inner))),
    };
    if t.nullable {
        base
    } else {
        TypeRef::NonNull(Box::new(base))
    }
}

fn deprecation(dirs: &[Positioned<ConstDirective>]) -> Option<Option<String>> {
    dirs.iter().find(|d| d.node.name.node == "deprecated").map(|d| {
        d.node.get_argument("reason").and_then(|v| match &v.node {
            Value::String(s) => Some(s.clone()),
            _ => None,
        })
    })
}

fn input_value(def: &InputValueDefinition) -> InputValue {
    let mut iv = InputValue::new(def.name.node.to_string(), type_ref(&def.ty.node));
    if let Some(d) = &def.description {
        iv = iv.description(d.node.clone());
    }
    if let Some(v) = &def.default_value {
        iv = iv.default_value(v.node.clone());
    }
    if let Some(reason) = deprecation(&def.directives) {
        iv = iv.deprecation(reason.as_deref());
    }
    iv
}

fn shape(t: &Type, kinds: &HashMap<String, bool>) -> Shape {
    match &t.base {
        BaseType::List(inner) => {
            if shape(inner, kinds) == Shape::Leaf {
                Shape::LeafList
            } else {
                Shape::ObjectList
            }
        }
        BaseType::Named(n) => match kinds.get(n.as_str()) {
            Some(true) if n.ends_with("Connection") => Shape::Connection,
            Some(true) => Shape::Object,
            _ => Shape::Leaf,
        },
    }
}

fn object_field(
    type_name: &str,
    def: &FieldDefinition,
    kinds: &HashMap<String, bool>,
    env: &Arc<Env>,
    roots: &HashMap<&'static str, RootFn>,
    used: &mut HashSet<String>,
) -> Result<Field, String> {
    let name = def.name.node.to_string();
    let ty = type_ref(&def.ty.node);
    let key = format!("{type_name}.{name}");
    let mut field = if let Some(root) = roots.get(key.as_str()).copied() {
        used.insert(key);
        let env = Arc::clone(env);
        let is_mutation = type_name == "Mutation";
        let rule = is_mutation.then(|| rule_mutation(&name)).flatten();
        Field::new(name.clone(), ty, move |ctx| match root(&env, &ctx) {
            Ok(v) => {
                if is_mutation {
                    env.mutations_applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some((kind, rule_type)) = rule {
                    let id = ctx
                        .args
                        .get("id")
                        .map(|a| a.as_value().clone())
                        .or_else(|| v.as_ref().and_then(|fv| parent_value(fv)).and_then(find_id));
                    let rule_id = id.and_then(|id| match id {
                        Value::String(s) => Some(s),
                        Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    });
                    let at = env.store.snapshot().today + 12 * 3600;
                    env.events.publish(
                        "rule_changed",
                        kind,
                        at,
                        Body::Rule { rule_type: rule_type.into(), rule_id },
                    );
                }
                FieldFuture::Value(v)
            }
            Err(message) => {
                report(&ctx, message);
                FieldFuture::Value(None)
            }
        })
    } else if type_name == "Query" || type_name == "Mutation" {
        return Err(format!("no resolver registered for {key}"));
    } else {
        let plan = Plan { name: name.clone(), shape: shape(&def.ty.node, kinds), out: Out::from_name(&name) };
        Field::new(name.clone(), ty, move |ctx| match generic(&plan, &ctx) {
            Ok(v) => FieldFuture::Value(v),
            Err(message) => {
                report(&ctx, message);
                FieldFuture::Value(None)
            }
        })
    };
    if let Some(d) = &def.description {
        field = field.description(d.node.clone());
    }
    if let Some(reason) = deprecation(&def.directives) {
        field = field.deprecation(reason.as_deref());
    }
    for arg in &def.arguments {
        field = field.argument(input_value(&arg.node));
    }
    Ok(field)
}

/// Parses the SDL and builds the schema with generic resolvers plus the given root resolvers.
pub fn build(sdl: &str, env: Arc<Env>, roots: &HashMap<&'static str, RootFn>) -> Result<Schema, String> {
    let doc = async_graphql::parser::parse_schema(sdl).map_err(|e| format!("schema.graphql: {e}"))?;
    // Whether each named type is an output object (true) or a leaf / input (false).
    let mut kinds: HashMap<String, bool> = HashMap::new();
    for def in &doc.definitions {
        if let TypeSystemDefinition::Type(t) = def {
            let is_object = matches!(t.node.kind, TypeKind::Object(_) | TypeKind::Interface(_));
            kinds.insert(t.node.name.node.to_string(), is_object);
        }
    }
    let mut builder = Schema::build("Query", Some("Mutation"), Some("Subscription"));
    let mut used = HashSet::new();
    for def in &doc.definitions {
        let TypeSystemDefinition::Type(t) = def else { continue };
        let t = &t.node;
        let name = t.name.node.to_string();
        let description = t.description.as_ref().map(|d| d.node.clone());
        match &t.kind {
            TypeKind::Scalar => {
                let mut s = Scalar::new(name);
                if let Some(d) = description {
                    s = s.description(d);
                }
                builder = builder.register(s);
            }
            TypeKind::Enum(e) => {
                let mut en = Enum::new(name);
                if let Some(d) = description {
                    en = en.description(d);
                }
                for v in &e.values {
                    let mut item = EnumItem::new(v.node.value.node.to_string());
                    if let Some(d) = &v.node.description {
                        item = item.description(d.node.clone());
                    }
                    if let Some(reason) = deprecation(&v.node.directives) {
                        item = item.deprecation(reason.as_deref());
                    }
                    en = en.item(item);
                }
                builder = builder.register(en);
            }
            TypeKind::InputObject(io) => {
                let mut obj = InputObject::new(name);
                if let Some(d) = description {
                    obj = obj.description(d);
                }
                for f in &io.fields {
                    obj = obj.field(input_value(&f.node));
                }
                builder = builder.register(obj);
            }
            TypeKind::Interface(it) => {
                let mut i = Interface::new(name);
                if let Some(d) = description {
                    i = i.description(d);
                }
                for f in &it.fields {
                    let mut field =
                        InterfaceField::new(f.node.name.node.to_string(), type_ref(&f.node.ty.node));
                    if let Some(d) = &f.node.description {
                        field = field.description(d.node.clone());
                    }
                    i = i.field(field);
                }
                builder = builder.register(i);
            }
            TypeKind::Object(ot) if name == "Subscription" => {
                let mut sub = Subscription::new(name.clone());
                if let Some(d) = description {
                    sub = sub.description(d);
                }
                for f in &ot.fields {
                    sub = sub.field(subscription_field(&f.node, &env)?);
                }
                builder = builder.register(sub);
            }
            TypeKind::Object(ot) => {
                let mut obj = Object::new(name.clone());
                if let Some(d) = description {
                    obj = obj.description(d);
                }
                for i in &ot.implements {
                    obj = obj.implement(i.node.to_string());
                }
                for f in &ot.fields {
                    obj = obj.field(object_field(&name, &f.node, &kinds, &env, roots, &mut used)?);
                }
                builder = builder.register(obj);
            }
            TypeKind::Union(_) => return Err(format!("unions are not supported ({name})")),
        }
    }
    let unused: Vec<&&str> = roots.keys().filter(|k| !used.contains(**k)).collect();
    if !unused.is_empty() {
        return Err(format!("resolvers registered for fields not in the SDL: {unused:?}"));
    }
    builder.finish().map_err(|e| e.to_string())
}
