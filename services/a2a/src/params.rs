//! Typed params of every method: the one place a request's params are decoded (v0.3
//! params are converted first), used by the router and by the `a2a_jsonrpc` fuzz target.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::jsonrpc::{Method, Version};
use crate::types::{
    GetTaskRequest, ListPushConfigsRequest, ListTasksRequest, PushConfigRef, SendMessageRequest,
    TaskIdRequest, TaskPushNotificationConfig,
};

#[derive(Debug, Clone, PartialEq)]
pub enum Params {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(TaskIdRequest),
    SubscribeToTask(TaskIdRequest),
    CreatePushConfig(TaskPushNotificationConfig),
    GetPushConfig(PushConfigRef),
    ListPushConfigs(ListPushConfigsRequest),
    DeletePushConfig(PushConfigRef),
    GetExtendedAgentCard,
}

fn typed<T: DeserializeOwned>(params: Map<String, Value>) -> Result<T> {
    serde_json::from_value(Value::Object(params)).map_err(|e| Error::InvalidParams(e.to_string()))
}

impl Params {
    /// Decodes `params` of `method` as sent in `version` (-32602 when they do not fit).
    pub fn decode(method: Method, version: Version, params: Map<String, Value>) -> Result<Self> {
        let params = match version {
            Version::V03 => crate::v03::params_in(method, params),
            Version::V1 => params,
        };
        Ok(match method {
            Method::SendMessage => Self::SendMessage(typed(params)?),
            Method::SendStreamingMessage => Self::SendStreamingMessage(typed(params)?),
            Method::GetTask => Self::GetTask(typed(params)?),
            Method::ListTasks => Self::ListTasks(typed(params)?),
            Method::CancelTask => Self::CancelTask(typed(params)?),
            Method::SubscribeToTask => Self::SubscribeToTask(typed(params)?),
            Method::CreatePushConfig => Self::CreatePushConfig(typed(params)?),
            Method::GetPushConfig => Self::GetPushConfig(typed(params)?),
            Method::ListPushConfigs => Self::ListPushConfigs(typed(params)?),
            Method::DeletePushConfig => Self::DeletePushConfig(typed(params)?),
            Method::GetExtendedAgentCard => Self::GetExtendedAgentCard,
        })
    }

    /// The v1.0 params object (what [`Self::decode`] reads back to the same value).
    pub fn to_value(&self) -> Value {
        let value = match self {
            Self::SendMessage(p) | Self::SendStreamingMessage(p) => serde_json::to_value(p),
            Self::GetTask(p) => serde_json::to_value(p),
            Self::ListTasks(p) => serde_json::to_value(p),
            Self::CancelTask(p) | Self::SubscribeToTask(p) => serde_json::to_value(p),
            Self::CreatePushConfig(p) => serde_json::to_value(p),
            Self::GetPushConfig(p) | Self::DeletePushConfig(p) => serde_json::to_value(p),
            Self::ListPushConfigs(p) => serde_json::to_value(p),
            Self::GetExtendedAgentCard => Ok(Value::Object(Map::new())),
        };
        value.unwrap_or(Value::Null)
    }
}
