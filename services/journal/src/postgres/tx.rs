//! A transaction on a pooled connection whose `BEGIN` and `COMMIT` are pipelined with the
//! statements around them (`tokio_postgres::Transaction` waits for each of them, which
//! costs two round trips per write).
//!
//! The price of doing it by hand is that the connection must never go back to the pool
//! inside a transaction. [`Tx::finish`] rolls back after an error; if even that fails, or
//! the operation is abandoned midway (its future dropped by a timeout), the connection is
//! detached from the pool and closed, which makes the server roll back.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::try_join_all;

use deadpool_postgres::{Client, ClientWrapper, Object};

use crate::{Error, Result};

pub(super) struct Tx {
    client: Option<Client>,
    /// Set before `BEGIN` is sent, cleared once `COMMIT` or `ROLLBACK` has succeeded.
    open: AtomicBool,
}

impl Tx {
    pub(super) fn new(client: Client) -> Self {
        Self {
            client: Some(client),
            open: AtomicBool::new(false),
        }
    }

    pub(super) fn conn(&self) -> Result<&ClientWrapper> {
        self.client
            .as_deref()
            .ok_or_else(|| Error::Unavailable("postgres: connection already released".into()))
    }

    /// Call right before sending `BEGIN`.
    pub(super) fn opened(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// Call once `COMMIT` has been answered.
    pub(super) fn closed(&self) {
        self.open.store(false, Ordering::Release);
    }

    /// Ends the transaction after `result`: a committed one needs nothing, otherwise it is
    /// rolled back. Returns `result`.
    pub(super) async fn finish<T>(self, result: Result<T>) -> Result<T> {
        if self.open.load(Ordering::Acquire) {
            if let Ok(c) = self.conn() {
                // After a failed pipelined COMMIT there may be no transaction left: the
                // server only warns about that.
                if c.batch_execute("ROLLBACK").await.is_ok() {
                    self.closed();
                }
            }
        }
        result
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if self.open.load(Ordering::Acquire) {
            if let Some(client) = self.client.take() {
                tracing::debug!("closing a connection left inside a transaction");
                drop(Object::take(client));
            }
        }
    }
}

/// Sends `statements` in order and waits for all their answers. The order is what makes
/// pipelining correct (COMMIT after the statements it commits): `tokio_postgres` sends a
/// request when its future is first polled, and `try_join_all` polls a short list in
/// order, stopping at the first failure (so nothing after a failed statement is sent).
pub(super) async fn pipeline<F>(statements: Vec<F>) -> Result<Vec<u64>, tokio_postgres::Error>
where
    F: Future<Output = Result<u64, tokio_postgres::Error>>,
{
    // Above this length `try_join_all` switches to an unordered set.
    debug_assert!(statements.len() <= 30);
    try_join_all(statements).await
}
