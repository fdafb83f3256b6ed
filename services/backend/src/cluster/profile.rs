//! The cluster instance as a server [`Profile`]: JWT authentication, routing by the method
//! table, subscriptions from PostgreSQL, drain and readiness.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use lumina_protocol::methods::{DrainResult, Identity, SessionResumeParams};
use lumina_protocol::{ErrorObject, Method};
use serde_json::Value;

use super::Node;
use crate::execute::Reply;
use crate::profile::{Profile, Subscription};

/// [`Profile`] over a [`Node`].
pub struct ClusterProfile(pub Arc<Node>);

#[async_trait]
impl Profile for ClusterProfile {
    async fn authenticate(&self, headers: &HeaderMap) -> Option<(Identity, Option<i64>)> {
        self.0.authenticate(headers).await
    }

    async fn call(&self, identity: &Identity, method: Method, params: Value) -> Reply {
        self.0.route(identity, method, params).await
    }

    async fn subscribe(
        &self,
        identity: &Identity,
        params: &SessionResumeParams,
    ) -> Result<Subscription, ErrorObject> {
        self.0.subscribe(identity, params).await
    }

    async fn drain(&self) -> Result<DrainResult, ErrorObject> {
        self.0.drain().await
    }

    fn shutdown(&self) {
        self.0.begin_shutdown();
    }

    async fn readiness(&self) -> (bool, Value) {
        self.0.readiness().await
    }

    fn sync_metrics(&self) {
        self.0.sync_metrics();
    }
}
