//! One request budget per API token, shared by every client, thread and process of the user on
//! this machine.
//!
//! The service limits requests per token (and per customer, and globally), answering 429 with a
//! `Retry-After` that can be an hour. Four processes each pacing themselves at the token's limit
//! overshoot together; so the sends of every process are booked in one small file per token,
//! under a file lock:
//!
//! - `<cache>/secfindings/budget/<key>.json`, where `key` is a SHA-256 of the API URL and the
//!   credential (never the credential itself), holds `{"v": 1, "sends": [...], "blocked_until": t}`:
//!   the unix times of the sends booked in the longest window any client of the token paces by
//!   (`keep`), and the end of the longest wait a server asked for (`Retry-After`, shared up to
//!   [`MAX_BLOCK`]). It is replaced whole (write, then rename), so a reader
//!   never sees half of it.
//! - `<key>.lock` is the lock, taken with `flock` (std's `File::lock`): the kernel drops it when
//!   its holder dies, so a crashed process cannot hold it. A holder that hangs is waited for at
//!   most [`LOCK_PATIENCE`] (awaiting between tries: no thread is blocked); then the request goes
//!   on unbooked (with one warning), as it would without a shared budget, and the file is left
//!   alone for [`STUCK_COOLDOWN`].
//! - A corrupt, oversized or hostile file is read as empty (one warning) and replaced: times that
//!   are not numbers, or lie further ahead than a booking can, are dropped. The folder is used only
//!   when it is private (not writable by group or others); files are created `0600`.
//!
//! The pacing rule is the one of `limit.rs` over the shared log: a request goes when fewer than
//! `requests` sends were booked in the window before it, else when the oldest of the last
//! `requests` is a window old; and never before `blocked_until`. A wait longer than
//! `max_retry_wait` is not taken: the call fails with `RateLimit` and its `retry_after`.
//!
//! The rule (`slot`) is pure and unit-tested without files or clocks.
//!
//! Past one machine, `budget="redis://..."` or `"postgresql://..."` keeps the same log in a
//! store (`budget_store`): every booking and every server wait goes there first, and this file
//! is the fallback while the store cannot be used.

use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::budget_rule::MAX_KEEP;
pub(crate) use super::budget_rule::{slot, State, MAX_BLOCK, MAX_SENDS};
use super::budget_store::{Answer, Outcome, Shared};
use sha2::{Digest, Sha256};

/// How long a request waits for another process's lock before it goes on unbooked.
pub(crate) const LOCK_PATIENCE: Duration = Duration::from_secs(2);
/// After the lock stayed held that long, the file is left alone this long (the client paces
/// itself), so a hung holder costs one wait, not one per request.
pub(crate) const STUCK_COOLDOWN: Duration = Duration::from_secs(30);
/// The largest state file read (bytes); a larger one is treated as corrupt.
const MAX_FILE: u64 = 1 << 20;

/// What [`Budget::view`] shows (`client.budget()`).
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The limit this client paces by: (requests, window seconds); `None` without `rate_limit=`.
    pub limit: Option<(u32, f64)>,
    /// Sends booked in this client's window before now, by every process on this token.
    pub used: u32,
    /// How many more may go now (`None` without a limit).
    pub remaining: Option<u32>,
    /// When the oldest send of the window leaves it (unix seconds), if any was booked.
    pub resets_at: Option<f64>,
    /// Until when a server asked every client of this token to wait (unix seconds), if it did.
    pub blocked_until: Option<f64>,
    /// The state file, when the budget is shared through it (its name is a hash, never the token).
    pub path: Option<PathBuf>,
    /// Where the figures come from: `"redis"`, `"postgresql"`, `"file"`, or `None` (not shared).
    pub store: Option<&'static str>,
    /// The store's URL (without its password) or the file's path.
    pub location: Option<String>,
    /// Why the store named by `budget=` could not be read (the figures are then the file's).
    pub error: Option<String>,
}

/// What the budget says of a request about to be sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Booking {
    /// Booked in the shared log: go after this wait (zero: now).
    Booked(Duration),
    /// Not booked (no limit to share, or the file could not be used): wait this long for what a
    /// server asked, then the client's own pacing applies.
    Unbooked(Duration),
    /// The wait would be longer than `max_retry_wait`: this many seconds.
    TooLong(f64),
    /// The store of `budget=` cannot be used and `budget_required` was set: why.
    Unavailable(String),
}

/// One try at the lock.
enum Locked<T> {
    Done(T),
    Busy,
    Unusable,
}

/// One token's budget. Cheap when there is nothing to share: without `rate_limit=` a request only
/// looks at the file's modification time (a `stat`), and reads it when another process changed it.
/// Waiting for the lock never blocks a thread: the caller awaits between tries.
#[derive(Debug)]
pub struct Budget {
    dir: Option<PathBuf>,
    key: String,
    /// What the client asked for (shown by `view`).
    asked: Option<(u32, f64)>,
    /// What it books by (`None` when there is no limit, or one too large to share).
    limit: Option<(u32, f64)>,
    max_wait: Duration,
    /// (modification time, blocked_until) of the state last read without a limit.
    seen: Mutex<Option<(SystemTime, f64)>>,
    /// Until when the file is left alone after its lock stayed held.
    stuck_until: Mutex<Option<tokio::time::Instant>>,
    warned: AtomicBool,
    /// Whether a server's wait is written for the other processes (see `Settings`).
    share_waits: bool,
    /// The store past one machine (`budget="redis://..."`), with this file budget as fallback.
    shared: Option<Shared>,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The file name's key: a hash of where the requests go and of the credential.
pub(crate) fn key(base_url: &str, credential: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(b"secfindings budget v1\0");
    h.update(base_url.as_bytes());
    h.update(b"\0");
    h.update(credential);
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The default folder: `$SECFINDINGS_BUDGET_DIR`, else `$XDG_CACHE_HOME/secfindings/budget`,
/// else `~/.cache/secfindings/budget`.
pub(crate) fn default_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(d) = env("SECFINDINGS_BUDGET_DIR").filter(|d| !d.trim().is_empty()) {
        return Some(PathBuf::from(d));
    }
    let base = env("XDG_CACHE_HOME")
        .filter(|d| !d.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").filter(|d| !d.trim().is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("secfindings").join("budget"))
}

impl Budget {
    /// `dir` `None`: no shared budget (the client paces itself only by its own `rate_limit`).
    pub fn new(
        dir: Option<PathBuf>,
        key: String,
        limit: Option<(u32, Duration)>,
        max_wait: Duration,
    ) -> Self {
        let asked = limit.map(|(n, per)| (n, per.as_secs_f64()));
        let limit =
            asked.filter(|(n, w)| usize::try_from(*n).is_ok_and(|n| n <= MAX_SENDS) && *w <= MAX_KEEP);
        Self {
            dir,
            key,
            asked,
            limit,
            max_wait,
            seen: Mutex::new(None),
            stuck_until: Mutex::new(None),
            warned: AtomicBool::new(false),
            share_waits: true,
            shared: None,
        }
    }

    /// Keeps the budget in a store past one machine (see `budget_store`); this file budget is
    /// what the client falls back to when the store cannot be used.
    #[must_use]
    pub(crate) fn with_store(mut self, shared: Option<Shared>) -> Self {
        self.shared = shared;
        self
    }

    /// `false`: a server's `Retry-After` holds this client only, it is not written to the file.
    #[must_use]
    pub fn sharing_waits(mut self, share: bool) -> Self {
        self.share_waits = share;
        self
    }

    fn state_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{}.json", self.key)))
    }

    fn warn(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            log::warn!("request budget: {what}; this client paces itself alone");
        }
    }

    fn window(&self) -> f64 {
        self.limit.map_or(0.0, |(_, w)| w)
    }

    fn stuck(&self) -> bool {
        self.stuck_until.lock().ok().and_then(|g| *g).is_some_and(|until| tokio::time::Instant::now() < until)
    }

    /// Books a send now, or says how long to wait first (see [`Booking`]). Waits for another
    /// process's lock at most [`LOCK_PATIENCE`], awaiting between tries.
    pub async fn reserve(&self) -> Booking {
        if let Some(shared) = &self.shared {
            let max_wait = self.max_wait.as_secs_f64();
            // A wait longer than max_retry_wait is refused, not slept, whoever asked for it (a
            // server's Retry-After kept in the store, or a hostile store's answer).
            let go = |w: f64| Duration::try_from_secs_f64(w).unwrap_or(Duration::MAX);
            match shared.book(self.limit, max_wait).await {
                Outcome::Done(Answer::Booked(w) | Answer::Unbooked(w) | Answer::TooLong(w))
                    if w > max_wait =>
                {
                    return Booking::TooLong(w)
                }
                Outcome::Done(Answer::Booked(w)) => return Booking::Booked(go(w)),
                Outcome::Done(Answer::Unbooked(w)) => return Booking::Unbooked(go(w)),
                Outcome::Done(Answer::TooLong(w)) => return Booking::TooLong(w),
                Outcome::Failed(why) => return Booking::Unavailable(why),
                Outcome::Fallback => {}
            }
        }
        let Some(path) = self.state_path() else { return Booking::Unbooked(Duration::ZERO) };
        if self.limit.is_none() || self.stuck() {
            return self.blocked_only(&path);
        }
        let booked = self
            .with_lock(|state, now| {
                let at = slot(state, now, self.limit);
                let wait = (at - now).max(0.0);
                if wait > self.max_wait.as_secs_f64() {
                    return (false, Booking::TooLong(wait));
                }
                state.sends.push(at);
                (true, Booking::Booked(Duration::from_secs_f64(wait)))
            })
            .await;
        match booked {
            Some(b) => b,
            None => self.blocked_only(&path),
        }
    }

    /// Without booking: only a server's wait, read when the file changed since last time.
    fn blocked_only(&self, path: &Path) -> Booking {
        let none = Booking::Unbooked(Duration::ZERO);
        if self.dir.as_deref().is_none_or(|d| check_dir(d, false).is_err()) {
            return none;
        }
        let Ok(meta) = fs::symlink_metadata(path) else { return none };
        let Ok(modified) = meta.modified() else { return none };
        let now = unix_now();
        let cached = self.seen.lock().ok().and_then(|g| *g).filter(|(m, _)| *m == modified).map(|(_, b)| b);
        let blocked = match cached {
            Some(b) => b,
            None => {
                let mut state = self.read(path).unwrap_or_default();
                state.sanitize(now, 0.0);
                if let Ok(mut g) = self.seen.lock() {
                    *g = Some((modified, state.blocked_until));
                }
                state.blocked_until
            }
        };
        let wait = (blocked - now).max(0.0);
        if wait > self.max_wait.as_secs_f64() {
            Booking::TooLong(wait)
        } else {
            Booking::Unbooked(Duration::from_secs_f64(wait))
        }
    }

    /// A server answered 429 with `Retry-After: wait`: every client of this token waits for it
    /// (up to [`MAX_BLOCK`]).
    pub async fn blocked_for(&self, wait: Duration) {
        if let Some(shared) = &self.shared {
            if let Outcome::Done(()) | Outcome::Failed(_) = shared.block(wait.as_secs_f64()).await {
                return;
            }
        }
        if self.dir.is_none() || !self.share_waits || self.stuck() {
            return;
        }
        let _ = self
            .with_lock(|state, now| {
                let until = now + wait.as_secs_f64().min(MAX_BLOCK);
                state.blocked_until = state.blocked_until.max(until);
                (true, ())
            })
            .await;
    }

    /// Where the budget is kept, for messages: the store's URL (without its password), else the
    /// file.
    pub(crate) fn kept_in(&self) -> String {
        match (&self.shared, self.state_path()) {
            (Some(s), _) => s.shown().to_string(),
            (None, Some(p)) => p.display().to_string(),
            (None, None) => "the budget file".to_string(),
        }
    }

    /// What `client.budget()` shows: the store's figures (its times moved onto this machine's
    /// clock), else the file's.
    pub async fn view_now(&self) -> View {
        let Some(shared) = &self.shared else { return self.view() };
        let window = self.asked.map_or(0.0, |(_, w)| w);
        let error = match shared.figures(window).await {
            Outcome::Done(f) => {
                let ahead = unix_now() - f.now;
                return View {
                    limit: self.asked,
                    used: f.used,
                    remaining: self.asked.map(|(n, _)| n.saturating_sub(f.in_window)),
                    // What a store says is believed only within what a booking can be.
                    resets_at: self
                        .asked
                        .and(f.first_used)
                        .filter(|t| *t > f.now - window && *t <= f.now)
                        .map(|t| t + window + ahead),
                    blocked_until: (f.blocked_until > f.now && f.blocked_until <= f.now + MAX_BLOCK)
                        .then_some(f.blocked_until + ahead),
                    path: None,
                    store: Some(shared.kind().name()),
                    location: Some(shared.shown().to_string()),
                    error: None,
                };
            }
            Outcome::Failed(why) => why,
            Outcome::Fallback => match shared.last_failure() {
                Some(why) => format!("the store at {} cannot be used ({why})", shared.shown()),
                None => format!("the store at {} cannot be used", shared.shown()),
            },
        };
        View { error: Some(error), ..self.view() }
    }

    /// What `client.budget()` shows of the file budget.
    pub fn view(&self) -> View {
        let now = unix_now();
        // A folder not made yet is usable (the first booking makes it); a symlink or a folder
        // others can write is not.
        let usable = self
            .dir
            .as_deref()
            .is_some_and(|d| fs::symlink_metadata(d).is_err() || check_dir(d, false).is_ok());
        let path = self.state_path().filter(|_| usable);
        let mut state = path.as_deref().and_then(|p| self.read(p)).unwrap_or_default();
        let window = self.asked.map_or(0.0, |(_, w)| w);
        state.sanitize(now, window.min(MAX_KEEP));
        let in_window: Vec<f64> = state.sends.iter().copied().filter(|t| *t > now - window).collect();
        let used: Vec<f64> = in_window.iter().copied().filter(|t| *t <= now).collect();
        View {
            limit: self.asked,
            used: u32::try_from(used.len()).unwrap_or(u32::MAX),
            remaining: self
                .asked
                .map(|(n, _)| n.saturating_sub(u32::try_from(in_window.len()).unwrap_or(u32::MAX))),
            resets_at: self.asked.and_then(|(_, w)| used.first().map(|t| t + w)),
            blocked_until: (state.blocked_until > now).then_some(state.blocked_until),
            store: path.is_some().then_some("file"),
            location: path.as_ref().map(|p| p.display().to_string()),
            path,
            error: None,
        }
    }

    /// Reads the state file (`None` when missing); a corrupt or oversized one reads as empty.
    fn read(&self, path: &Path) -> Option<State> {
        let file = match open_regular(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                // Not a regular file of this user (a FIFO would block every reader forever, a
                // link could point anywhere): it is discarded, and the budget starts afresh.
                self.warn(&format!("{} is not usable ({e}); it was removed", path.display()));
                let _ = fs::remove_file(path);
                return Some(State::default());
            }
        };
        let mut text = Vec::new();
        if file.take(MAX_FILE + 1).read_to_end(&mut text).is_err() || text.len() as u64 > MAX_FILE {
            self.warn(&format!("{} is unreadable or too large; starting afresh", path.display()));
            return Some(State::default());
        }
        match serde_json::from_slice::<State>(&text) {
            Ok(s) => Some(s),
            Err(_) => {
                self.warn(&format!("{} is not a budget file; starting afresh", path.display()));
                Some(State::default())
            }
        }
    }

    /// Runs `f` on the state under the lock, trying again (awaiting a millisecond between tries)
    /// while another process holds it, for at most [`LOCK_PATIENCE`]; then the file is left
    /// alone for [`STUCK_COOLDOWN`]. `None` when the lock or the folder could not be had.
    async fn with_lock<T>(&self, f: impl FnOnce(&mut State, f64) -> (bool, T)) -> Option<T> {
        let started = tokio::time::Instant::now();
        let mut f = Some(f);
        loop {
            let tried = self.try_locked(|state, now| match f.take() {
                Some(g) => {
                    let (changed, out) = g(state, now);
                    (changed, Some(out))
                }
                None => (false, None),
            });
            match tried {
                Locked::Done(out) => return out,
                Locked::Unusable => return None,
                Locked::Busy if started.elapsed() < LOCK_PATIENCE => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Locked::Busy => {
                    if let Ok(mut g) = self.stuck_until.lock() {
                        *g = tokio::time::Instant::now().checked_add(STUCK_COOLDOWN);
                    }
                    self.warn(&format!(
                        "another process held the lock of {}.json for {LOCK_PATIENCE:?}",
                        self.key
                    ));
                    return None;
                }
            }
        }
    }

    /// One try: runs `f` on the state under the lock, writing it back when `f` says it changed.
    fn try_locked<T>(&self, f: impl FnOnce(&mut State, f64) -> (bool, T)) -> Locked<T> {
        let Some(dir) = self.dir.as_deref() else { return Locked::Unusable };
        if let Err(why) = check_dir(dir, true) {
            self.warn(&why);
            return Locked::Unusable;
        }
        let lock_path = dir.join(format!("{}.lock", self.key));
        let lock = match open_private(&lock_path, false).or_else(|e| replaced(&lock_path, e)) {
            Ok(f) => f,
            Err(e) => {
                self.warn(&format!("cannot open {}: {e}", lock_path.display()));
                return Locked::Unusable;
            }
        };
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Locked::Busy,
            Err(fs::TryLockError::Error(e)) => {
                self.warn(&format!("cannot lock {}: {e}", lock_path.display()));
                return Locked::Unusable;
            }
        }
        let path = dir.join(format!("{}.json", self.key));
        let now = unix_now();
        let mut state = self.read(&path).unwrap_or_default();
        state.sanitize(now, self.window());
        let (changed, out) = f(&mut state, now);
        if changed {
            state.written = now;
            if let Err(e) = write_atomic(dir, &path, &state) {
                self.warn(&format!("cannot write {}: {e}", path.display()));
            }
        }
        let _ = lock.unlock();
        Locked::Done(out)
    }
}

/// The folder (created `0700` when `create`) is a real folder of this user, not a symlink, and
/// not writable by group or others; every folder above it belongs to this user or to root and is
/// not writable by others unless it is sticky (as `/tmp` is), so nobody else can swap it.
fn check_dir(dir: &Path, create: bool) -> Result<(), String> {
    if create {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt as _;
            builder.mode(0o700);
        }
        if let Err(e) = builder.create(dir) {
            return Err(format!("cannot create {}: {e}", dir.display()));
        }
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a folder (a symlink is not followed)", dir.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        if meta.uid() != owner::me() {
            return Err(format!("{} belongs to another user (set SECFINDINGS_BUDGET_DIR)", dir.display()));
        }
        if meta.permissions().mode() & 0o022 != 0 {
            return Err(format!(
                "{} is writable by others (chmod 700 it, or set SECFINDINGS_BUDGET_DIR)",
                dir.display()
            ));
        }
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        for parent in absolute.ancestors().skip(1) {
            let Ok(m) = fs::metadata(parent) else { continue };
            let mode = m.permissions().mode();
            let sticky = mode & 0o1000 != 0;
            if (m.uid() != owner::me() && m.uid() != 0) || (mode & 0o002 != 0 && !sticky) {
                return Err(format!(
                    "{} lies in {}, which others can change (set SECFINDINGS_BUDGET_DIR)",
                    dir.display(),
                    parent.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
mod owner {
    /// This process's effective user id.
    pub(super) fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }
}

/// Opens `path` for reading only if it is a regular file of this user: links are not followed
/// and a FIFO does not block the open (it is then refused by its type).
fn open_regular(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    no_follow(&mut options);
    let file = options.open(path)?;
    check_regular(&file)?;
    Ok(file)
}

fn check_regular(file: &File) -> std::io::Result<()> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if meta.uid() != owner::me() {
            return Err(std::io::Error::other("owned by another user"));
        }
    }
    if meta.len() > MAX_FILE {
        return Err(std::io::Error::other("too large"));
    }
    Ok(())
}

fn no_follow(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        options.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// A lock file that is not a regular file (a FIFO, a link) is removed and made afresh: the folder
/// is this user's (checked before), so only this user could have put it there.
fn replaced(path: &Path, error: std::io::Error) -> std::io::Result<File> {
    match fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => {
            fs::remove_file(path)?;
            open_private(path, false)
        }
        _ => Err(error),
    }
}

fn open_private(path: &Path, truncate: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    no_follow(&mut options);
    let file = options.open(path)?;
    check_regular(&file)?;
    Ok(file)
}

fn write_atomic(dir: &Path, path: &Path, state: &State) -> std::io::Result<()> {
    let text = serde_json::to_vec(state).map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("budget"),
        std::process::id()
    ));
    {
        let mut f = open_private(&tmp, true)?;
        f.write_all(&text)?;
    }
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests;
