//! The replay memory: each accepted (node, nonce) is remembered until it expires (twice the
//! time window after it was seen: a timestamp is acceptable for at most that long), and at
//! most `capacity` are remembered at once — a signed call that would need one more is
//! refused rather than forgetting a nonce that could still be replayed.

use std::collections::{HashSet, VecDeque};

use crate::Why;

#[derive(Debug)]
pub struct NonceMemory {
    capacity: usize,
    seen: HashSet<String>,
    /// (expiry, key) in insertion order; expiries grow with insertion time.
    order: VecDeque<(i64, String)>,
}

impl NonceMemory {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// How many nonces are remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Records `nonce` of `node` at `now` for `ttl` seconds; refuses one already seen, or
    /// any when full.
    pub(crate) fn remember(
        &mut self,
        node: &str,
        nonce: &str,
        now: i64,
        ttl: i64,
    ) -> Result<(), Why> {
        while let Some((expiry, _)) = self.order.front() {
            if *expiry > now {
                break;
            }
            if let Some((_, key)) = self.order.pop_front() {
                self.seen.remove(&key);
            }
        }
        let key = format!("{node}\n{nonce}");
        if self.seen.contains(&key) {
            return Err(Why::Replay);
        }
        if self.seen.len() >= self.capacity {
            return Err(Why::Full);
        }
        let expiry = now.saturating_add(ttl);
        // A clock that stepped back must not put an earlier expiry behind a later one.
        let expiry = self
            .order
            .back()
            .map_or(expiry, |(last, _)| expiry.max(*last));
        self.seen.insert(key.clone());
        self.order.push_back((expiry, key));
        Ok(())
    }
}
