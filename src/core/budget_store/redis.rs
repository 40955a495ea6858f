//! The Redis store: one Lua script per booking (`book.lua`), by the Redis server's clock.

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script, TlsCertificates};

use super::wire::{number, Answer, Figures, Op, Reply, PATIENCE};

/// The script, loaded once per connection (`EVALSHA`, with `EVAL` when the server lost it).
static SCRIPT: &str = include_str!("book.lua");

pub(super) struct Connection {
    con: MultiplexedConnection,
    script: Script,
}

/// A unique name for one send in the sorted set: the process, a counter and a random part.
fn send_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}-{:016x}", std::process::id(), fastrand::u64(..))
}

impl Connection {
    /// Connects; `rediss://` over TLS, checked by `ca_bundle`'s roots, else the system's.
    pub(super) async fn open(url: &str, ca_bundle: Option<&std::path::Path>) -> Result<Self, String> {
        let client = if url.get(..9).is_some_and(|s| s.eq_ignore_ascii_case("rediss://")) {
            let root_cert = match ca_bundle {
                Some(path) => Some(
                    std::fs::read(path)
                        .map_err(|e| format!("cannot read ca_bundle {}: {e}", path.display()))?,
                ),
                None => None,
            };
            Client::build_with_tls(url, TlsCertificates { client_tls: None, root_cert })
        } else {
            Client::open(url)
        }
        .map_err(|e| format!("the Redis URL is not usable: {e}"))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(PATIENCE))
            .set_response_timeout(Some(PATIENCE));
        let con =
            tokio::time::timeout(PATIENCE, client.get_multiplexed_async_connection_with_config(&config))
                .await
                .map_err(|_| format!("no connection within {PATIENCE:?}"))?
                .map_err(|e| format!("cannot connect: {e}"))?;
        Ok(Self { con, script: Script::new(SCRIPT) })
    }

    pub(super) async fn run(&mut self, key: &str, op: &Op) -> Result<Reply, String> {
        // One hash tag, so that both keys live on one node of a Redis Cluster.
        let sends = format!("secfindings:budget:v1:{{{key}}}:sends");
        let meta = format!("secfindings:budget:v1:{{{key}}}:meta");
        let mut call = self.script.key(sends);
        call.key(meta);
        match op {
            Op::Book { limit, max_wait } => {
                let (n, w) = limit.unwrap_or((0, 0.0));
                call.arg("book").arg(n).arg(w).arg(*max_wait).arg(send_name());
            }
            Op::Block(wait) => {
                call.arg("block").arg(0).arg(0.0).arg(*wait).arg("");
            }
            Op::View(window) => {
                call.arg("view").arg(0).arg(*window).arg(0.0).arg("");
            }
        }
        let answer: Vec<String> = tokio::time::timeout(PATIENCE, call.invoke_async(&mut self.con))
            .await
            .map_err(|_| format!("no answer within {PATIENCE:?}"))?
            .map_err(|e| format!("the booking failed: {e}"))?;
        reply(op, &answer)
    }
}

/// The script's answer, checked.
fn reply(op: &Op, answer: &[String]) -> Result<Reply, String> {
    let at = |i: usize| {
        answer.get(i).map(String::as_str).ok_or_else(|| "a short answer from the script".to_string())
    };
    match op {
        Op::Book { .. } => {
            let wait = number(at(1)?)?.max(0.0);
            match at(0)? {
                "booked" => Ok(Reply::Answer(Answer::Booked(wait))),
                "unbooked" => Ok(Reply::Answer(Answer::Unbooked(wait))),
                "too_long" => Ok(Reply::Answer(Answer::TooLong(wait))),
                other => Err(format!("an unknown answer from the script: {:.40}", other)),
            }
        }
        Op::Block(_) => Ok(Reply::Blocked),
        Op::View(_) => {
            let count = |i: usize| -> Result<u32, String> {
                at(i)?.trim().parse::<u32>().map_err(|_| "a non-count in the store's answer".to_string())
            };
            let first = at(4)?;
            Ok(Reply::Figures(Figures {
                now: number(at(0)?)?,
                blocked_until: number(at(1)?)?,
                in_window: count(2)?,
                used: count(3)?,
                first_used: if first.is_empty() { None } else { Some(number(first)?) },
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_answers_are_checked() {
        let book = Op::Book { limit: Some((1, 1.0)), max_wait: 5.0 };
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
        assert!(
            matches!(reply(&book, &s(&["booked", "0.5"])), Ok(Reply::Answer(Answer::Booked(w))) if w == 0.5)
        );
        assert!(matches!(reply(&book, &s(&["too_long", "9"])), Ok(Reply::Answer(Answer::TooLong(_)))));
        assert!(reply(&book, &s(&["booked"])).is_err());
        assert!(reply(&book, &s(&["what", "1"])).is_err());
        assert!(reply(&book, &s(&["booked", "nan"])).is_err());
        let view = Op::View(60.0);
        assert!(matches!(
            reply(&view, &s(&["100.0", "0", "3", "2", "95.5"])),
            Ok(Reply::Figures(Figures { in_window: 3, used: 2, first_used: Some(f), .. })) if f == 95.5
        ));
        assert!(reply(&view, &s(&["100.0", "0", "-1", "2", ""])).is_err());
        assert!(send_name() != send_name());
    }
}
