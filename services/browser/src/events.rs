//! What happened between two operations — requests and connections refused, dialogs
//! dismissed — collected by background tasks and handed out with the next [`crate::PageState`].

use std::sync::{Arc, Mutex, MutexGuard};

use crate::Blocked;

/// Refusals kept at most between two operations (a page can try thousands).
const MAX_BLOCKED: usize = 100;

/// Refused requests and dismissed dialogs since the last operation.
#[derive(Default)]
pub(crate) struct Events {
    pub blocked: Vec<Blocked>,
    pub dialogs: Vec<String>,
}

pub(crate) type Shared = Arc<Mutex<Events>>;

/// Locks `mutex`, also after a panic elsewhere (the data are plain lists).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Adds `blocked` to `list` unless it is listed already (Chromium retries a refused
/// connection) or the list is full.
pub(crate) fn note_blocked(list: &mut Vec<Blocked>, blocked: Blocked) {
    if list.len() < MAX_BLOCKED && !list.contains(&blocked) {
        list.push(blocked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(url: &str) -> Blocked {
        Blocked {
            url: url.into(),
            reason: "a loopback address".into(),
        }
    }

    #[test]
    fn repeats_are_listed_once_and_the_list_is_bounded() {
        let mut list = Vec::new();
        note_blocked(&mut list, blocked("127.0.0.1:9"));
        note_blocked(&mut list, blocked("127.0.0.1:9"));
        assert_eq!(list, vec![blocked("127.0.0.1:9")]);
        for port in 0..1000 {
            note_blocked(&mut list, blocked(&format!("127.0.0.1:{port}")));
        }
        assert_eq!(list.len(), MAX_BLOCKED);
    }
}
