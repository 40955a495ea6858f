//! The floor: the benchmark's requests from Rust alone, the limit no Python client can beat.
//!
//! Usage: `floor <workload> <base_url> <count> <param> <repeats>` with the bearer JWT in
//! `FLOOR_JWT` and the GraphQL query text in `FLOOR_QUERY`.
//!
//! - `latency`: `count` sequential calls with `{"id": 1 + (i * 7919) % param}`;
//! - `paging`: walk the connection `findings_view` with `first = param` until `hasNextPage` is
//!   false or `count` nodes were seen, passing `after = endCursor`;
//! - `concurrency`: `count` calls like `latency`, `FLOOR_INFLIGHT` (default 64) in flight.
//!
//! Every response is parsed into a `serde_json::Value` and checked for `errors` (the work any
//! client must do). Prints one JSON object: `{"workload", "elapsed_s": [per repeat], "calls",
//! "items"}`. Only loopback URLs are accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Ctx {
    http: reqwest::Client,
    url: String,
    auth: String,
    query: String,
}

impl Ctx {
    async fn call(&self, variables: Value) -> Res<Value> {
        let body = json!({"query": self.query, "variables": variables});
        let resp = self
            .http
            .post(&self.url)
            .header("Authorization", &self.auth)
            .json(&body)
            .send()
            .await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if !status.is_success() {
            return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)).into());
        }
        let mut v: Value = serde_json::from_slice(&bytes)?;
        if let Some(errors) = v.get("errors") {
            return Err(format!("GraphQL errors: {errors}").into());
        }
        Ok(v["data"].take())
    }
}

fn id_of(i: usize, n: usize) -> usize {
    1 + (i * 7919) % n.max(1)
}

async fn latency(ctx: &Ctx, count: usize, n: usize) -> Res<usize> {
    for i in 0..count {
        let data = ctx.call(json!({"id": id_of(i, n)})).await?;
        if data["finding"].is_null() {
            return Err(format!("finding {} is null", id_of(i, n)).into());
        }
    }
    Ok(count)
}

async fn paging(ctx: &Ctx, limit: usize, page_size: usize) -> Res<(usize, usize)> {
    let (mut items, mut calls) = (0usize, 0usize);
    let mut after = Value::Null;
    while items < limit {
        let mut data = ctx.call(json!({"first": page_size, "after": after})).await?;
        calls += 1;
        let conn = data["findings_view"].take();
        let edges = conn["edges"].as_array().ok_or("no edges")?;
        items += edges.iter().filter(|e| e["node"].is_object()).count();
        let info = &conn["pageInfo"];
        if info["hasNextPage"] != Value::Bool(true) || edges.is_empty() {
            break;
        }
        let next = info["endCursor"].clone();
        if next == after {
            return Err("repeated cursor".into());
        }
        after = next;
    }
    Ok((calls, items))
}

async fn concurrency(ctx: Arc<Ctx>, count: usize, inflight: usize, n: usize) -> Res<usize> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..inflight.max(1) {
        let (ctx, next) = (ctx.clone(), next.clone());
        set.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<(), Box<dyn std::error::Error + Send + Sync>>(());
                }
                ctx.call(json!({"id": id_of(i, n)})).await?;
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(count)
}

fn main() -> Res<()> {
    // The best runtime for each shape: one thread for sequential calls (no cross-thread wake-ups),
    // a worker per core for many calls in flight.
    let concurrent = std::env::args().nth(1).as_deref() == Some("concurrency");
    let rt = if concurrent {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    };
    rt.block_on(run())
}

async fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        return Err("usage: floor <latency|paging|concurrency> <base_url> <count> <param> <repeats>".into());
    }
    let (workload, url) = (args[1].as_str(), args[2].clone());
    let count: usize = args[3].parse()?;
    let param: usize = args[4].parse()?;
    let repeats: usize = args[5].parse()?;
    if !(url.starts_with("http://127.0.0.1:") || url.starts_with("http://localhost:")) {
        return Err("loopback URLs only".into());
    }
    let jwt = std::env::var("FLOOR_JWT")?;
    let query = std::env::var("FLOOR_QUERY")?;
    let inflight: usize = std::env::var("FLOOR_INFLIGHT").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(256)
        .build()?;
    let ctx = Arc::new(Ctx { http, url, auth: format!("Bearer {jwt}"), query });
    // warm-up: one connection opened, server caches touched
    match workload {
        "paging" => drop(paging(&ctx, param, param).await?),
        _ => drop(latency(&ctx, 1, param).await?),
    }
    let (mut elapsed, mut calls, mut items) = (Vec::new(), 0usize, 0usize);
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        (calls, items) = match workload {
            "latency" => {
                let c = latency(&ctx, count, param).await?;
                (c, c)
            }
            "paging" => paging(&ctx, count, param).await?,
            "concurrency" => {
                let c = concurrency(ctx.clone(), count, inflight, param).await?;
                (c, c)
            }
            other => return Err(format!("unknown workload {other}").into()),
        };
        elapsed.push(t.elapsed().as_secs_f64());
    }
    println!("{}", json!({"workload": workload, "elapsed_s": elapsed, "calls": calls, "items": items}));
    Ok(())
}
