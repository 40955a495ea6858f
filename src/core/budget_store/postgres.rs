//! The PostgreSQL store: one row per token in `secfindings_budget` (made on first use), a
//! transaction per booking that holds the row's lock, by the server's clock.

use tokio_postgres::Client;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::wire::{Answer, Figures, Op, Reply, PATIENCE};
use crate::core::budget_rule::{slot, State, MAX_BLOCK, MAX_KEEP};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS secfindings_budget (
    key text PRIMARY KEY,
    sends double precision[] NOT NULL DEFAULT '{}',
    blocked_until double precision NOT NULL DEFAULT 0,
    keep double precision NOT NULL DEFAULT 0
)";
const NOW: &str = "extract(epoch from clock_timestamp())::float8";

pub(super) struct Connection {
    client: Client,
}

/// A driver's error as a line: the server's own code and message where it sent one (the
/// driver's text is only "db error" then).
fn failed(what: &str) -> impl Fn(tokio_postgres::Error) -> String + '_ {
    move |e| match e.as_db_error() {
        Some(db) => format!("{what}: {} ({})", db.message(), db.code().code()),
        None => {
            // The driver's text names the step ("error performing TLS handshake"); its sources
            // say why ("invalid peer certificate: UnknownIssuer").
            let mut text = format!("{what}: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        }
    }
}

impl Connection {
    /// Connects; over TLS (`tls`, the client's configuration) when the URL's `sslmode` asks for
    /// it, or offers it (`prefer`, the default) and the server takes it.
    pub(super) async fn open(url: &str, tls: &rustls::ClientConfig) -> Result<Self, String> {
        let connector = MakeRustlsConnect::new(tls.clone());
        let (client, connection) = tokio::time::timeout(PATIENCE, tokio_postgres::connect(url, connector))
            .await
            .map_err(|_| format!("no connection within {PATIENCE:?}"))?
            .map_err(failed("cannot connect"))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log::debug!("request budget: the PostgreSQL connection ended: {e}");
            }
        });
        tokio::time::timeout(PATIENCE, Self::prepare(&client))
            .await
            .map_err(|_| format!("no answer within {PATIENCE:?}"))??;
        Ok(Self { client })
    }

    /// The session's limits (a booking that waits for a row's lock gives up on the server too,
    /// not only here), and the table, made only when it is missing: a role granted the table
    /// but not the right to make one in the schema uses it.
    async fn prepare(client: &Client) -> Result<(), String> {
        client
            .batch_execute("SET lock_timeout = 1500; SET statement_timeout = 1900")
            .await
            .map_err(failed("cannot set the session's time limits"))?;
        let found = client
            .query_one("SELECT to_regclass('secfindings_budget') IS NOT NULL", &[])
            .await
            .map_err(failed("cannot look for the table secfindings_budget"))?;
        if found.try_get::<_, bool>(0).unwrap_or(false) {
            return Ok(());
        }
        if client.batch_execute(TABLE).await.is_err() {
            // Two clients making the table at once: one of them is told the type exists; the
            // table is there for the second try.
            client.batch_execute(TABLE).await.map_err(failed("cannot make the table secfindings_budget"))?;
        }
        Ok(())
    }

    pub(super) async fn run(&mut self, key: &str, op: &Op) -> Result<Reply, String> {
        tokio::time::timeout(PATIENCE, self.run_now(key, op))
            .await
            .map_err(|_| format!("no answer within {PATIENCE:?}"))?
    }

    async fn run_now(&mut self, key: &str, op: &Op) -> Result<Reply, String> {
        match op {
            Op::Block(wait) => {
                let wait = wait.clamp(0.0, MAX_BLOCK);
                let sql = format!(
                    "INSERT INTO secfindings_budget AS b (key, blocked_until) VALUES ($1, {NOW} + $2) \
                     ON CONFLICT (key) DO UPDATE SET blocked_until = CASE \
                     WHEN b.blocked_until = 'NaN' OR b.blocked_until < EXCLUDED.blocked_until \
                     OR b.blocked_until > {NOW} + {MAX_BLOCK} THEN EXCLUDED.blocked_until \
                     ELSE b.blocked_until END"
                );
                self.client.execute(&sql, &[&key, &wait]).await.map_err(failed("the wait was not kept"))?;
                Ok(Reply::Blocked)
            }
            Op::Book { limit: None, .. } | Op::View(_) => {
                let sql = format!(
                    "SELECT sends, blocked_until, keep, {NOW} FROM secfindings_budget WHERE key = $1"
                );
                let row = self.client.query_opt(&sql, &[&key]).await.map_err(failed("cannot read"))?;
                let now = match &row {
                    Some(r) => r.try_get::<_, f64>(3).map_err(failed("cannot read"))?,
                    None => self.now().await?,
                };
                let state = read(row.as_ref())?;
                Ok(figures_or_wait(op, state, now))
            }
            Op::Book { limit: Some(limit), max_wait } => {
                let tx = self.client.transaction().await.map_err(failed("cannot book"))?;
                tx.execute(
                    "INSERT INTO secfindings_budget (key) VALUES ($1) ON CONFLICT (key) DO NOTHING",
                    &[&key],
                )
                .await
                .map_err(failed("cannot book"))?;
                let sql = format!(
                    "SELECT sends, blocked_until, keep, {NOW} FROM secfindings_budget WHERE key = $1 FOR UPDATE"
                );
                let row = tx.query_one(&sql, &[&key]).await.map_err(failed("cannot book"))?;
                let now: f64 = row.try_get(3).map_err(failed("cannot book"))?;
                let mut state = read(Some(&row))?;
                state.sanitize(now, limit.1);
                let at = slot(&state, now, Some(*limit));
                let wait = (at - now).max(0.0);
                if wait > *max_wait {
                    // Nothing written: the transaction is rolled back when dropped.
                    return Ok(Reply::Answer(Answer::TooLong(wait)));
                }
                state.sends.push(at);
                tx.execute(
                    "UPDATE secfindings_budget SET sends = $2, blocked_until = $3, keep = $4 WHERE key = $1",
                    &[&key, &state.sends, &state.blocked_until, &state.keep],
                )
                .await
                .map_err(failed("cannot book"))?;
                tx.commit().await.map_err(failed("cannot book"))?;
                Ok(Reply::Answer(Answer::Booked(wait)))
            }
        }
    }

    async fn now(&self) -> Result<f64, String> {
        let row =
            self.client.query_one(&format!("SELECT {NOW}"), &[]).await.map_err(failed("cannot read"))?;
        row.try_get(0).map_err(failed("cannot read"))
    }
}

/// The row as a budget state (empty when there is none).
fn read(row: Option<&tokio_postgres::Row>) -> Result<State, String> {
    let Some(row) = row else { return Ok(State::default()) };
    let sends: Vec<Option<f64>> = row.try_get(0).map_err(failed("cannot read"))?;
    Ok(State {
        v: 1,
        sends: sends.into_iter().flatten().collect(),
        blocked_until: row.try_get(1).map_err(failed("cannot read"))?,
        keep: row.try_get(2).map_err(failed("cannot read"))?,
        written: 0.0,
    })
}

/// A server's wait (a booking without a limit), or the figures of a window.
fn figures_or_wait(op: &Op, mut state: State, now: f64) -> Reply {
    match op {
        Op::View(window) => {
            state.sanitize(now, window.min(MAX_KEEP));
            let in_window: Vec<f64> = state.sends.iter().copied().filter(|t| *t > now - window).collect();
            let used: Vec<f64> = in_window.iter().copied().filter(|t| *t <= now).collect();
            Reply::Figures(Figures {
                now,
                blocked_until: state.blocked_until,
                in_window: u32::try_from(in_window.len()).unwrap_or(u32::MAX),
                used: u32::try_from(used.len()).unwrap_or(u32::MAX),
                first_used: used.first().copied(),
            })
        }
        _ => {
            state.sanitize(now, 0.0);
            Reply::Answer(Answer::Unbooked((state.blocked_until - now).max(0.0)))
        }
    }
}
