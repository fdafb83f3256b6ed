//! The team commands of the connection task: `/Team` (the picker's list, enter, enter and
//! run a task), `/TeamOut` (leave), `/NewTeam` (create). The list comes back to the picker;
//! other results and errors come back as notices.

use lumina_client::protocol::methods::{
    SessionCreateParams, TeamCreateParams, TeamEnterParams, TeamExitParams, TeamListParams,
};

use super::{Conn, Lost};
use crate::ui::app::{ConnEvent, TeamTask};

impl Conn {
    pub(super) async fn team_list(&mut self) -> Result<(), Lost> {
        // The project's teams come with the session's project, or before a session is open
        // with the project this UI was started in.
        let params = TeamListParams {
            session_id: self.session.as_ref().map(|s| s.id.clone()),
            project_root: Some(self.project_root.clone()),
        };
        match self.client.calls().team_list(&params).await {
            Ok(list) => {
                self.send(ConnEvent::Teams(list.teams));
                Ok(())
            }
            Err(error) => Self::classify(error)
                .map(|error| self.failed(None, format!("/Team failed: {error}"))),
        }
    }

    /// Enters `team` (creating the session first when none is open), then submits `task`.
    pub(super) async fn team_enter(
        &mut self,
        team: &str,
        task: Option<TeamTask>,
    ) -> Result<(), Lost> {
        let request_id = task.as_ref().map(|t| t.request_id.clone());
        if self.session.is_none() {
            let params = SessionCreateParams {
                project_root: Some(self.project_root.clone()),
                title: Some(format!("team {team}")),
            };
            match self.client.session_create(&params).await {
                Ok(info) => self.subscribe(info).await?,
                Err(error) => {
                    let error = Self::classify(error)?;
                    self.failed(request_id, format!("cannot create a session: {error}"));
                    return Ok(());
                }
            }
        }
        let Some(session) = &self.session else {
            return Ok(());
        };
        let params = TeamEnterParams {
            session_id: session.id.clone(),
            team: team.to_string(),
        };
        match self.client.calls().team_enter(&params).await {
            Ok(entered) => {
                let members: Vec<&str> = entered
                    .members
                    .iter()
                    .filter(|m| **m != entered.entry_agent)
                    .map(String::as_str)
                    .collect();
                self.send(ConnEvent::Notice(format!(
                    "working as the team {} ({}): your prompts go to its leader `{}`; members: {}; /TeamOut leaves it",
                    entered.display_name,
                    entered.team,
                    entered.entry_agent,
                    members.join(", ")
                )));
                match task {
                    Some(task) => {
                        self.submit(task.request_id, &task.prompt, task.settings)
                            .await
                    }
                    None => Ok(()),
                }
            }
            Err(error) => Self::classify(error).map(|error| {
                self.failed(
                    request_id,
                    format!("cannot enter the team `{team}`: {error}"),
                )
            }),
        }
    }

    pub(super) async fn team_exit(&mut self) -> Result<(), Lost> {
        let Some(session) = &self.session else {
            self.send(ConnEvent::Notice(
                "no session: there is no team to leave".into(),
            ));
            return Ok(());
        };
        let params = TeamExitParams {
            session_id: session.id.clone(),
        };
        match self.client.calls().team_exit(&params).await {
            Ok(exited) => {
                let text = match exited.team_run_id {
                    Some(_) => "left the team: the session works as one agent again",
                    None => "the session is in no team",
                };
                self.send(ConnEvent::Notice(text.into()));
                Ok(())
            }
            Err(error) => Self::classify(error)
                .map(|error| self.failed(None, format!("/TeamOut failed: {error}"))),
        }
    }

    pub(super) async fn team_create(&mut self, name: &str, display_name: &str) -> Result<(), Lost> {
        let params = TeamCreateParams {
            name: name.to_string(),
            display_name: display_name.to_string(),
        };
        match self.client.calls().team_create(&params).await {
            Ok(created) => {
                self.send(ConnEvent::Notice(format!(
                    "created the team `{}` in {}: edit its team.yaml and agents/, then /Team {}",
                    created.name, created.path, created.name
                )));
                Ok(())
            }
            Err(error) => Self::classify(error)
                .map(|error| self.failed(None, format!("/NewTeam failed: {error}"))),
        }
    }
}
