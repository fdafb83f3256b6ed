//! The window field of the full-text index and each doc's window length: each event's
//! neighbouring turns (up to `window` on each side within its context). Inserting an event
//! changes the windows of its neighbours, so every batch recomputes exactly those.

use std::collections::BTreeSet;

use rusqlite::{params, Transaction};

use super::db::DbResultExt;
use super::index::table;
use lumina_memory::Result;

/// One doc's neighbours in context order: up to `w` before and after `(turn_order, id)`.
fn neighbours(
    tx: &Transaction<'_>,
    g: u64,
    space: &str,
    context: &str,
    key: (i64, i64),
    w: usize,
) -> Result<Vec<(i64, i64, String, String)>> {
    let docs = table(g, "docs");
    let mut out = Vec::new();
    for (cmp, order) in [("<", "DESC"), (">", "ASC")] {
        let mut stmt = tx
            .prepare_cached(&format!(
                "SELECT event_id, turn_order, terms, body FROM {docs} WHERE space = ?1 AND \
                 context = ?2 AND (turn_order, event_id) {cmp} (?3, ?4) \
                 ORDER BY turn_order {order}, event_id {order} LIMIT ?5"
            ))
            .db("prepare neighbours")?;
        let rows = stmt
            .query_map(params![space, context, key.0, key.1, w as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .db("read neighbours")?;
        for r in rows {
            out.push(r.db("neighbour row")?);
        }
    }
    Ok(out)
}

/// Recomputes the window field of every doc whose `w` neighbours on either side changed
/// because of the newly inserted docs `(context, turn_order, event_id)`.
pub(super) fn refresh_windows(
    tx: &Transaction<'_>,
    g: u64,
    space: &str,
    inserted: &BTreeSet<(String, i64, i64)>,
    w: usize,
) -> Result<()> {
    if w == 0 {
        return Ok(());
    }
    let mut affected: BTreeSet<(String, i64, i64)> = inserted.clone();
    for (context, order, id) in inserted {
        for (nid, norder, _, _) in neighbours(tx, g, space, context, (*order, *id), w)? {
            affected.insert((context.clone(), norder, nid));
        }
    }
    for (context, order, id) in &affected {
        let around = neighbours(tx, g, space, context, (*order, *id), w)?;
        let terms: Vec<&str> = around
            .iter()
            .flat_map(|(_, _, t, _)| t.split(' ').filter(|s| !s.is_empty()))
            .collect();
        let window_text = around
            .iter()
            .map(|(_, _, _, body)| body.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        tx.execute(
            &format!(
                "UPDATE {} SET window = ?1 WHERE rowid = ?2",
                table(g, "fts")
            ),
            params![window_text, id],
        )
        .db("update window text")?;
        tx.execute(
            &format!(
                "UPDATE {} SET window_len = ?1 WHERE event_id = ?2",
                table(g, "docs")
            ),
            params![terms.len() as i64, id],
        )
        .db("update window length")?;
    }
    Ok(())
}
