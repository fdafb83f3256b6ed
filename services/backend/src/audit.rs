//! The approvals audit (docs/audit.md): `audit.list` over the journal store, the tenant
//! check every caller goes through, and `lumina-backend audit export` (JSON lines).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use lumina_journal::{AuditCursor, AuditQuery, AuditRecord, JournalStore};
use lumina_protocol::methods::{AuditEntry, AuditListParams, AuditListResult, Identity};
use lumina_protocol::{Decision, ErrorCode, ErrorObject};

/// `audit.list`'s default page size.
const DEFAULT_LIMIT: u32 = 100;
/// `audit.list`'s largest page.
const MAX_LIMIT: u32 = 1000;

/// Refuses an `audit.list` naming another tenant than the caller's: an admin sees its own
/// tenant only. Checked by the dispatcher before the profile serves the method.
pub fn check_tenant(identity: &Identity, params: &serde_json::Value) -> Result<(), ErrorObject> {
    match params.get("tenant").and_then(|t| t.as_str()) {
        Some(tenant) if tenant != identity.tenant => Err(ErrorObject::new(
            ErrorCode::Forbidden,
            format!(
                "this token's tenant is `{}`: it cannot list the audit of `{tenant}`",
                identity.tenant
            ),
        )),
        _ => Ok(()),
    }
}

/// `audit.list` for `tenant` (the caller's; see [`check_tenant`]).
pub async fn list(
    store: &dyn JournalStore,
    tenant: &str,
    p: AuditListParams,
) -> Result<AuditListResult, ErrorObject> {
    let after = match &p.cursor {
        Some(text) => Some(AuditCursor::parse(text).ok_or_else(|| {
            ErrorObject::new(
                ErrorCode::InvalidParams,
                "invalid params: `cursor` is not a cursor of audit.list",
            )
        })?),
        None => None,
    };
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize;
    let query = AuditQuery {
        session_id: p.session_id,
        since_ms: p.since_ms,
        until_ms: p.until_ms,
        after,
        limit,
    };
    let records = store
        .list_audit(tenant, &query)
        .await
        .map_err(|e| lumina_runtime::Error::from(e).to_error_object())?;
    let next_cursor = (records.len() == limit)
        .then(|| records.last().map(|r| r.cursor().encode()))
        .flatten();
    let records = records.into_iter().map(entry).collect::<Result<_, _>>()?;
    Ok(AuditListResult {
        records,
        next_cursor,
    })
}

/// A stored record on the wire.
fn entry(record: AuditRecord) -> Result<AuditEntry, ErrorObject> {
    let decision = match record.decision.as_str() {
        "allow_once" => Decision::AllowOnce,
        "allow_session" => Decision::AllowSession,
        "deny" => Decision::Deny,
        other => {
            return Err(ErrorObject::new(
                ErrorCode::Internal,
                format!(
                    "audit record {}:{} has an unknown decision `{other}`",
                    record.session_id, record.seq
                ),
            ))
        }
    };
    Ok(AuditEntry {
        tenant: record.tenant,
        session_id: record.session_id,
        seq: record.seq,
        ts_ms: record.ts_ms,
        run_id: record.run_id,
        request_id: record.request_id,
        tool: record.tool,
        args_hash: record.args_hash,
        preview: record.preview,
        decision,
        by: record.by,
        sub: record.sub,
        reason: record.reason,
    })
}

/// `lumina-backend audit`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Write the approvals audit as JSON lines (one `audit.list` record per line, newest
    /// first): the local profile's from the AppRoot, or a cluster tenant's from PostgreSQL.
    Export(ExportArgs),
}

/// `lumina-backend audit export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// AppRoot of the local profile (default: $LUMINA_HOME or ~/.lumina).
    #[arg(long)]
    pub app_root: Option<PathBuf>,
    /// Read a cluster's PostgreSQL instead of the AppRoot (needs --tenant).
    #[arg(long, requires = "tenant")]
    pub postgres_url: Option<String>,
    /// The cluster tenant to export.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only decisions at or after this time (unix ms).
    #[arg(long)]
    pub since: Option<i64>,
    /// Only decisions before this time (unix ms).
    #[arg(long)]
    pub until: Option<i64>,
    /// Only this session's decisions.
    #[arg(long)]
    pub session: Option<String>,
    /// Write here instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// Runs `lumina-backend audit …`.
pub async fn run(command: AuditCommand) -> anyhow::Result<()> {
    match command {
        AuditCommand::Export(args) => export(args).await,
    }
}

async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let (store, tenant): (Box<dyn JournalStore>, String) = match &args.postgres_url {
        Some(url) => {
            let store = lumina_journal::postgres::PgJournal::connect(url, 2)
                .context("--postgres-url: cannot connect to PostgreSQL")?;
            let tenant = args
                .tenant
                .clone()
                .context("--postgres-url needs --tenant")?;
            (Box::new(store), tenant)
        }
        None => {
            let env = lumina_config::Env::from_process();
            let app_root = lumina_config::AppRoot::resolve(args.app_root.as_deref(), &env)?;
            let tenant = crate::auth::LOCAL_TENANT.to_string();
            let store =
                lumina_journal::sqlite::SqliteJournal::open(app_root.sessions_dir(), &tenant)
                    .context("cannot open the local sessions")?;
            (Box::new(store), tenant)
        }
    };
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut query = AuditQuery {
        session_id: args.session.clone(),
        since_ms: args.since,
        until_ms: args.until,
        after: None,
        limit: MAX_LIMIT as usize,
    };
    let mut written = 0usize;
    loop {
        let page = store.list_audit(&tenant, &query).await?;
        let Some(last) = page.last() else { break };
        query.after = Some(last.cursor());
        let full = page.len() == query.limit;
        for record in page {
            let entry = entry(record).map_err(|e| anyhow::anyhow!(e.message))?;
            serde_json::to_writer(&mut out, &entry)?;
            out.write_all(b"\n")?;
            written += 1;
        }
        if !full {
            break;
        }
    }
    out.flush()?;
    tracing::info!(records = written, "audit exported");
    Ok(())
}
