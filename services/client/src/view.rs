//! Exactly-once, in-order application of a session's durable events.
//!
//! Live events can arrive twice (a resume backlog overlapping a page the caller already
//! pulled) or with holes (a subscription taken late, a reconnect). The protocol's rule is:
//! drop what was already applied, and on a gap pull the missing events with
//! `session.events` before applying anything newer. [`SessionView`] does the bookkeeping;
//! the caller applies exactly the frames it hands back, in the order given.

use std::collections::BTreeMap;

use lumina_protocol::EventFrame;

use crate::{Client, ClientError, Result};

/// What to do with an offered frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Offer {
    /// Apply these frames now, in this order: the offered frame followed by any held frames
    /// it made contiguous.
    Ready(Vec<EventFrame>),
    /// Already applied (`seq <= last_seq`): ignore it.
    Duplicate,
    /// The frame is ahead of the view: events `after_seq + 1 ..= next_seq - 1` are missing.
    /// The frame is held; backfill with [`catch_up`] (or offer the missing frames), which
    /// releases it.
    Gap { after_seq: u64, next_seq: u64 },
}

/// Tracks the last applied `seq` of one session and holds frames that arrived early.
/// It does not check `session_id`: keep one view per session and route frames to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionView {
    last_seq: u64,
    held: BTreeMap<u64, EventFrame>,
}

impl SessionView {
    /// A view that has applied everything up to and including `after_seq` (0: nothing yet).
    pub fn new(after_seq: u64) -> Self {
        Self {
            last_seq: after_seq,
            held: BTreeMap::new(),
        }
    }

    /// The seq of the last applied event.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// True while frames are held behind a gap.
    pub fn has_gap(&self) -> bool {
        !self.held.is_empty()
    }

    /// Offers one frame; see [`Offer`].
    pub fn offer(&mut self, frame: EventFrame) -> Offer {
        let seq = frame.seq;
        if seq <= self.last_seq {
            return Offer::Duplicate;
        }
        if seq > self.last_seq + 1 {
            self.held.insert(seq, frame);
            return Offer::Gap {
                after_seq: self.last_seq,
                next_seq: seq,
            };
        }
        self.last_seq = seq;
        let mut ready = vec![frame];
        loop {
            // Held copies of frames that have just been applied are duplicates.
            while let Some(entry) = self.held.first_entry() {
                if *entry.key() > self.last_seq {
                    break;
                }
                entry.remove();
            }
            match self.held.first_entry() {
                Some(entry) if *entry.key() == self.last_seq + 1 => {
                    self.last_seq = *entry.key();
                    ready.push(entry.remove());
                }
                _ => break,
            }
        }
        Offer::Ready(ready)
    }
}

/// Pages `session.events` after `view.last_seq()` until the server reports `more == false`,
/// offering every event to `view`. Returns the frames to apply, in order (including held
/// live frames the backfill released).
pub async fn catch_up(
    client: &Client,
    session_id: &str,
    view: &mut SessionView,
) -> Result<Vec<EventFrame>> {
    let mut ready = Vec::new();
    loop {
        let after_seq = view.last_seq();
        let page = client.session_events(session_id, after_seq, None).await?;
        for frame in page.events {
            if let Offer::Ready(frames) = view.offer(frame) {
                ready.extend(frames);
            }
        }
        if !page.more {
            return Ok(ready);
        }
        if view.last_seq() == after_seq {
            // Paging again would ask for the same page forever.
            return Err(ClientError::Decode(format!(
                "session.events after seq {after_seq} reported more events but returned none \
                 that follow it"
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use lumina_protocol::Event;
    use pretty_assertions::assert_eq;

    use super::*;

    fn frame(seq: u64) -> EventFrame {
        EventFrame {
            session_id: "s1".into(),
            seq,
            stream: "main".into(),
            stream_seq: seq,
            ts_ms: 0,
            event: Event::StepStarted {
                run_id: "r1".into(),
                step: seq as u32,
            },
        }
    }

    fn seqs(offer: Offer) -> Vec<u64> {
        match offer {
            Offer::Ready(frames) => frames.iter().map(|f| f.seq).collect(),
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    #[test]
    fn applies_in_order_and_drops_duplicates() {
        let mut view = SessionView::new(0);
        assert_eq!(seqs(view.offer(frame(1))), vec![1]);
        assert_eq!(seqs(view.offer(frame(2))), vec![2]);
        assert_eq!(view.offer(frame(2)), Offer::Duplicate);
        assert_eq!(view.offer(frame(1)), Offer::Duplicate);
        assert_eq!(seqs(view.offer(frame(3))), vec![3]);
        assert_eq!(view.last_seq(), 3);
        assert!(!view.has_gap());
    }

    #[test]
    fn starting_after_a_head_ignores_older_events() {
        let mut view = SessionView::new(10);
        assert_eq!(view.offer(frame(10)), Offer::Duplicate);
        assert_eq!(seqs(view.offer(frame(11))), vec![11]);
    }

    #[test]
    fn reports_a_gap_and_holds_the_frame_until_backfilled() {
        let mut view = SessionView::new(2);
        assert_eq!(
            view.offer(frame(5)),
            Offer::Gap {
                after_seq: 2,
                next_seq: 5
            }
        );
        assert_eq!(
            view.offer(frame(6)),
            Offer::Gap {
                after_seq: 2,
                next_seq: 6
            }
        );
        assert!(view.has_gap());
        assert_eq!(view.last_seq(), 2);
        // Backfill: 3 releases nothing yet, 4 releases the held 5 and 6.
        assert_eq!(seqs(view.offer(frame(3))), vec![3]);
        assert_eq!(seqs(view.offer(frame(4))), vec![4, 5, 6]);
        assert!(!view.has_gap());
        assert_eq!(view.last_seq(), 6);
    }

    #[test]
    fn backfill_overlapping_held_frames_applies_each_seq_once() {
        let mut view = SessionView::new(0);
        assert!(matches!(view.offer(frame(3)), Offer::Gap { .. }));
        // A backfill page covering 1..=4 delivers 3 again; the held copy must not repeat.
        let mut applied = Vec::new();
        for seq in 1..=4 {
            if let Offer::Ready(frames) = view.offer(frame(seq)) {
                applied.extend(frames.into_iter().map(|f| f.seq));
            }
        }
        assert_eq!(applied, vec![1, 2, 3, 4]);
        assert!(!view.has_gap());
        assert_eq!(view.offer(frame(3)), Offer::Duplicate);
    }
}
