//! The stored forms of an [`Encoding`]'s extras, the same bytes in SQLite blobs and
//! PostgreSQL `bytea` (`sql/postgres/0004_memory_vectors_extra.sql`):
//! - learned sparse weights: little-endian pairs (u32 vocabulary id, f32 weight);
//! - token vectors: a little-endian u16 dimension count, then every vector's values
//!   quantized to i8 (value × 127, rounded; the vectors are unit length, so every value is
//!   in [-1, 1]). MaxSim over i8 vectors differs from f32 by well under 1 % of a score.

use super::{EmbeddingProvider, Encoding};
use crate::{Error, Evidence, Result};

/// One event's row of vectors in an index generation, as both stores write and read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct VectorRow {
    pub event_id: u64,
    pub dense: Vec<f32>,
    /// Learned sparse weights, when the model has them (see the module docs).
    pub sparse: Option<Vec<u8>>,
    /// Token vectors, when the model has them (see the module docs).
    pub tokens: Option<Vec<u8>>,
    /// Dense vectors of the event's spans (same bytes as token vectors), when it has more
    /// than one span and the index embeds spans.
    pub spans: Option<Vec<u8>>,
}

/// Encodes the events of an index batch (each as `derive::embedding_text`) into the rows
/// to store; with `spans`, also the spans of events that have several
/// (`derive::span_texts`), as dense vectors. No rows without a model.
pub(crate) async fn vector_rows(
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
        let (sparse, tokens) = encode_extras(&encoding, outputs);
        let mine: Vec<Vec<f32>> = span_vectors.drain(..own.len()).map(unit).collect();
        rows.push(VectorRow {
            event_id: e.event_id,
            dense: encoding.dense,
            sparse,
            tokens,
            spans: (!mine.is_empty()).then(|| quantized_bytes(&mine)),
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

/// Unit vectors of equal length as stored (see the module docs).
pub(crate) fn quantized_bytes(vectors: &[Vec<f32>]) -> Vec<u8> {
    let q = Quantized::from_vectors(vectors);
    let dims = u16::try_from(q.dims).unwrap_or(0);
    let mut out = dims.to_le_bytes().to_vec();
    if dims > 0 {
        out.extend(q.data.iter().map(|&v| v as u8));
    }
    out
}

/// Token vectors as kept in memory: `dims` i8 values per token, value ≈ x × 127.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Quantized {
    pub dims: usize,
    pub data: Vec<i8>,
}

/// The scale of a quantized value.
pub(crate) const SCALE: f32 = 127.0;

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

/// The stored extras of one event: `None` for what the model does not produce.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extras {
    pub sparse: Option<Vec<(u32, f32)>>,
    pub tokens: Option<Quantized>,
}

/// What to store for `encoding` given the model's outputs: (sparse bytes, token bytes).
pub(crate) fn encode_extras(
    encoding: &Encoding,
    outputs: super::Outputs,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let sparse = outputs.sparse.then(|| sparse_bytes(&encoding.sparse));
    let tokens = outputs
        .multivector
        .then(|| quantized_bytes(&encoding.tokens));
    (sparse, tokens)
}

/// Reads stored extras back.
pub(crate) fn decode_extras(sparse: Option<&[u8]>, tokens: Option<&[u8]>) -> Result<Extras> {
    Ok(Extras {
        sparse: sparse.map(decode_sparse).transpose()?,
        tokens: tokens.map(decode_quantized).transpose()?,
    })
}

/// Learned sparse weights as stored (see the module docs).
pub(crate) fn sparse_bytes(weights: &[(u32, f32)]) -> Vec<u8> {
    weights
        .iter()
        .flat_map(|(id, w)| id.to_le_bytes().into_iter().chain(w.to_le_bytes()))
        .collect()
}

/// Reads stored learned sparse weights back.
pub(crate) fn decode_sparse(b: &[u8]) -> Result<Vec<(u32, f32)>> {
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

/// Reads quantized vectors (token or span vectors) back.
pub(crate) fn decode_quantized(b: &[u8]) -> Result<Quantized> {
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
    Ok(Quantized { dims, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::Outputs;

    #[test]
    fn extras_round_trip_and_reject_corrupt_bytes() {
        let s = 0.6f32;
        let e = Encoding {
            dense: vec![1.0],
            sparse: vec![(3, 0.5), (70_000, 1.25)],
            tokens: vec![vec![s, 0.8], vec![-1.0, 0.0]],
        };
        let all = Outputs {
            sparse: true,
            multivector: true,
        };
        let (sp, tk) = encode_extras(&e, all);
        let back = decode_extras(sp.as_deref(), tk.as_deref()).unwrap();
        assert_eq!(back.sparse.unwrap(), e.sparse);
        let q = back.tokens.unwrap();
        assert_eq!((q.dims, q.count()), (2, 2));
        assert_eq!(q.data, vec![76, 102, -127, 0]);
        assert_eq!(encode_extras(&e, Outputs::default()), (None, None));
        assert!(decode_extras(Some(&[1, 2, 3]), None).is_err());
        assert!(decode_extras(None, Some(&[3, 0, 1, 2])).is_err());
        assert!(decode_extras(None, Some(&[1])).is_err());
    }
}
