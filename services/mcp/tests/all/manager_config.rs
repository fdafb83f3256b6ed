//! Configuration files, `${VAR}` errors and project-server trust, through the manager.

use anyhow::Result;
use lumina_mcp::config::{self, ConfigError, ServerSource};
use lumina_mcp::{ExpandError, ServerState, TrustStore};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{self, Env};

#[tokio::test(flavor = "multi_thread")]
async fn project_servers_connect_only_once_trusted_and_again_after_a_change() -> Result<()> {
    let env = Env::new()?;
    let def = support::everything_stdio(&[], json!({}))?;
    env.write_project_config(&json!({"mcpServers": {"proj": def}}))?;
    let manager = env.manager();

    assert!(manager.tools(&env.project).await.is_empty());
    let status = support::status_of(&manager, &env.project, "proj").await?;
    assert_eq!(
        (status.state, status.source),
        (ServerState::Untrusted, ServerSource::Project)
    );
    assert_eq!(
        manager.server_pid(&env.project, "proj"),
        None,
        "never started"
    );

    manager.trust(&env.project, "proj")?;
    let tools = manager.tools(&env.project).await;
    support::find_tool(&tools, "mcp__proj__echo")?;
    assert_eq!(
        support::status_of(&manager, &env.project, "proj")
            .await?
            .state,
        ServerState::Connected
    );

    // A changed definition is a different server: untrusted again, and disconnected.
    let changed = support::everything_stdio(&["--changed"], json!({}))?;
    env.write_project_config(&json!({"mcpServers": {"proj": changed}}))?;
    assert!(manager.tools(&env.project).await.is_empty());
    assert_eq!(
        support::status_of(&manager, &env.project, "proj")
            .await?
            .state,
        ServerState::Untrusted
    );
    let loaded = config::load(&env.project, &env.app_root);
    assert_eq!(
        TrustStore::new(env.app_root.clone()).untrusted(&env.project, &loaded.servers),
        ["proj"]
    );

    manager.trust(&env.project, "proj")?;
    assert!(!manager.tools(&env.project).await.is_empty());
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn project_wins_over_user_and_user_servers_need_no_trust() -> Result<()> {
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {
        "shared": {"command": "user-cmd"},
        "mine": {"command": "mine-cmd", "disabled": true},
    }}))?;
    env.write_project_config(&json!({"mcpServers": {"shared": {"command": "project-cmd"}}}))?;
    let manager = env.manager();
    let status = manager.status(&env.project).await;
    let rows: Vec<_> = status
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.source,
                s.state.clone(),
                s.target.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "mine",
                ServerSource::User,
                ServerState::Disabled,
                "mine-cmd"
            ),
            (
                "shared",
                ServerSource::Project,
                ServerState::Untrusted,
                "project-cmd"
            ),
        ]
    );
    assert!(manager.trust(&env.project, "nope").is_err());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_json_names_the_file_and_spares_the_other_file() -> Result<()> {
    let env = Env::new()?;
    support::write(&env.app_root.config_dir().join("mcp.json"), "{ not json")?;
    env.write_project_config(&json!({"mcpServers": {
        "ok": {"command": "x"},
        "bad name": {"command": "x"},
        "bad-def": {"command": 1},
    }}))?;
    let manager = env.manager();
    let errors = manager.config_errors(&env.project).await;
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0].contains("invalid JSON") && errors[0].contains("config/mcp.json"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains(".mcp.json") && errors[1].contains("`bad name`"),
        "{errors:?}"
    );
    assert!(
        errors[2].contains("`bad-def`") && errors[2].contains("`command` must be a string"),
        "{errors:?}"
    );
    let names: Vec<_> = manager
        .status(&env.project)
        .await
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["ok"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unset_variable_fails_the_server_naming_the_variable_only() -> Result<()> {
    std::env::set_var("LUMINA_MCP_TEST_SET_SECRET", "hunter2-secret");
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer ${LUMINA_MCP_TEST_SET_SECRET}", "X-Other": "${LUMINA_MCP_TEST_NEVER_SET}"},
    }}}))?;
    let manager = env.manager();
    assert!(manager.tools(&env.project).await.is_empty());
    let status = support::status_of(&manager, &env.project, "remote").await?;
    let ServerState::Failed(reason) = &status.state else {
        panic!("{status:?}")
    };
    assert!(reason.contains("LUMINA_MCP_TEST_NEVER_SET"), "{reason}");
    assert!(!format!("{status:?}").contains("hunter2"), "{status:?}");

    let loaded = config::load(&env.project, &env.app_root);
    let err = loaded.servers[0]
        .def
        .resolve("remote", &env.project, &|n| std::env::var(n).ok())
        .expect_err("an error");
    assert_eq!(
        err,
        ConfigError::Expand {
            server: "remote".into(),
            source: ExpandError::Unset("LUMINA_MCP_TEST_NEVER_SET".into()),
        }
    );
    assert!(!err.to_string().contains("hunter2"));
    Ok(())
}
