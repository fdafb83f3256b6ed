//! Pub/sub hints that a session has new events.
//!
//! A hint says "event `seq` exists"; it is never a source of truth. Subscribers read the
//! journal from PostgreSQL and use hints only to learn early that there is more. Whenever
//! hints may have been missed — the pub/sub connection dropped and was re-established, or
//! the subscriber fell behind and hints were discarded — the stream yields
//! [`HintEvent::Resync`], and the consumer catches up from the database by seq.
//!
//! One hub task per [`Hints`] owns a dedicated pub/sub connection and multiplexes every
//! session subscription of the process over it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{Stream, StreamExt};
use futures::task::AtomicWaker;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, instrument, warn};

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// Hints buffered per subscriber before further ones are replaced by a resync.
const BUFFER: usize = 1024;
/// How often an idle pub/sub connection is checked with PING (a half-open connection would
/// otherwise look healthy while delivering nothing).
const PING_EVERY: Duration = Duration::from_secs(5);

/// "Session events up to `seq` exist."
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// Sequence of the newest event.
    pub seq: u64,
    /// Whatever the publisher attached (small; the journal has the event itself).
    pub payload: serde_json::Value,
}

/// An item of a [`HintStream`].
#[derive(Debug, Clone, PartialEq)]
pub enum HintEvent {
    /// A new event was published.
    Hint(Hint),
    /// Hints may have been missed: catch up from the database.
    Resync,
}

/// Publishes and subscribes to hints. Cheap to clone; the hub stops when the last clone is
/// dropped, which ends every [`HintStream`].
#[derive(Clone)]
pub struct Hints {
    redis: Redis,
    commands: mpsc::UnboundedSender<Command>,
    next_id: Arc<AtomicU64>,
    _stop: Arc<DropGuard>,
}

impl std::fmt::Debug for Hints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hints").finish_non_exhaustive()
    }
}

enum Command {
    Subscribe {
        channel: String,
        subscriber: Subscriber,
        ack: oneshot::Sender<()>,
    },
    Unsubscribe {
        channel: String,
        id: u64,
    },
}

struct Subscriber {
    id: u64,
    tx: mpsc::Sender<Hint>,
    signal: Arc<Signal>,
}

/// The out-of-band resync flag: it cannot be lost to a full buffer.
#[derive(Default)]
struct Signal {
    resync: AtomicBool,
    waker: AtomicWaker,
}

impl Subscriber {
    fn resync(&self) {
        self.signal.resync.store(true, Ordering::Release);
        self.signal.waker.wake();
    }
}

impl Hints {
    /// Starts the hub; it connects in the background and keeps reconnecting.
    pub fn start(redis: Redis) -> Hints {
        let (commands, rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        tokio::spawn(hub(redis.clone(), rx, cancel.clone()));
        Hints {
            redis,
            commands,
            next_id: Arc::new(AtomicU64::new(0)),
            _stop: Arc::new(cancel.drop_guard()),
        }
    }

    /// Publishes a hint for `session_key`; returns how many connections received it.
    #[instrument(skip_all, fields(session = %session_key, seq))]
    pub async fn publish(
        &self,
        session_key: &str,
        seq: u64,
        payload: &serde_json::Value,
    ) -> Result<u64> {
        let message = serde_json::to_string(&Hint {
            seq,
            payload: payload.clone(),
        })
        .map_err(|err| ClusterError::protocol(format!("encoding hint: {err}")))?;
        self.redis
            .query(
                redis::cmd("PUBLISH")
                    .arg(self.redis.keys().events(session_key))
                    .arg(message),
            )
            .await
    }

    /// Subscribes to `session_key`'s hints. Returns once Redis confirmed the subscription,
    /// so every hint published afterwards is delivered (or signalled by a resync); fails with
    /// [`ClusterError::Unavailable`] if that does not happen within the command timeout.
    #[instrument(skip_all, fields(session = %session_key))]
    pub async fn subscribe(&self, session_key: &str) -> Result<HintStream> {
        let (tx, rx) = mpsc::channel(BUFFER);
        let signal = Arc::new(Signal::default());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let channel = self.redis.keys().events(session_key);
        // Built first so that a failure below unsubscribes again when it is dropped.
        let stream = HintStream {
            rx,
            signal: signal.clone(),
            channel: channel.clone(),
            id,
            commands: self.commands.clone(),
        };
        let (ack, acked) = oneshot::channel();
        self.commands
            .send(Command::Subscribe {
                channel,
                subscriber: Subscriber { id, tx, signal },
                ack,
            })
            .map_err(|_| ClusterError::Unavailable("hint hub stopped".to_owned()))?;
        let timeout = self.redis.options().command_timeout();
        match tokio::time::timeout(timeout, acked).await {
            Ok(Ok(())) => Ok(stream),
            Ok(Err(_)) => Err(ClusterError::Unavailable("hint hub stopped".to_owned())),
            Err(_) => Err(ClusterError::command_timeout(timeout)),
        }
    }
}

/// Hints of one session; unsubscribes when dropped.
pub struct HintStream {
    rx: mpsc::Receiver<Hint>,
    signal: Arc<Signal>,
    channel: String,
    id: u64,
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for HintStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HintStream")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Stream for HintStream {
    type Item = HintEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<HintEvent>> {
        // Register before checking the flag so a resync set in between still wakes us.
        self.signal.waker.register(cx.waker());
        if self.signal.resync.swap(false, Ordering::AcqRel) {
            return Poll::Ready(Some(HintEvent::Resync));
        }
        self.rx.poll_recv(cx).map(|hint| hint.map(HintEvent::Hint))
    }
}

impl Drop for HintStream {
    fn drop(&mut self) {
        // The hub may be gone already; then there is nothing to unsubscribe from.
        let _ = self.commands.send(Command::Unsubscribe {
            channel: std::mem::take(&mut self.channel),
            id: self.id,
        });
    }
}

type Subscribers = HashMap<String, Vec<Subscriber>>;

async fn hub(
    redis: Redis,
    mut commands: mpsc::UnboundedReceiver<Command>,
    cancel: CancellationToken,
) {
    let mut subs: Subscribers = HashMap::new();
    // Subscriptions requested while disconnected, confirmed after the next connect.
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let timeout = redis.options().command_timeout();
    let mut ever_connected = false;
    let mut delay = Duration::ZERO;
    loop {
        // Connect, still taking (un)subscriptions meanwhile.
        let (wait, redis_ref) = (delay, &redis);
        let connect = async move {
            tokio::time::sleep(wait).await;
            redis_ref.pubsub().await
        };
        tokio::pin!(connect);
        let pubsub = loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe { channel, subscriber, ack }) => {
                        subs.entry(channel).or_default().push(subscriber);
                        waiting.push(ack);
                    }
                    Some(Command::Unsubscribe { channel, id }) => remove(&mut subs, &channel, id),
                },
                connected = &mut connect => break connected,
            }
        };
        let (mut sink, mut messages) = match pubsub {
            Ok(pubsub) => pubsub.split(),
            Err(err) => {
                if delay.is_zero() {
                    warn!(error = %err, "hint connection failed, retrying");
                } else {
                    debug!(error = %err, "hint connection still failing");
                }
                delay = (delay * 2).clamp(Duration::from_millis(100), Duration::from_secs(2));
                continue;
            }
        };
        let channels: Vec<&String> = subs.keys().collect();
        if !channels.is_empty()
            && !matches!(
                tokio::time::timeout(timeout, sink.subscribe(&channels)).await,
                Ok(Ok(()))
            )
        {
            delay = Duration::from_millis(100);
            continue;
        }
        delay = Duration::ZERO;
        if ever_connected {
            debug!(
                channels = subs.len(),
                "hint subscriptions restored, signalling resync"
            );
            subs.values().flatten().for_each(Subscriber::resync);
        }
        ever_connected = true;
        for ack in waiting.drain(..) {
            let _ = ack.send(());
        }

        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                message = messages.next() => match message {
                    Some(message) => deliver(&subs, &message),
                    None => break,
                },
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe { channel, subscriber, ack }) => {
                        let new = !subs.contains_key(&channel);
                        subs.entry(channel.clone()).or_default().push(subscriber);
                        if new && !matches!(tokio::time::timeout(timeout, sink.subscribe(&channel)).await, Ok(Ok(()))) {
                            waiting.push(ack);
                            break;
                        }
                        let _ = ack.send(());
                    }
                    Some(Command::Unsubscribe { channel, id }) => {
                        remove(&mut subs, &channel, id);
                        if !subs.contains_key(&channel)
                            && !matches!(tokio::time::timeout(timeout, sink.unsubscribe(&channel)).await, Ok(Ok(())))
                        {
                            break;
                        }
                    }
                },
                _ = ping.tick() => {
                    if !matches!(tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        warn!(channels = subs.len(), "hint connection lost, reconnecting");
    }
}

fn remove(subs: &mut Subscribers, channel: &str, id: u64) {
    if let Some(list) = subs.get_mut(channel) {
        list.retain(|s| s.id != id);
        if list.is_empty() {
            subs.remove(channel);
        }
    }
}

fn deliver(subs: &Subscribers, message: &redis::Msg) {
    let Some(list) = subs.get(message.get_channel_name()) else {
        return;
    };
    let hint = message
        .get_payload::<String>()
        .ok()
        .and_then(|p| serde_json::from_str::<Hint>(&p).ok());
    for subscriber in list {
        match &hint {
            // A full buffer means a slow consumer: drop the hint but make it resync.
            Some(hint) => {
                if subscriber.tx.try_send(hint.clone()).is_err() {
                    subscriber.resync();
                }
            }
            // Someone published garbage; the consumer can still catch up from the journal.
            None => subscriber.resync(),
        }
    }
}
