//! Shared PostgreSQL plumbing: error mapping, integer conversions, URL redaction, the
//! writer fence check and ledger row decoding.

use tokio_postgres::{GenericClient, Row};

use lumina_memory::build::LedgerRow;
use lumina_memory::{Error, Evidence, NewEvidence, Result};

/// Maps driver errors to [`Error::Unavailable`] with what was being done. The driver's
/// messages never contain the connection URL.
pub(crate) trait PgResultExt<T> {
    fn pg(self, what: &str) -> Result<T>;
}

impl<T> PgResultExt<T> for std::result::Result<T, tokio_postgres::Error> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| {
            let detail = e
                .as_db_error()
                .map(|d| format!("{} ({})", d.message(), d.code().code()))
                .unwrap_or_else(|| e.to_string());
            Error::Unavailable(format!("postgres: {what}: {detail}"))
        })
    }
}

impl<T> PgResultExt<T> for std::result::Result<T, deadpool_postgres::PoolError> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| Error::Unavailable(format!("postgres: {what}: {e}")))
    }
}

/// A URL with its password (if any) replaced by `***`, for messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparseable url>".to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            let masked = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{masked}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

/// A contract integer (event id, generation, row count) as a BIGINT.
pub(crate) fn to_int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Invalid(format!("{what} {value} is out of range")))
}

/// A BIGINT as a contract integer.
pub(crate) fn from_int(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("negative {what} {value}")))
}

/// Takes the space's writer fence row lock for the rest of the transaction and checks
/// the writer's fence against it: an older fence is refused with [`Error::Fenced`], a
/// newer one is recorded. The lock also serializes the space's ledger writers (its hash
/// chain) across instances.
pub(crate) async fn check_fence(
    tx: &impl GenericClient,
    tenant: &str,
    space: &str,
    fence: u64,
) -> Result<()> {
    let value = to_int(fence, "fence")?;
    tx.execute(
        "INSERT INTO memory_fences (tenant, space, fence) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant, space) DO NOTHING",
        &[&tenant, &space, &value],
    )
    .await
    .pg("record fence")?;
    let current: i64 = tx
        .query_one(
            "SELECT fence FROM memory_fences WHERE tenant = $1 AND space = $2 FOR UPDATE",
            &[&tenant, &space],
        )
        .await
        .pg("lock fence")?
        .try_get(0)
        .pg("read fence")?;
    if current > value {
        return Err(Error::Fenced {
            space: space.to_owned(),
            fence,
            current: from_int(current, "fence")?,
        });
    }
    if current < value {
        tx.execute(
            "UPDATE memory_fences SET fence = $3 WHERE tenant = $1 AND space = $2",
            &[&tenant, &space, &value],
        )
        .await
        .pg("advance fence")?;
    }
    Ok(())
}

/// The ledger columns [`ledger_row`] decodes, in order.
pub(crate) const COLUMNS: &str = "event_id, space, context, session_id, actor, event_time_ms, \
                                  turn_order, text, source_id, source_offset, checksum, chain";

/// Decodes a row selected with [`COLUMNS`].
pub(crate) fn ledger_row(r: &Row) -> Result<LedgerRow> {
    let get = |e: tokio_postgres::Error| Error::Corrupt(format!("ledger row: {e}"));
    Ok(LedgerRow {
        evidence: Evidence {
            event_id: from_int(r.try_get(0).map_err(get)?, "event id")?,
            row: NewEvidence {
                space: r.try_get(1).map_err(get)?,
                context: r.try_get(2).map_err(get)?,
                session_id: r.try_get(3).map_err(get)?,
                actor: r.try_get(4).map_err(get)?,
                event_time_ms: r.try_get(5).map_err(get)?,
                turn_order: r.try_get(6).map_err(get)?,
                text: r.try_get(7).map_err(get)?,
                source_id: r.try_get(8).map_err(get)?,
                source_offset: r.try_get(9).map_err(get)?,
            },
            checksum: r.try_get(10).map_err(get)?,
        },
        chain: r.try_get(11).map_err(get)?,
    })
}

/// A vector in pgvector's text form (`[1,2,3]`).
pub(crate) fn vector_text(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
    format!("[{}]", parts.join(","))
}

/// Parses pgvector's text form.
pub(crate) fn parse_vector(text: &str) -> Result<Vec<f32>> {
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| Error::Corrupt("vector text without brackets".into()))?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<f32>()
                .map_err(|_| Error::Corrupt(format!("vector component {x:?}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("nonsense"), "<unparseable url>");
    }

    #[test]
    fn vectors_round_trip_as_text() {
        let v = vec![1.0, -0.5, 0.25];
        assert_eq!(parse_vector(&vector_text(&v)).unwrap(), v);
        assert!(parse_vector("1,2").is_err());
    }
}
