//! `ListTasks` (filters, cursor pages) and the push-notification config methods.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::error::{Error, Result};
use crate::http::Principal;
use crate::service::{check_history_length, trim_history, A2aService};
use crate::types::{
    ListPushConfigsRequest, ListPushConfigsResponse, ListTasksRequest, ListTasksResponse,
    PushConfigRef, TaskPushNotificationConfig, TaskState,
};

pub const DEFAULT_PAGE_SIZE: i32 = 50;
pub const MAX_PAGE_SIZE: i32 = 100;

/// Where a page starts: after the task with this update time and id (newest first).
fn encode_cursor(updated: i64, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{updated}:{id}"))
}

fn decode_cursor(token: &str) -> Result<(i64, String)> {
    let invalid = || Error::InvalidParams("pageToken is not one this server issued".into());
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (updated, id) = text.split_once(':').ok_or_else(invalid)?;
    Ok((updated.parse().map_err(|_| invalid())?, id.to_owned()))
}

fn page_size(requested: Option<i32>) -> Result<usize> {
    match requested {
        None | Some(0) => Ok(DEFAULT_PAGE_SIZE as usize),
        Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => Ok(n as usize),
        Some(n) => Err(Error::InvalidParams(format!(
            "pageSize must be between 1 and {MAX_PAGE_SIZE} (got {n})"
        ))),
    }
}

impl A2aService {
    /// `ListTasks`: the caller's tasks, newest-updated first.
    pub async fn list_tasks(
        &self,
        principal: &Principal,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse> {
        let owner = principal.owner.as_str();
        let size = page_size(request.page_size)?;
        let history_length = check_history_length(request.history_length)?;
        let after = match request.status_timestamp_after.as_deref() {
            None | Some("") => None,
            Some(text) => Some(crate::time::parse_micros(text).ok_or_else(|| {
                Error::InvalidParams(format!(
                    "statusTimestampAfter is not an RFC 3339 time: {text}"
                ))
            })?),
        };
        let cursor = match request.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => Some(decode_cursor(token)?),
        };
        let status = request.status.filter(|s| *s != TaskState::Unspecified);
        let mut records = self
            .store()
            .list(
                owner,
                request.context_id.as_deref().filter(|c| !c.is_empty()),
            )
            .await?;
        records.retain(|r| {
            status.is_none_or(|s| r.task.status.state == s)
                && after.is_none_or(|after| {
                    r.task
                        .status
                        .timestamp
                        .as_deref()
                        .and_then(crate::time::parse_micros)
                        .is_some_and(|t| t > after)
                })
        });
        records.sort_by(|a, b| {
            b.updated_micros
                .cmp(&a.updated_micros)
                .then_with(|| b.task.id.cmp(&a.task.id))
        });
        let total = records.len();
        let start = match &cursor {
            None => 0,
            Some((updated, id)) => records
                .iter()
                .position(|r| (r.updated_micros, r.task.id.as_str()) < (*updated, id.as_str()))
                .unwrap_or(total),
        };
        let page: Vec<_> = records.iter().skip(start).take(size).collect();
        let next_page_token = match page.last() {
            Some(last) if start + page.len() < total => {
                encode_cursor(last.updated_micros, &last.task.id)
            }
            _ => String::new(),
        };
        let include_artifacts = request.include_artifacts.unwrap_or(false);
        let tasks = page
            .into_iter()
            .map(|r| {
                let mut task = trim_history(r.task.clone(), history_length);
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        Ok(ListTasksResponse {
            tasks,
            next_page_token,
            page_size: size as i32,
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
        })
    }

    fn require_push(&self) -> Result<()> {
        if self.shared.push.is_none() {
            return Err(Error::PushNotificationNotSupported);
        }
        Ok(())
    }

    /// `CreateTaskPushNotificationConfig`.
    pub async fn create_push_config(
        &self,
        principal: &Principal,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig> {
        self.require_push()?;
        let owner = principal.owner.as_str();
        let task_id = config
            .task_id
            .clone()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::InvalidParams("taskId is required".into()))?;
        self.load(owner, &task_id).await?;
        save_push_config(self, owner, config).await
    }

    /// `GetTaskPushNotificationConfig`.
    pub async fn get_push_config(
        &self,
        principal: &Principal,
        request: PushConfigRef,
    ) -> Result<TaskPushNotificationConfig> {
        self.require_push()?;
        let owner = principal.owner.as_str();
        self.load(owner, &request.task_id).await?;
        self.store()
            .push_configs(owner, &request.task_id)
            .await?
            .into_iter()
            .find(|c| c.id.as_deref() == Some(request.id.as_str()))
            .ok_or_else(|| {
                Error::TaskNotFound(format!(
                    "push notification config {} of task {}",
                    request.id, request.task_id
                ))
            })
    }

    /// `ListTaskPushNotificationConfigs` (one page: configs per task are few).
    pub async fn list_push_configs(
        &self,
        principal: &Principal,
        request: ListPushConfigsRequest,
    ) -> Result<ListPushConfigsResponse> {
        self.require_push()?;
        let owner = principal.owner.as_str();
        self.load(owner, &request.task_id).await?;
        let configs = self.store().push_configs(owner, &request.task_id).await?;
        Ok(ListPushConfigsResponse {
            configs,
            next_page_token: String::new(),
        })
    }

    /// `DeleteTaskPushNotificationConfig`; deleting a config that is already gone is not
    /// an error (idempotent), an unknown task is.
    pub async fn delete_push_config(
        &self,
        principal: &Principal,
        request: PushConfigRef,
    ) -> Result<()> {
        self.require_push()?;
        let owner = principal.owner.as_str();
        self.load(owner, &request.task_id).await?;
        self.store()
            .delete_push_config(owner, &request.task_id, &request.id)
            .await?;
        Ok(())
    }
}

/// Vets the webhook URL (the SSRF guard) and stores the config with an id.
pub(crate) async fn save_push_config(
    service: &A2aService,
    owner: &str,
    mut config: TaskPushNotificationConfig,
) -> Result<TaskPushNotificationConfig> {
    let push = service
        .shared
        .push
        .as_ref()
        .ok_or(Error::PushNotificationNotSupported)?;
    push.vet_static(&config.url)
        .map_err(|why| Error::InvalidParams(format!("webhook url refused: {why}")))?;
    if config.id.as_deref().is_none_or(str::is_empty) {
        config.id = Some(uuid::Uuid::new_v4().to_string());
    }
    config.tenant = None;
    service.store().save_push_config(owner, &config).await?;
    Ok(config)
}
