//! A subscription's position: ordering cursors that show their place (a sequence number, or a
//! Relay `arrayconnection:N`), and the cursors delivered lately, so no event is handed out twice.

/// Delivered cursors remembered to recognise an event handed out again (cursors that cannot be
/// ordered are recognised only by these).
pub(super) const RECENT_CURSORS: usize = 4096;

/// The last [`RECENT_CURSORS`] cursors delivered, kept as hashes (no allocation per event)
/// keyed at random per subscription, so a server cannot make two cursors look alike.
#[derive(Default)]
pub(super) struct Recent {
    keys: std::hash::RandomState,
    pub(super) order: std::collections::VecDeque<u64>,
    pub(super) set: std::collections::HashSet<u64, rustc_hash::FxBuildHasher>,
}

impl Recent {
    fn key(&self, cursor: &str) -> u64 {
        use std::hash::BuildHasher as _;
        self.keys.hash_one(cursor)
    }

    pub(super) fn contains(&self, cursor: &str) -> bool {
        self.set.contains(&self.key(cursor))
    }

    pub(super) fn push(&mut self, cursor: &str) {
        let k = self.key(cursor);
        if !self.set.insert(k) {
            return;
        }
        self.order.push_back(k);
        if self.order.len() > RECENT_CURSORS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }
}

/// A cursor's place in its stream when it shows one: a decimal sequence number, or a Relay
/// cursor (`base64("prefix:N")`).
pub(super) fn cursor_position(c: &str) -> Option<(String, u128)> {
    use base64::Engine as _;
    if !c.is_empty() && c.len() <= 38 && c.bytes().all(|b| b.is_ascii_digit()) {
        return c.parse().ok().map(|n| (String::new(), n));
    }
    let raw = base64::engine::general_purpose::STANDARD.decode(c).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (prefix, n) = text.rsplit_once(':')?;
    if n.is_empty() || n.len() > 38 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((prefix.to_owned(), n.parse().ok()?))
}

/// How two cursors of one stream are ordered, when both show their place in it.
pub(super) fn cursor_order(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    if a == b {
        return Some(std::cmp::Ordering::Equal);
    }
    let (pa, na) = cursor_position(a)?;
    let (pb, nb) = cursor_position(b)?;
    (pa == pb).then(|| na.cmp(&nb))
}
