//! Journal events and live deltas → the SSE events of the Conversation API
//! (docs/conversation-api.md#event-ids), with ids derived from journal seqs so they are the
//! same on every instance and every reconnect:
//!
//! - `N` — everything through journal seq `N` was delivered (the first event of an execute
//!   stream, `done` and `error` events, which sit on the run's terminal event);
//! - `M.o` — a chunk: the first `o` bytes of the answer of the step whose `model.requested`
//!   event is seq `M` were delivered.
//!
//! Deltas are not journaled, so a step's text is streamed live only when its whole stream
//! was seen (its `model.requested` came after the subscription started); otherwise — a
//! reconnect in the middle of a step — the rest of the step's text is sent once its
//! `message.assistant` is journaled. Either way each byte of an answer is sent once.

use std::collections::{HashMap, HashSet};
use std::fmt;

use lumina_protocol::{DeltaFrame, Event, EventFrame};

use super::error::{ApiError, ErrorDetail};
use super::window::MAIN;

/// Where a stream resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// After journal seq `N`.
    Seq(u64),
    /// After `offset` bytes of the answer of the step whose `model.requested` is `seq`.
    Chunk { seq: u64, offset: usize },
}

impl Cursor {
    /// Parses an event id (`N` or `M.o`).
    pub fn parse(id: &str) -> Result<Cursor, ApiError> {
        let bad = || ApiError::invalid(format!("`{id}` is not an event id of this API"));
        let id = id.trim();
        match id.split_once('.') {
            None => id.parse().map(Cursor::Seq).map_err(|_| bad()),
            Some((seq, offset)) => Ok(Cursor::Chunk {
                seq: seq.parse().map_err(|_| bad())?,
                offset: offset.parse().map_err(|_| bad())?,
            }),
        }
    }

    /// The journal seq to read after.
    pub fn seq(self) -> u64 {
        match self {
            Cursor::Seq(seq) | Cursor::Chunk { seq, .. } => seq,
        }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cursor::Seq(seq) => write!(f, "{seq}"),
            Cursor::Chunk { seq, offset } => write!(f, "{seq}.{offset}"),
        }
    }
}

/// An SSE event to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Chunk {
        id: Cursor,
        text: String,
    },
    Done {
        id: Cursor,
        run_id: String,
        message_id: Option<u64>,
        answer: String,
    },
    Failed {
        id: Cursor,
        run_id: String,
        status: &'static str,
        error: ErrorDetail,
    },
}

/// A step's answer as far as it was sent.
#[derive(Debug)]
struct Step {
    /// Seq of its `model.requested`.
    seq: u64,
    /// Bytes of its text sent.
    sent: usize,
    /// Whether its deltas are streamed (its whole stream is seen).
    live: bool,
    /// The live deltas so far.
    text: String,
}

/// The state of one stream.
#[derive(Debug)]
pub struct Replay {
    steps: HashMap<(String, u32), Step>,
    /// A chunk cursor's step, until its `message.assistant` (or another step) arrives.
    resumed: Option<Step>,
    /// Steps requested after this seq are streamed live.
    live_after: u64,
    /// Only this run (an execute stream), or every run (a conversation stream).
    only_run: Option<String>,
    /// Runs started or queued since the cursor and not ended yet.
    open: HashSet<String>,
    /// The run that was open when the stream subscribed: it is waited for even when its
    /// start is before the cursor.
    open_before: Option<String>,
    /// The last answer of each run.
    answers: HashMap<String, u64>,
    /// The subscription's head when it started: the backlog ends there.
    head: u64,
    start: Cursor,
    finished: bool,
}

impl Replay {
    /// A stream resuming after `cursor`, on a subscription whose backlog ends at `head`;
    /// `running`: the run open when it subscribed, if any.
    pub fn new(
        cursor: Cursor,
        head: u64,
        running: Option<String>,
        only_run: Option<String>,
    ) -> Replay {
        let resumed = match cursor {
            Cursor::Chunk { seq, offset } => Some(Step {
                seq,
                sent: offset,
                live: false,
                text: String::new(),
            }),
            Cursor::Seq(_) => None,
        };
        Replay {
            steps: HashMap::new(),
            resumed,
            live_after: head,
            only_run,
            open: HashSet::new(),
            open_before: running,
            answers: HashMap::new(),
            head,
            start: cursor,
            finished: false,
        }
    }

    /// The cursor it resumes after (the first event's id of an execute stream).
    pub fn start(&self) -> Cursor {
        self.start
    }

    /// Whether the stream is over (its run ended, or — for a conversation stream — every
    /// run it knew of ended and the backlog is delivered).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// A conversation stream with nothing to wait for ends at once.
    pub fn check_idle(&mut self, cursor: Cursor) {
        if self.only_run.is_none() && self.open_before.is_none() && cursor.seq() >= self.head {
            self.finished = true;
        }
    }

    fn wanted(&self, run_id: &str) -> bool {
        self.only_run.as_deref().is_none_or(|only| only == run_id)
    }

    /// A live delta.
    pub fn delta(&mut self, delta: &DeltaFrame, out: &mut Vec<Out>) {
        if delta.channel != "text" || !self.wanted(&delta.run_id) {
            return;
        }
        let Some(step) = self.steps.get_mut(&(delta.run_id.clone(), delta.step)) else {
            return;
        };
        if !step.live {
            return;
        }
        step.text.push_str(&delta.text);
        if step.text.len() > step.sent {
            let text = step.text[step.sent..].to_string();
            step.sent = step.text.len();
            out.push(Out::Chunk {
                id: Cursor::Chunk {
                    seq: step.seq,
                    offset: step.sent,
                },
                text,
            });
        }
    }

    /// A journal event.
    pub fn event(&mut self, frame: &EventFrame, out: &mut Vec<Out>) {
        if frame.stream != MAIN {
            return;
        }
        match &frame.event {
            Event::RunStarted { run_id, .. } | Event::RunQueued { run_id, .. } => {
                self.open.insert(run_id.clone());
            }
            Event::ModelRequested { run_id, step, .. } => {
                // A chunk cursor's step that never answered is over.
                if self.resumed.as_ref().is_some_and(|r| r.seq != frame.seq) {
                    self.resumed = None;
                }
                self.steps.insert(
                    (run_id.clone(), *step),
                    Step {
                        seq: frame.seq,
                        sent: 0,
                        live: frame.seq > self.live_after,
                        text: String::new(),
                    },
                );
            }
            Event::MessageAssistant {
                run_id, step, text, ..
            } => {
                let state = self
                    .steps
                    .remove(&(run_id.clone(), *step))
                    .or_else(|| self.resumed.take());
                if !text.is_empty() {
                    self.answers.insert(run_id.clone(), frame.seq);
                }
                if self.wanted(run_id) {
                    rest_of(text, state, frame.seq, out);
                }
            }
            Event::RunCompleted { run_id, result, .. } => {
                let message_id = self.answers.get(run_id).copied();
                self.end(run_id, frame.seq, out, |id| Out::Done {
                    id,
                    run_id: run_id.clone(),
                    message_id,
                    answer: result.clone(),
                });
            }
            Event::RunFailed {
                run_id,
                code,
                message,
            } => self.end(run_id, frame.seq, out, |id| Out::Failed {
                id,
                run_id: run_id.clone(),
                status: "failed",
                error: ErrorDetail {
                    code: code.as_str().to_string(),
                    message: message.clone(),
                },
            }),
            Event::RunInterrupted { run_id, reason } => {
                self.end(run_id, frame.seq, out, |id| Out::Failed {
                    id,
                    run_id: run_id.clone(),
                    status: "interrupted",
                    error: ErrorDetail {
                        code: "interrupted".into(),
                        message: reason.clone(),
                    },
                })
            }
            _ => {}
        }
        if self.only_run.is_none()
            && frame.seq >= self.head
            && self.open.is_empty()
            && self.open_before.is_none()
            && is_terminal(&frame.event)
        {
            self.finished = true;
        }
    }

    fn end(
        &mut self,
        run_id: &str,
        seq: u64,
        out: &mut Vec<Out>,
        make: impl FnOnce(Cursor) -> Out,
    ) {
        self.open.remove(run_id);
        if self.open_before.as_deref() == Some(run_id) {
            self.open_before = None;
        }
        if self.wanted(run_id) {
            out.push(make(Cursor::Seq(seq)));
            if self.only_run.is_some() {
                self.finished = true;
            }
        }
    }
}

fn is_terminal(event: &Event) -> bool {
    matches!(
        event,
        Event::RunCompleted { .. } | Event::RunFailed { .. } | Event::RunInterrupted { .. }
    )
}

/// What is left of a step's answer once it is journaled.
fn rest_of(text: &str, step: Option<Step>, message_seq: u64, out: &mut Vec<Out>) {
    let (seq, sent) = match &step {
        Some(step) => (step.seq, step.sent),
        // A cursor placed between a step's request and its answer by hand.
        None => (message_seq, 0),
    };
    if let Some(step) = &step {
        if step.live && !text.starts_with(&step.text) {
            tracing::warn!(
                step_seq = step.seq,
                "streamed deltas differ from the journaled answer"
            );
        }
    }
    if sent >= text.len() || !text.is_char_boundary(sent) {
        return;
    }
    out.push(Out::Chunk {
        id: match step {
            Some(_) => Cursor::Chunk {
                seq,
                offset: text.len(),
            },
            None => Cursor::Seq(message_seq),
        },
        text: text[sent..].to_string(),
    });
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
