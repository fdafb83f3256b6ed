//! Read views of spaces ([`Snapshot`]s), cached per store instance: one per space, for the
//! published generation, the space's indexed ledger position and its semantic revision.
//!
//! - **Incremental refresh.** When only the indexed position moved (every turn appends
//!   evidence, so after every turn), the store loads the ledger rows after the cached
//!   position with their vectors and edges, and [`Snapshot::extend`] adds them: only they
//!   are read and analyzed (the rest is passes over the view's integers: renumbering, the
//!   CSR graph). Another generation, a later semantic revision, or new rows that do not
//!   continue the cached position (count or chain hash) rebuild the view.
//! - **Single flight.** At most one load or refresh of a space's view runs at a time per
//!   cache: a recall arriving meanwhile waits for it and uses its result (or refreshes
//!   from it, when it needs a later position), as `build::align` answers a query with
//!   what is published while another builder works. A view at a later position or
//!   revision than a recall asked for is used as it is. The revision is read before the
//!   space's lock, so a recall that finds its view current holds the lock only to copy it.
//!
//! A refreshed view is updated in place when no recall still reads it, else copied first;
//! the CPU work runs on tokio's blocking pool. (A recall dropped while it refreshes a view
//! leaves none cached: the next one builds it.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::snapshot::{Rows, Snapshot};
use super::RetrievalOptions;
use crate::semantic::overlay::Overlay;
use crate::{Error, LedgerHead, Result, ViewLoad};

/// What a store loads for its read views.
#[async_trait]
pub trait ViewSource: Send + Sync {
    /// What the store keeps beside each view (the PostgreSQL store's full-text
    /// statistics; `()` for none).
    type Extra: Clone + Send + Sync + 'static;

    /// The space's semantic revision (`CompileState::revision`: it only increases).
    async fn revision(&self, space: &str) -> Result<u64>;
    /// What the space's semantic nodes add to the view.
    async fn overlay(&self, space: &str) -> Result<Overlay>;
    /// The space's ledger rows with `after < event_id <= until`, with their vectors and
    /// graph edges in `generation` ([`Rows`] has the order of each).
    async fn rows(&self, generation: u64, space: &str, after: u64, until: u64) -> Result<Rows>;
    /// The extra state of a view of `generation` holding the rows up to `until`. On a
    /// refresh, `previous` is the refreshed view's, with the event ids of the rows the
    /// refresh added and of those whose windows it recomputed (ascending); `None` on a
    /// build.
    async fn extra(
        &self,
        generation: u64,
        space: &str,
        until: u64,
        previous: Option<(&Self::Extra, &[u64])>,
    ) -> Result<Self::Extra>;
}

/// A space's read view and what it holds.
#[derive(Debug, Clone)]
pub struct View<X> {
    /// The index generation.
    pub generation: u64,
    /// The space's indexed position in it: the view holds the rows up to here.
    pub indexed: LedgerHead,
    /// The space's semantic revision.
    pub revision: u64,
    /// The view.
    pub snap: Arc<Snapshot>,
    /// The store's extra state.
    pub extra: X,
}

/// A view as one recall got it.
#[derive(Debug, Clone)]
pub struct Loaded<X> {
    /// The view.
    pub view: View<X>,
    /// From the cache, refreshed or built.
    pub load: ViewLoad,
    /// Ledger rows loaded for it.
    pub rows: u64,
}

type Slot<X> = Arc<tokio::sync::Mutex<Option<View<X>>>>;

/// The views of one store instance.
pub struct ViewCache<X> {
    window: usize,
    options: RetrievalOptions,
    spaces: Mutex<HashMap<String, Slot<X>>>,
}

impl<X> std::fmt::Debug for ViewCache<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewCache")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl<X: Clone + Send + Sync + 'static> ViewCache<X> {
    /// An empty cache; `window` is the index option, `options` the store's query options.
    pub fn new(window: usize, options: RetrievalOptions) -> Self {
        Self {
            window,
            options,
            spaces: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets every view (e.g. when a new generation is published).
    pub fn clear(&self) {
        self.spaces
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The view of `space` in `generation` holding at least the rows up to `indexed`:
    /// the cached one, refreshed with the rows after it, or built.
    pub async fn view<S>(
        &self,
        source: &S,
        space: &str,
        generation: u64,
        indexed: &LedgerHead,
    ) -> Result<Loaded<X>>
    where
        S: ViewSource<Extra = X> + ?Sized,
    {
        let slot = Arc::clone(
            self.spaces
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(space.to_owned())
                .or_default(),
        );
        let revision = source.revision(space).await?;
        let mut guard = slot.lock_owned().await;
        let until = indexed.last_event_id;
        let same = |v: &&View<X>| v.generation == generation && v.revision >= revision;
        if let Some(cached) = guard.as_ref().filter(same) {
            if cached.indexed.last_event_id >= until {
                return Ok(Loaded {
                    view: cached.clone(),
                    load: ViewLoad::Cached,
                    rows: 0,
                });
            }
        }
        if let Some(at) = guard.as_ref().filter(same).map(|v| v.indexed.clone()) {
            let rows = source
                .rows(generation, space, at.last_event_id, until)
                .await?;
            let count = rows.rows.len() as u64;
            let continues = at.rows + count == indexed.rows
                && rows.rows.last().map(|r| r.chain.as_str()) == Some(indexed.chain.as_str());
            let refreshed = if continues { guard.take() } else { None };
            if let Some(mut view) = refreshed {
                let (options, started) = (self.options.clone(), std::time::Instant::now());
                let (view, changed) = blocking(move || {
                    let changed = Arc::make_mut(&mut view.snap).extend(rows, &options);
                    (view, changed)
                })
                .await?;
                let extra = source
                    .extra(generation, space, until, Some((&view.extra, &changed)))
                    .await?;
                let view = View {
                    indexed: indexed.clone(),
                    extra,
                    ..view
                };
                *guard = Some(view.clone());
                tracing::debug!(
                    space,
                    rows = count,
                    docs = view.snap.docs.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "memory view refreshed"
                );
                return Ok(Loaded {
                    view,
                    load: ViewLoad::Refreshed,
                    rows: count,
                });
            }
            tracing::warn!(
                space,
                cached = at.rows,
                loaded = count,
                indexed = indexed.rows,
                "memory view: the new rows do not continue the cached view, rebuilding it"
            );
        }
        let overlay = source.overlay(space).await?;
        let rows = source.rows(generation, space, 0, until).await?;
        let extra = source.extra(generation, space, until, None).await?;
        let count = rows.rows.len() as u64;
        let (window, options) = (self.window, self.options.clone());
        let snap = blocking(move || Snapshot::build(rows, overlay, window, &options)).await?;
        let view = View {
            generation,
            indexed: indexed.clone(),
            revision,
            snap: Arc::new(snap),
            extra,
        };
        *guard = Some(view.clone());
        Ok(Loaded {
            view,
            load: ViewLoad::Built,
            rows: count,
        })
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Unavailable(format!("memory worker failed: {e}")))
}
