//! The reconnect loop of the connection task: backoff for up to the window, resubscribe
//! and backfill from the last applied seq, then resend what was never answered.

use std::time::Duration;

use lumina_client::{catch_up, Notification};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::{Conn, Flow, Lost};
use crate::ui::app::{Command, ConnEvent};

impl Conn {
    /// Waits for `delay`, queueing commands meanwhile. `Some(flow)` when the user decided.
    async fn pause(
        &mut self,
        delay: Duration,
        commands: &mut UnboundedReceiver<Command>,
    ) -> Option<Flow> {
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => return None,
                command = commands.recv() => match command {
                    None | Some(Command::Quit { .. }) => return Some(Flow::Quit),
                    Some(Command::Reconnect) => return Some(Flow::Continue),
                    Some(other) => self.queued.push_back(other),
                },
            }
        }
    }

    pub(super) async fn reconnect(&mut self, commands: &mut UnboundedReceiver<Command>) -> Flow {
        // What the old connection delivered before it died is still worth applying: it
        // spares the backfill (a gap found here is filled after the reconnect anyway).
        while let Ok(note) = self.notes.try_recv() {
            if matches!(note, Notification::Event(_) | Notification::Delta(_)) {
                self.on_note(Some(note)).await;
            }
        }
        let mut deadline = Instant::now() + self.timing.window;
        let mut delay = self.timing.first_delay;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let budget = remaining
                .min(self.timing.attempt_timeout)
                .max(Duration::from_millis(100));
            let error = match tokio::time::timeout(budget, (self.connector)()).await {
                Ok(Ok(connected)) => {
                    self.client = connected.client.with_call_timeout(self.timing.call_timeout);
                    self.notes = connected.notifications;
                    self.server = self.client.url().to_string();
                    match self.after_connect().await {
                        Ok(()) => {
                            self.connected = true;
                            self.send(ConnEvent::Connected {
                                server: self.server.clone(),
                            });
                            if let Err(Lost(reason)) = self.resend_pending().await {
                                self.lost(reason);
                            }
                            return Flow::Continue;
                        }
                        Err(Lost(reason)) => reason,
                    }
                }
                Ok(Err(error)) => format!("{error:#}"),
                Err(_) => "the connection attempt timed out".to_string(),
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                self.send(ConnEvent::GaveUp { reason: error });
                // Wait for the user: Ctrl-R tries again, quitting ends the task.
                loop {
                    match commands.recv().await {
                        None | Some(Command::Quit { .. }) => return Flow::Quit,
                        Some(Command::Reconnect) => break,
                        Some(other) => self.queued.push_back(other),
                    }
                }
                deadline = Instant::now() + self.timing.window;
                delay = self.timing.first_delay;
                attempt = 0;
                continue;
            }
            self.send(ConnEvent::Retrying {
                attempt,
                remaining_secs: remaining.as_secs(),
                error,
            });
            match self.pause(delay.min(remaining), commands).await {
                Some(Flow::Quit) => return Flow::Quit,
                Some(Flow::Continue) | None => {}
            }
            delay = (delay * 2).min(self.timing.max_delay);
        }
    }

    /// On a fresh connection: resubscribe and backfill from the last applied seq.
    async fn after_connect(&mut self) -> Result<(), Lost> {
        if let Some(session) = &mut self.session {
            let resumed = self
                .client
                .session_resume(&session.id, session.view.last_seq())
                .await
                .map_err(|e| Lost(e.to_string()))?;
            let frames = catch_up(&self.client, &session.id, &mut session.view)
                .await
                .map_err(|e| Lost(e.to_string()))?;
            self.send(ConnEvent::Resumed {
                pending_permissions: resumed.pending_permissions,
            });
            if !frames.is_empty() {
                self.send(ConnEvent::Events(frames));
            }
        }
        Ok(())
    }

    /// Resends every unanswered mutation under its original request id, in order.
    async fn resend_pending(&mut self) -> Result<(), Lost> {
        let pending = self.pending.clone();
        for mut mutation in pending {
            mutation.retried = true;
            if let Some(kept) = self.pending.iter_mut().find(|m| m.id == mutation.id) {
                kept.retried = true;
            }
            self.execute(mutation).await?;
        }
        Ok(())
    }
}
