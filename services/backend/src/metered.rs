//! A `JournalStore` decorator that measures append latency and counts fenced writes.

use std::sync::Arc;

use async_trait::async_trait;
use lumina_journal::{
    AppendBatch, Error, Fence, JournalStore, Result, SessionKey, SessionRecord, StoredEvent,
};
use serde_json::Value;

use crate::metrics::Metrics;

pub struct MeteredStore {
    inner: Arc<dyn JournalStore>,
    metrics: Metrics,
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn JournalStore>, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }

    fn count<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(Error::Fenced {
            presented,
            recorded,
        }) = &result
        {
            self.metrics.fenced_writes_refused.inc();
            tracing::warn!(presented, recorded, "fenced write refused");
        }
        result
    }
}

#[async_trait]
impl JournalStore for MeteredStore {
    async fn create_session(&self, record: &SessionRecord, fence: Fence) -> Result<()> {
        self.count(self.inner.create_session(record, fence).await)
    }
    async fn session(&self, tenant: &str, session_id: &str) -> Result<Option<SessionRecord>> {
        self.inner.session(tenant, session_id).await
    }
    async fn list_sessions(
        &self,
        tenant: &str,
        include_archived: bool,
    ) -> Result<Vec<SessionRecord>> {
        self.inner.list_sessions(tenant, include_archived).await
    }
    async fn append(
        &self,
        session: &SessionKey,
        fence: Fence,
        batch: AppendBatch,
    ) -> Result<Vec<StoredEvent>> {
        let timer = self.metrics.journal_append_latency.start_timer();
        let result = self.inner.append(session, fence, batch).await;
        timer.observe_duration();
        self.count(result)
    }
    async fn read(
        &self,
        session: &SessionKey,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        self.inner.read(session, after_seq, limit).await
    }
    async fn read_stream(
        &self,
        session: &SessionKey,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        self.inner.read_stream(session, stream, after, limit).await
    }
    async fn head(&self, session: &SessionKey) -> Result<u64> {
        self.inner.head(session).await
    }
    async fn heads(&self, tenant: &str, session_ids: &[String]) -> Result<Vec<(String, u64)>> {
        self.inner.heads(tenant, session_ids).await
    }
    async fn command_result(&self, session: &SessionKey, key: &str) -> Result<Option<Value>> {
        self.inner.command_result(session, key).await
    }
    async fn put_blob(&self, session: &SessionKey, fence: Fence, bytes: &[u8]) -> Result<String> {
        self.count(self.inner.put_blob(session, fence, bytes).await)
    }
    async fn get_blob(&self, session: &SessionKey, sha256: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get_blob(session, sha256).await
    }
    async fn consumer_offset(&self, session: &SessionKey, consumer: &str) -> Result<u64> {
        self.inner.consumer_offset(session, consumer).await
    }
    async fn set_consumer_offset(
        &self,
        session: &SessionKey,
        fence: Fence,
        consumer: &str,
        offset: u64,
    ) -> Result<()> {
        self.count(
            self.inner
                .set_consumer_offset(session, fence, consumer, offset)
                .await,
        )
    }
    async fn put_summary(&self, session: &SessionKey, fence: Fence, summary: &Value) -> Result<()> {
        self.count(self.inner.put_summary(session, fence, summary).await)
    }
    async fn archive(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.count(self.inner.archive(session, fence).await)
    }
    async fn claim(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.count(self.inner.claim(session, fence).await)
    }
    async fn list_audit(
        &self,
        tenant: &str,
        query: &lumina_journal::AuditQuery,
    ) -> Result<Vec<lumina_journal::AuditRecord>> {
        self.inner.list_audit(tenant, query).await
    }
    async fn fence(&self, session: &SessionKey) -> Result<Fence> {
        self.inner.fence(session).await
    }
}
