//! Connections to Redis: one shared auto-reconnecting connection for ordinary commands,
//! dedicated ones for blocking stream reads and pub/sub, and the key scheme.
//!
//! The redis crate's async connections time out replies after 500 ms unless told otherwise,
//! which silently breaks `XREADGROUP … BLOCK` (SYSTEM.md §12). Every connection made here
//! therefore sets its response timeout explicitly, and blocking reads get a connection of
//! their own whose timeout exceeds the BLOCK time (a blocked command would also stall every
//! other command pipelined on a shared connection).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{FromRedisValue, RedisError};
use serde::{Deserialize, Serialize};

use crate::error::{from_redis, ClusterError, Result};

/// Connection settings. The Redis URL is passed separately to [`Redis::connect`] because it
/// may carry a password and these options are logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnOptions {
    /// Namespace of every key: `lumina:{cluster_id}:…`. Default `"default"`.
    pub cluster_id: String,
    /// Response timeout of ordinary commands, and the bound on waiting for a reconnect.
    /// Default 2000 ms.
    pub command_timeout_ms: u64,
    /// Timeout of one TCP connect attempt. Default 2000 ms.
    pub connect_timeout_ms: u64,
    /// BLOCK time of blocking stream reads; the dedicated connection that issues them times
    /// out after this plus `command_timeout_ms`. Default 1000 ms.
    pub block_ms: u64,
}

impl Default for ConnOptions {
    fn default() -> Self {
        ConnOptions {
            cluster_id: "default".to_owned(),
            command_timeout_ms: 2000,
            connect_timeout_ms: 2000,
            block_ms: 1000,
        }
    }
}

impl ConnOptions {
    /// Options for `cluster_id` with every other setting at its default.
    pub fn for_cluster(cluster_id: impl Into<String>) -> Self {
        ConnOptions {
            cluster_id: cluster_id.into(),
            ..ConnOptions::default()
        }
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms.max(1))
    }

    pub(crate) fn block(&self) -> Duration {
        Duration::from_millis(self.block_ms.max(1))
    }
}

/// Names of every key this crate uses, all under `lumina:{cluster_id}:`.
///
/// Lease and fence keys wrap the session in a hash tag (`{…}`) so the lease script's two
/// keys land in one slot should the deployment ever move to Redis Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys of the cluster `cluster_id`.
    pub fn new(cluster_id: &str) -> Self {
        Keys {
            prefix: format!("lumina:{cluster_id}:"),
        }
    }

    /// `lumina:{cluster_id}:`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The registry entry of an instance (a string with a TTL).
    pub fn instance(&self, instance_id: &str) -> String {
        format!("{}instance:{instance_id}", self.prefix)
    }

    /// Sorted set of registered instance ids, scored by their expiry (Redis server time).
    pub fn instances(&self) -> String {
        format!("{}instances", self.prefix)
    }

    /// The lease of a session: `"{fence}|{instance_id}"` with a TTL.
    pub fn lease(&self, session: &str) -> String {
        format!("{}lease:{{{session}}}", self.prefix)
    }

    /// The fencing-token counter of a session (no TTL, so it only grows while Redis lives).
    pub fn fence(&self, session: &str) -> String {
        format!("{}fence:{{{session}}}", self.prefix)
    }

    /// The RPC request stream of an instance.
    pub fn rpc(&self, instance_id: &str) -> String {
        format!("{}rpc:{instance_id}", self.prefix)
    }

    /// The RPC reply stream of an instance.
    pub fn reply(&self, instance_id: &str) -> String {
        format!("{}reply:{instance_id}", self.prefix)
    }

    /// The pub/sub channel of a session's event hints.
    pub fn events(&self, session: &str) -> String {
        format!("{}events:{session}", self.prefix)
    }
}

/// A cheap, clonable handle on Redis for one cluster namespace.
#[derive(Clone)]
pub struct Redis {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    manager: ConnectionManager,
    keys: Keys,
    options: ConnOptions,
    /// Password as written in the URL and decoded, scrubbed from every error message.
    secrets: Vec<String>,
}

impl fmt::Debug for Redis {
    // The client's own Debug would print the connection info, password included.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redis")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// Connects and verifies the connection; fails with [`ClusterError::Unavailable`] when
    /// Redis cannot be reached (the cluster profile is fail-closed, SYSTEM.md §2).
    pub async fn connect(url: &str, options: ConnOptions) -> Result<Redis> {
        let mut secrets = raw_password(url).into_iter().collect::<Vec<_>>();
        let client = redis::Client::open(url).map_err(|err| {
            // The parser's messages do not echo the URL, but scrub anyway: this is the one
            // place the raw URL is in scope.
            ClusterError::Unavailable(format!(
                "invalid redis url: {}",
                scrub(&secrets, err.to_string())
            ))
        })?;
        if let Some(password) = client.get_connection_info().redis_settings().password() {
            secrets.push(password.to_owned());
        }
        secrets.retain(|s| !s.is_empty());
        let config = manager_config(&options, options.command_timeout());
        let deadline =
            options.command_timeout() + Duration::from_millis(options.connect_timeout_ms);
        let manager = match tokio::time::timeout(
            deadline,
            ConnectionManager::new_with_config(client.clone(), config),
        )
        .await
        {
            Ok(Ok(manager)) => manager,
            Ok(Err(err)) => return Err(from_redis(&err, |m| scrub(&secrets, m))),
            Err(_) => return Err(ClusterError::command_timeout(deadline)),
        };
        let keys = Keys::new(&options.cluster_id);
        Ok(Redis {
            inner: Arc::new(Inner {
                client,
                manager,
                keys,
                options,
                secrets,
            }),
        })
    }

    /// The key scheme of this cluster.
    pub fn keys(&self) -> &Keys {
        &self.inner.keys
    }

    /// The options this handle was built with.
    pub fn options(&self) -> &ConnOptions {
        &self.inner.options
    }

    /// PING; for readiness probes.
    pub async fn ping(&self) -> Result<()> {
        let pong: String = self.query(&redis::cmd("PING")).await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(ClusterError::protocol(format!(
                "unexpected ping reply {pong:?}"
            )))
        }
    }

    /// Runs one command on the shared connection.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        let mut conn = self.inner.manager.clone();
        self.bounded(cmd.query_async(&mut conn)).await
    }

    /// Runs a pipeline on the shared connection (one round trip).
    pub(crate) async fn query_pipe<T: FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T> {
        let mut conn = self.inner.manager.clone();
        self.bounded(pipe.query_async(&mut conn)).await
    }

    /// Runs a Lua script (EVALSHA, loading it again after a Redis restart flushed it).
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        let mut conn = self.inner.manager.clone();
        self.bounded(invocation.invoke_async(&mut conn)).await
    }

    /// A dedicated auto-reconnecting connection for blocking reads.
    pub(crate) fn blocking(&self) -> Result<BlockingConn> {
        let timeout = self.inner.options.block() + self.inner.options.command_timeout();
        let config = manager_config(&self.inner.options, timeout);
        let manager = ConnectionManager::new_lazy_with_config(self.inner.client.clone(), config)
            .map_err(|err| self.map_err(&err))?;
        Ok(BlockingConn {
            manager,
            redis: self.clone(),
            timeout,
        })
    }

    /// A new dedicated pub/sub connection (RESP2 needs one of its own).
    pub(crate) async fn pubsub(&self) -> Result<PubSub> {
        let timeout = self.inner.options.command_timeout()
            + Duration::from_millis(self.inner.options.connect_timeout_ms);
        match tokio::time::timeout(timeout, self.inner.client.get_async_pubsub()).await {
            Ok(Ok(pubsub)) => Ok(pubsub),
            Ok(Err(err)) => Err(self.map_err(&err)),
            Err(_) => Err(ClusterError::command_timeout(timeout)),
        }
    }

    pub(crate) fn map_err(&self, err: &RedisError) -> ClusterError {
        from_redis(err, |m| scrub(&self.inner.secrets, m))
    }

    /// Bounds a command, including any wait for a reconnect, by the command timeout: the
    /// manager's own retry loop may otherwise keep a caller waiting for seconds.
    async fn bounded<T>(&self, fut: impl Future<Output = redis::RedisResult<T>>) -> Result<T> {
        bounded(self, self.inner.options.command_timeout(), fut).await
    }
}

async fn bounded<T>(
    redis: &Redis,
    timeout: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(redis.map_err(&err)),
        Err(_) => Err(ClusterError::command_timeout(timeout)),
    }
}

/// A connection reserved for blocking commands (`XREAD[GROUP] … BLOCK`).
pub(crate) struct BlockingConn {
    manager: ConnectionManager,
    redis: Redis,
    timeout: Duration,
}

impl BlockingConn {
    /// Runs a blocking command; its BLOCK must not exceed [`ConnOptions::block_ms`].
    pub(crate) async fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        let mut conn = self.manager.clone();
        bounded(&self.redis, self.timeout, cmd.query_async(&mut conn)).await
    }
}

fn manager_config(options: &ConnOptions, response_timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(response_timeout))
        .set_connection_timeout(Some(Duration::from_millis(
            options.connect_timeout_ms.max(1),
        )))
        // Few, short retries: callers are bounded by the command timeout anyway, and the
        // next command after a failed reconnect starts a new one.
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

/// The password exactly as written in `url` (percent-encoded), if any.
fn raw_password(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let userinfo = rest.split('/').next()?.rsplit_once('@')?.0;
    let (_, password) = userinfo.split_once(':')?;
    Some(password.to_owned())
}

fn scrub(secrets: &[String], mut message: String) -> String {
    for secret in secrets {
        if !secret.is_empty() && message.contains(secret.as_str()) {
            message = message.replace(secret.as_str(), "***");
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn finds_the_raw_password_in_urls() {
        assert_eq!(
            raw_password("redis://:p%40ss@host:6379/0"),
            Some("p%40ss".to_owned())
        );
        assert_eq!(raw_password("redis://user:pw@host/"), Some("pw".to_owned()));
        assert_eq!(raw_password("redis://user@host/"), None);
        assert_eq!(raw_password("redis://host:6379/"), None);
    }

    #[test]
    fn scrubs_every_secret() {
        let secrets = vec!["p%40ss".to_owned(), "p@ss".to_owned()];
        assert_eq!(
            scrub(&secrets, "auth p@ss and p%40ss".to_owned()),
            "auth *** and ***"
        );
    }

    #[test]
    fn key_scheme() {
        let keys = Keys::new("c1");
        assert_eq!(
            vec![
                keys.instance("i"),
                keys.instances(),
                keys.lease("s"),
                keys.fence("s"),
                keys.rpc("i"),
                keys.reply("i"),
                keys.events("s"),
            ],
            vec![
                "lumina:c1:instance:i",
                "lumina:c1:instances",
                "lumina:c1:lease:{s}",
                "lumina:c1:fence:{s}",
                "lumina:c1:rpc:i",
                "lumina:c1:reply:i",
                "lumina:c1:events:s",
            ]
        );
    }
}
