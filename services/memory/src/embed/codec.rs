//! What an index build stores per event ([`VectorRow`], built by [`vector_rows`]) and the
//! byte forms of an [`Encoding`](super::Encoding)'s extras in SQLite blobs and PostgreSQL `bytea`
//! (`sql/postgres/0004_memory_vectors_extra.sql`):
//! - learned sparse weights (SQLite): little-endian pairs (u32 vocabulary id, f32 weight);
//! - token vectors (and, in SQLite, span vectors): a little-endian u16 dimension count,
//!   then every vector's values quantized to i8 (value × 127, rounded; the vectors are unit
//!   length, so every value is in [-1, 1]). MaxSim over i8 vectors differs from f32 by well
//!   under 1 % of a score.

use super::EmbeddingProvider;
use crate::{Error, Evidence, Result};

/// One event's row of vectors in an index generation, as both stores write and read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorRow {
    /// The event the vectors belong to.
    pub event_id: u64,
    /// The event's dense vector.
    pub dense: Vec<f32>,
    /// Learned sparse weights, when the model has them.
    pub sparse: Option<Vec<(u32, f32)>>,
    /// Token vectors, when the model has them.
    pub tokens: Option<Quantized>,
    /// Dense vectors of the event's spans, when it has more than one span and the index
    /// embeds spans.
    pub spans: Option<Quantized>,
}

/// Encodes the events of an index batch (each as `derive::embedding_text`) into the rows
/// to store; with `spans`, also the spans of events that have several
/// (`derive::span_texts`), as dense vectors. No rows without a model.
pub async fn vector_rows(
    embedder: Option<&dyn EmbeddingProvider>,
    events: Vec<&Evidence>,
    spans: bool,
) -> Result<Vec<VectorRow>> {
    let Some(embedder) = embedder else {
        return Ok(Vec::new());
    };
    let texts: Vec<String> = events
        .iter()
        .map(|e| crate::derive::embedding_text(e))
        .collect();
    let encoded = embedder.encode(&texts).await?;
    check_count(encoded.len(), texts.len())?;
    let span_texts: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            if spans {
                crate::derive::span_texts(e)
            } else {
                Vec::new()
            }
        })
        .collect();
    let flat: Vec<String> = span_texts.iter().flatten().cloned().collect();
    let mut span_vectors = if flat.is_empty() {
        Vec::new()
    } else {
        embedder.embed(&flat).await?
    };
    check_count(span_vectors.len(), flat.len())?;
    let outputs = embedder.outputs();
    let mut rows = Vec::with_capacity(events.len());
    for ((e, encoding), own) in events.iter().zip(encoded).zip(&span_texts) {
        let mine: Vec<Vec<f32>> = span_vectors.drain(..own.len()).map(unit).collect();
        rows.push(VectorRow {
            event_id: e.event_id,
            sparse: outputs.sparse.then_some(encoding.sparse),
            tokens: outputs
                .multivector
                .then(|| Quantized::from_vectors(&encoding.tokens)),
            spans: (!mine.is_empty()).then(|| Quantized::from_vectors(&mine)),
            dense: encoding.dense,
        });
    }
    Ok(rows)
}

fn check_count(got: usize, sent: usize) -> Result<()> {
    if got == sent {
        return Ok(());
    }
    Err(Error::Embedding(format!(
        "the model returned {got} encodings for {sent} texts"
    )))
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Unit vectors (token or span vectors) as kept in memory: `dims` i8 values each,
/// value ≈ x × 127.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quantized {
    /// Dimensions of each vector.
    pub dims: usize,
    /// The vectors' values, `dims` per vector.
    pub data: Vec<i8>,
}

/// The scale of a quantized value.
pub const SCALE: f32 = 127.0;

impl Quantized {
    /// Quantizes unit vectors of equal length (others are skipped).
    pub fn from_vectors(tokens: &[Vec<f32>]) -> Self {
        let dims = tokens.first().map_or(0, Vec::len);
        let data = tokens
            .iter()
            .filter(|t| t.len() == dims)
            .flat_map(|t| {
                t.iter()
                    .map(|x| (x * SCALE).round().clamp(-127.0, 127.0) as i8)
            })
            .collect();
        Self { dims, data }
    }

    /// Number of token vectors.
    pub fn count(&self) -> usize {
        self.data.len().checked_div(self.dims).unwrap_or(0)
    }

    /// The stored bytes (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let dims = u16::try_from(self.dims).unwrap_or(0);
        let mut out = dims.to_le_bytes().to_vec();
        if dims > 0 {
            out.extend(self.data.iter().map(|&v| v as u8));
        }
        out
    }

    /// Reads stored bytes back.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        if b.len() < 2 {
            return Err(Error::Corrupt("quantized vectors without a header".into()));
        }
        let dims = usize::from(u16::from_le_bytes([b[0], b[1]]));
        let data: Vec<i8> = b[2..].iter().map(|&v| v as i8).collect();
        if (dims == 0 && !data.is_empty()) || (dims > 0 && !data.len().is_multiple_of(dims)) {
            return Err(Error::Corrupt(format!(
                "quantized vectors of {} values are not a multiple of {dims} dimensions",
                data.len()
            )));
        }
        Ok(Self { dims, data })
    }

    /// The vectors back as f32 (value / 127).
    pub fn vectors(&self) -> Vec<Vec<f32>> {
        if self.dims == 0 {
            return Vec::new();
        }
        self.data
            .chunks_exact(self.dims)
            .map(|c| c.iter().map(|&v| f32::from(v) / SCALE).collect())
            .collect()
    }
}

/// Learned sparse weights as stored (see the module docs).
pub fn sparse_bytes(weights: &[(u32, f32)]) -> Vec<u8> {
    weights
        .iter()
        .flat_map(|(id, w)| id.to_le_bytes().into_iter().chain(w.to_le_bytes()))
        .collect()
}

/// Reads stored learned sparse weights back.
pub fn decode_sparse(b: &[u8]) -> Result<Vec<(u32, f32)>> {
    if !b.len().is_multiple_of(8) {
        return Err(Error::Corrupt(format!(
            "sparse weights of {} bytes (not pairs of u32 and f32)",
            b.len()
        )));
    }
    Ok(b.chunks_exact(8)
        .map(|c| {
            (
                u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect())
}

/// Derived data that does not decode is skipped with a warning (a rebuild restores it):
/// `None` for an error.
pub fn or_skip<T>(event_id: u64, decoded: Result<T>) -> Option<T> {
    decoded
        .map_err(|err| tracing::warn!(event_id, error = %err, "skipping stored vectors"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_forms_round_trip_and_reject_corrupt_bytes() {
        let sparse = vec![(3, 0.5), (70_000, 1.25)];
        let tokens = Quantized::from_vectors(&[vec![0.6, 0.8], vec![-1.0, 0.0]]);
        assert_eq!(decode_sparse(&sparse_bytes(&sparse)).unwrap(), sparse);
        let q = Quantized::from_bytes(&tokens.to_bytes()).unwrap();
        assert_eq!((q.dims, q.count()), (2, 2));
        assert_eq!(q.data, vec![76, 102, -127, 0]);
        assert!(decode_sparse(&[1, 2, 3]).is_err());
        assert!(Quantized::from_bytes(&[3, 0, 1, 2]).is_err());
        assert!(Quantized::from_bytes(&[1]).is_err());
    }
}
