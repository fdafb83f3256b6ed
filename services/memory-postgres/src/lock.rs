//! The tenant's index-build lock, across every instance of the cluster: a transaction on a
//! dedicated connection holding `pg_advisory_xact_lock`. Released by [`BuildLock::release`];
//! a lock dropped without it (an error path) takes its connection out of the pool and closes
//! it, and a crashed process's connection closes with it — either way PostgreSQL ends the
//! transaction and frees the lock, so no builder can leave it held.

use deadpool_postgres::Object;

use super::db::PgResultExt;
use lumina_memory::Result;

const LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(hashtext('lumina-memory-build:' || $1))";
const TRY_LOCK_SQL: &str =
    "SELECT pg_try_advisory_xact_lock(hashtext('lumina-memory-build:' || $1))";

/// The tenant's builder lock: a PostgreSQL advisory lock held by an open transaction on
/// its own connection.
pub struct BuildLock {
    client: Option<Object>,
}

impl BuildLock {
    /// Waits until no other builder of `tenant` runs.
    pub(super) async fn acquire(client: Object, tenant: &str) -> Result<Self> {
        client.batch_execute("BEGIN").await.pg("begin build lock")?;
        let lock = Self {
            client: Some(client),
        };
        if let Some(c) = &lock.client {
            c.execute(LOCK_SQL, &[&tenant]).await.pg("build lock")?;
        }
        Ok(lock)
    }

    /// The lock when no other builder of `tenant` runs now; `None` when one does.
    pub(super) async fn try_acquire(client: Object, tenant: &str) -> Result<Option<Self>> {
        client.batch_execute("BEGIN").await.pg("begin build lock")?;
        let lock = Self {
            client: Some(client),
        };
        let got: bool = match &lock.client {
            Some(c) => c
                .query_one(TRY_LOCK_SQL, &[&tenant])
                .await
                .pg("try build lock")?
                .try_get(0)
                .pg("read build lock")?,
            None => false,
        };
        if got {
            Ok(Some(lock))
        } else {
            lock.release().await?;
            Ok(None)
        }
    }

    /// Ends the transaction (freeing the lock) and returns the connection to the pool.
    pub(super) async fn release(mut self) -> Result<()> {
        if let Some(c) = self.client.take() {
            c.batch_execute("COMMIT").await.pg("release build lock")?;
        }
        Ok(())
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        // Not released: never hand a connection inside the locking transaction back to
        // the pool; closing it ends the transaction.
        if let Some(c) = self.client.take() {
            drop(Object::take(c));
        }
    }
}
