//! A description of a view that does not depend on how it was built — term ids, the layout
//! of quantized vectors and the order of hash maps are left out, floats are compared
//! bit for bit — for tests comparing a refreshed view with a built one.

use std::collections::{BTreeMap, HashMap};

use super::Snapshot;

impl Snapshot {
    /// One line per part of the view.
    pub(super) fn canonical(&self) -> Vec<String> {
        let names: HashMap<u32, &str> = self.vocab.iter().map(|(t, &i)| (i, t.as_str())).collect();
        let name = |t: &u32| names.get(t).copied().unwrap_or("?");
        let tf = |entries: &mut dyn Iterator<Item = (&u32, &u32)>| -> Vec<(String, u32)> {
            let mut out: Vec<(String, u32)> =
                entries.map(|(t, f)| (name(t).to_owned(), *f)).collect();
            out.sort();
            out
        };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut out = Vec::new();
        for (i, d) in self.docs.iter().enumerate() {
            let doc = i as u32;
            let mut terms: Vec<&str> = d.terms.iter().map(name).collect();
            terms.sort_unstable();
            let spans: Vec<((usize, usize), Vec<&str>)> = d
                .spans
                .iter()
                .map(|(range, ids)| (*range, ids.iter().map(name).collect()))
                .collect();
            out.push(format!(
                "doc {i}: event {} context {} turn {} tokens {} body {:?} (len {}) terms {terms:?} \
                 window {:?} (len {}) spans {spans:?}",
                d.evidence.event_id,
                d.evidence.row.context,
                d.evidence.row.turn_order,
                d.tokens,
                tf(&mut d.body_tf.iter().map(|(t, f)| (t, f))),
                self.body.len[i],
                tf(&mut d.window_tf.iter()),
                self.window.len[i],
            ));
            out.push(format!(
                "doc {i} vectors: dense {:?} tokens {:?} spans {:?}",
                self.vector(doc).map(bits),
                self.tokens.of(doc),
                self.spans.of(doc),
            ));
        }
        let by_event: BTreeMap<u64, u32> = self.by_event.iter().map(|(&e, &d)| (e, d)).collect();
        out.push(format!("by event {by_event:?}"));
        let mut vocab: Vec<&str> = self.vocab.keys().map(String::as_str).collect();
        vocab.sort_unstable();
        out.push(format!("vocab {vocab:?}"));
        for (label, field) in [("body", &self.body), ("window", &self.window)] {
            let postings: BTreeMap<&str, &Vec<(u32, u32)>> =
                field.postings.iter().map(|(t, l)| (name(t), l)).collect();
            out.push(format!("{label} postings {postings:?}"));
            out.push(format!(
                "{label} avg {} total {} lens {:?}",
                field.avg_len.to_bits(),
                field.total,
                field.len
            ));
        }
        let df: BTreeMap<&str, u32> = self.any_df.iter().map(|(t, &n)| (name(t), n)).collect();
        out.push(format!("any df {df:?}"));
        let learned: BTreeMap<u32, Vec<(u32, u32)>> = self
            .learned
            .iter()
            .map(|(&id, l)| (id, l.iter().map(|&(d, w)| (d, w.to_bits())).collect()))
            .collect();
        out.push(format!("learned {learned:?} dims {}", self.dims));
        let g = &self.graph;
        out.push(format!("graph offsets {:?}", g.offsets));
        out.push(format!("graph targets {:?}", g.targets));
        out.push(format!("graph weights {:?}", bits(&g.weights)));
        out.push(format!("graph degree {:?}", bits(&g.degree)));
        let mut conflicts: Vec<u64> = self.conflicts.keys().copied().collect();
        conflicts.sort_unstable();
        out.push(format!("conflicts {conflicts:?}"));
        out
    }
}
