//! `lumina-backend doctor`: what this host and these settings allow, checked without
//! starting anything — the shell's confinement level first (docs/sandbox.md), then the
//! AppRoot, the settings, the model and the local embedding model.

use std::path::{Path, PathBuf};

use lumina_config::{AppRoot, Env, Settings};
use lumina_embed::{LOCAL_MODEL_DIR, LOCAL_MODEL_FILES};
use lumina_protocol::{Confinement, ConfinementLevel};
use lumina_tools::ConfinementMode;
use serde::Serialize;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Works, with a limitation the operator should know.
    Warn,
    /// Serving would fail or be unsafe.
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub confinement: Confinement,
    pub checks: Vec<Check>,
}

impl Report {
    /// No check failed.
    pub fn healthy(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// The human form: one line per check, the confinement's missing layers indented.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for check in &self.checks {
            let tag = match check.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            out.push_str(&format!("{tag} {}: {}\n", check.name, check.detail));
            if check.name == "shell confinement" {
                for line in &self.confinement.missing {
                    out.push_str(&format!("       missing: {line}\n"));
                }
            }
        }
        out
    }
}

/// Runs every check for the AppRoot and the project directory `project_root`.
pub fn diagnose(app_root: &AppRoot, project_root: &Path, env: &Env) -> Report {
    let confinement = lumina_sandbox::probe().clone();
    let settings = lumina_config::load(app_root, Some(project_root), env, &Default::default());
    let mut checks = Vec::new();

    let mode = settings
        .as_ref()
        .ok()
        .map(|s| lumina_runtime::settings::shell_confinement(s, app_root).mode);
    checks.push(confinement_check(&confinement, mode));
    if let Some(mode) = mode {
        checks.push(shell_mode_check(mode, app_root, project_root));
    }
    checks.push(app_root_check(app_root));
    match &settings {
        Ok(settings) => {
            checks.push(Check {
                name: "settings",
                status: if settings.warnings.is_empty() {
                    Status::Ok
                } else {
                    Status::Warn
                },
                detail: if !settings.warnings.is_empty() {
                    settings.warnings.join("; ")
                } else if app_root.settings_file().is_file() {
                    format!("loaded from {}", app_root.settings_file().display())
                } else {
                    format!(
                        "defaults and environment (no {})",
                        app_root.settings_file().display()
                    )
                },
            });
            checks.push(model_check(settings));
        }
        Err(e) => checks.push(Check {
            name: "settings",
            status: Status::Fail,
            detail: e.to_string(),
        }),
    }
    checks.push(embedding_model_check(app_root));
    Report {
        confinement,
        checks,
    }
}

fn confinement_check(c: &Confinement, mode: Option<ConfinementMode>) -> Check {
    let layers = format!(
        "landlock ABI {}, seccomp {}, network namespace {}, rlimits {}, processes bounded by {}",
        c.landlock_abi,
        yes_no(c.seccomp),
        yes_no(c.network_namespace),
        yes_no(c.rlimits),
        c.process_limit
    );
    let status = match (&c.level, mode) {
        (ConfinementLevel::Full, _) => Status::Ok,
        (ConfinementLevel::None, Some(ConfinementMode::Required)) => Status::Fail,
        _ => Status::Warn,
    };
    Check {
        name: "shell confinement",
        status,
        detail: format!("{} ({layers})", c.level),
    }
}

fn shell_mode_check(mode: ConfinementMode, app_root: &AppRoot, project_root: &Path) -> Check {
    let inside = project_root
        .canonicalize()
        .ok()
        .zip(app_root.path().canonicalize().ok())
        .is_some_and(|(project, root)| root.starts_with(project));
    let (status, detail) = match mode {
        ConfinementMode::Off => (
            Status::Warn,
            "off: shell commands run unconfined (shell_confinement = off)".to_string(),
        ),
        _ if inside => (
            Status::Warn,
            format!(
                "{}: {} contains the AppRoot, so shell commands of sessions in it are refused",
                mode_name(mode),
                project_root.display()
            ),
        ),
        _ => (Status::Ok, mode_name(mode).to_string()),
    };
    Check {
        name: "shell_confinement",
        status,
        detail,
    }
}

fn mode_name(mode: ConfinementMode) -> &'static str {
    match mode {
        ConfinementMode::Required => {
            "required (commands are refused where they cannot be confined)"
        }
        ConfinementMode::BestEffort => "auto (confined as far as this host allows)",
        ConfinementMode::Off => "off",
    }
}

fn app_root_check(app_root: &AppRoot) -> Check {
    let path = app_root.path();
    let (status, detail) = if !path.exists() {
        (
            Status::Warn,
            format!("{} does not exist yet (serve creates it)", path.display()),
        )
    } else {
        match tempfile::tempfile_in(path) {
            Ok(_) => (Status::Ok, format!("{} is writable", path.display())),
            Err(e) => (
                Status::Fail,
                format!("{} is not writable: {e}", path.display()),
            ),
        }
    };
    Check {
        name: "app root",
        status,
        detail,
    }
}

fn model_check(settings: &Settings) -> Check {
    match settings.model_endpoints() {
        Ok(models) => Check {
            name: "model",
            status: Status::Ok,
            detail: format!(
                "{} at {}{}",
                models.primary.model,
                models.primary.base_url,
                if models.fallback.is_some() {
                    ", with a fallback"
                } else {
                    ""
                }
            ),
        },
        Err(missing) => Check {
            name: "model",
            status: Status::Warn,
            detail: missing.to_string(),
        },
    }
}

fn embedding_model_check(app_root: &AppRoot) -> Check {
    let dir: PathBuf = app_root.models_dir().join(LOCAL_MODEL_DIR);
    let installed = LOCAL_MODEL_FILES.iter().all(|f| dir.join(f).is_file());
    Check {
        name: "local embedding model",
        status: if installed { Status::Ok } else { Status::Warn },
        detail: if installed {
            format!("installed in {}", dir.display())
        } else {
            "not installed; memory recall is lexical (lumina-backend memory install-model)"
                .to_string()
        },
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Probes the confinement at start-up (so `hello` never waits for it) and logs what is
/// missing; in the cluster profile a host that cannot confine means every shell command is
/// refused.
pub fn log_confinement(cluster: bool) {
    let c = lumina_sandbox::probe();
    if c.level == ConfinementLevel::None && cluster {
        tracing::error!(missing = ?c.missing, "shell confinement unavailable: shell commands will be refused");
    } else if c.missing.is_empty() {
        tracing::info!(level = %c.level, "shell confinement");
    } else {
        tracing::warn!(level = %c.level, missing = ?c.missing, "shell confinement is incomplete");
    }
}

/// `lumina-backend doctor`: prints the report (text, or JSON with `json`) and fails when a
/// check failed.
pub fn run(app_root: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let env = Env::from_process();
    let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
    let project_root = std::env::current_dir()?;
    let report = diagnose(&app_root, &project_root, &env);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    if report.healthy() {
        Ok(())
    } else {
        anyhow::bail!("doctor found a failing check")
    }
}
