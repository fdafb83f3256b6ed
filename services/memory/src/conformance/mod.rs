//! The conformance suite every [`MemoryStore`] backend must pass, unchanged.
//!
//! A backend's integration tests expand
//! [`memory_conformance_suite!`](crate::memory_conformance_suite) with an async factory that
//! yields a fresh, empty store per test (anything implementing [`StoreFixture`]: a struct
//! that owns the store and its temp dir or database, and can open a second store over the
//! same data). The calling crate needs `tokio` (with `macros` and `rt-multi-thread`) as a
//! dependency.
//!
//! The checks are plain `pub async fn`s (in submodules, re-exported here), so the macro
//! stays a list of names. The semantic compile checks drive the store with
//! [`ScriptedModel`], a scripted [`SemanticModel`](crate::SemanticModel) returning canned
//! JSON.

// A test suite: panicking is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::{MemoryStore, NewEvidence};

/// The space every check writes to.
pub const SPACE: &str = "project-a";
/// A space that must see none of [`SPACE`]'s data.
pub const OTHER_SPACE: &str = "project-b";

/// What a conformance factory yields: a fresh store, plus whatever must outlive the test.
pub trait StoreFixture: Send + Sync + 'static {
    /// The store under test.
    fn store(&self) -> Arc<dyn MemoryStore>;
    /// A second store over the same data with the same options and nothing cached, as
    /// after a restart.
    fn reopen(&self) -> Arc<dyn MemoryStore>;
}

/// Expands to one `#[tokio::test]` per conformance check, each calling `$factory.await`
/// for a fresh [`StoreFixture`](crate::conformance::StoreFixture).
#[macro_export]
macro_rules! memory_conformance_suite {
    ($factory:expr) => {
        $crate::memory_conformance_suite!(@checks $factory;
            append_assigns_ids_and_checksums,
            idempotent_ingestion,
            conflicting_source_refuses_batch,
            read_paging_and_get,
            heads_chain_rows,
            space_isolation,
            invalid_requests,
            recall_returns_source_ids,
            recall_respects_budget_and_count,
            recall_catches_up_new_evidence,
            recall_skips_ubiquitous_words,
            recall_organizes_context,
            recall_empty_space,
            sync_aligns_every_space,
            compile_accepts_grounded_nodes,
            compile_rejects_ungrounded_nodes,
            compile_failed_batches_retry,
            compile_resumes_from_checkpoint,
            compile_rebuild_recompiles_from_the_ledger,
            compile_supersedes_on_user_update,
            compile_keeps_ambiguous_conflicts_pending,
            compiled_nodes_join_the_graph,
        );
        $crate::memory_conformance_suite!(@fixture_checks $factory;
            views_refresh_like_rebuilds,
            concurrent_recalls_load_a_view_once,
        );
    };
    (@checks $factory:expr; $($check:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = $factory.await;
                let store = $crate::conformance::StoreFixture::store(&fixture);
                $crate::conformance::$check(store).await;
            }
        )+
    };
    (@fixture_checks $factory:expr; $($check:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = $factory.await;
                $crate::conformance::$check(&fixture).await;
            }
        )+
    };
}

/// A small conversation: two sessions of a user and an assistant talking about a trip,
/// a pet and a recipe. Source ids are `s<session>:<turn>`.
pub fn sample_conversation(space: &str) -> Vec<NewEvidence> {
    type Session<'a> = (&'a str, i64, &'a [(&'a str, &'a str)]);
    let sessions: [Session<'_>; 2] = [
        (
            "session-1",
            1_683_554_160_000,
            &[
                (
                    "Ana",
                    "I just got back from a hiking trip in the Dolomites.",
                ),
                ("Ben", "That sounds amazing. How long were you there?"),
                (
                    "Ana",
                    "Ten days. The weather was perfect for the high trails.",
                ),
                ("Ben", "My dog Biscuit would have loved that."),
                (
                    "Ana",
                    "Bring Biscuit next time! Is he still afraid of water?",
                ),
                ("Ben", "Yes, he refuses to swim even in summer."),
            ],
        ),
        (
            "session-2",
            1_684_763_760_000,
            &[
                ("Ben", "I tried baking sourdough bread this weekend."),
                ("Ana", "How did the starter behave?"),
                (
                    "Ben",
                    "It took four days to become active, then it doubled nicely.",
                ),
                ("Ana", "Next I want to plan a sailing trip to Croatia."),
            ],
        ),
    ];
    let mut out = Vec::new();
    for (s, (context, time, turns)) in sessions.iter().enumerate() {
        for (t, (actor, text)) in turns.iter().enumerate() {
            out.push(NewEvidence {
                space: space.to_owned(),
                context: (*context).to_owned(),
                session_id: (*context).to_owned(),
                actor: (*actor).to_owned(),
                event_time_ms: time + t as i64 * 60_000,
                turn_order: t as i64,
                text: (*text).to_owned(),
                source_id: format!("s{}:{}", s + 1, t + 1),
                source_offset: out.len() as i64,
            });
        }
    }
    out
}

mod conflicts;
mod ledger;
mod recall;
mod semantic;
mod views;

pub use conflicts::*;
pub use ledger::*;
pub use recall::*;
pub use semantic::*;
pub use views::*;
