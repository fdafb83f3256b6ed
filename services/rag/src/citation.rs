//! Citations: `[path#chunk-N]`, the project-relative path of a file and the 1-based index
//! of one of its chunks. Every search hit carries one; [`crate::Rag::resolve`] turns it
//! back into the stored chunk, whose span locates it in the file (or, for HTML, PDF and
//! .docx, in the file's extracted text).

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A parsed `[path#chunk-N]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Citation {
    /// The file, relative to the project root, `/`-separated.
    pub path: String,
    /// The 1-based chunk index.
    pub chunk: u32,
}

impl Citation {
    /// The citation of chunk `chunk` of `path`.
    pub fn new(path: impl Into<String>, chunk: u32) -> Self {
        Self {
            path: path.into(),
            chunk,
        }
    }
}

impl fmt::Display for Citation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}#chunk-{}]", self.path, self.chunk)
    }
}

impl FromStr for Citation {
    type Err = Error;

    /// Parses `[path#chunk-N]` (the brackets optional). The last `#chunk-` separates the
    /// path, so a path may itself contain `#`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::Invalid(format!("`{s}` is not a citation like [path#chunk-N]"));
        let inner = s.trim();
        let inner = inner
            .strip_prefix('[')
            .and_then(|i| i.strip_suffix(']'))
            .unwrap_or(inner);
        let (path, n) = inner.rsplit_once("#chunk-").ok_or_else(bad)?;
        let chunk: u32 = n.parse().map_err(|_| bad())?;
        if path.is_empty() || chunk == 0 {
            return Err(bad());
        }
        Ok(Self::new(path, chunk))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn round_trips() {
        let c = Citation::new("docs/a#b.md", 12);
        assert_eq!(c.to_string(), "[docs/a#b.md#chunk-12]");
        assert_eq!(c.to_string().parse::<Citation>().unwrap(), c);
        assert_eq!(
            "x.txt#chunk-1".parse::<Citation>().unwrap(),
            Citation::new("x.txt", 1)
        );
        for bad in [
            "",
            "[x.txt]",
            "[x.txt#chunk-0]",
            "[#chunk-1]",
            "[x#chunk-a]",
            "[x#chunk--1]",
        ] {
            assert!(bad.parse::<Citation>().is_err(), "{bad}");
        }
    }
}
