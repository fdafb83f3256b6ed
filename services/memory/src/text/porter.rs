//! The Porter (1980) English stemmer, written out here so the analyzer has no dependency
//! whose upgrade could silently change index terms (the analyzer version is part of the
//! retrieval fingerprint). Works on lowercase ASCII words; anything else is returned as is.

/// Stems a lowercase word. Words of one or two letters and non-ASCII words are unchanged.
pub fn stem(word: &str) -> String {
    if word.len() <= 2 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    let mut s = Stemmer {
        b: word.as_bytes().to_vec(),
        j: 0,
    };
    s.step1ab();
    if s.b.len() > 1 {
        s.step1c();
        s.step2();
        s.step3();
        s.step4();
        s.step5();
    }
    // Only ASCII bytes were ever written, so this cannot fail; fall back to the input anyway.
    String::from_utf8(s.b).unwrap_or_else(|_| word.to_owned())
}

struct Stemmer {
    b: Vec<u8>,
    /// End (exclusive) of the stem that precedes the suffix being examined.
    j: usize,
}

impl Stemmer {
    /// Whether the letter at `i` is a consonant ("y" after a consonant is a vowel).
    fn cons(&self, i: usize) -> bool {
        match self.b[i] {
            b'a' | b'e' | b'i' | b'o' | b'u' => false,
            b'y' => i == 0 || !self.cons(i - 1),
            _ => true,
        }
    }

    /// m(), the number of vowel-consonant sequences in `b[..self.j]`.
    fn m(&self) -> usize {
        let end = self.j;
        let mut n = 0;
        let mut i = 0;
        while i < end && self.cons(i) {
            i += 1;
        }
        loop {
            while i < end && !self.cons(i) {
                i += 1;
            }
            if i >= end {
                return n;
            }
            while i < end && self.cons(i) {
                i += 1;
            }
            n += 1;
            if i >= end {
                return n;
            }
        }
    }

    /// Whether `b[..self.j]` contains a vowel.
    fn vowel_in_stem(&self) -> bool {
        (0..self.j).any(|i| !self.cons(i))
    }

    /// Whether `b[..=i]` ends in a double consonant.
    fn doublec(&self, i: usize) -> bool {
        i >= 1 && self.b[i] == self.b[i - 1] && self.cons(i)
    }

    /// Whether `b[..=i]` ends consonant-vowel-consonant with the last not w, x or y.
    fn cvc(&self, i: usize) -> bool {
        if i < 2 || !self.cons(i) || self.cons(i - 1) || !self.cons(i - 2) {
            return false;
        }
        !matches!(self.b[i], b'w' | b'x' | b'y')
    }

    /// Whether the word ends with `suffix`; sets `j` to the start of the suffix if so.
    fn ends(&mut self, suffix: &str) -> bool {
        let s = suffix.as_bytes();
        if s.len() > self.b.len() || !self.b.ends_with(s) {
            return false;
        }
        self.j = self.b.len() - s.len();
        true
    }

    /// Replaces the suffix after `j` with `to`.
    fn set_to(&mut self, to: &str) {
        self.b.truncate(self.j);
        self.b.extend_from_slice(to.as_bytes());
    }

    /// Replaces the suffix when m() > 0.
    fn r(&mut self, to: &str) {
        if self.m() > 0 {
            self.set_to(to);
        }
    }

    fn step1ab(&mut self) {
        if self.b.last() == Some(&b's') {
            if self.ends("sses") {
                self.set_to("ss");
            } else if self.ends("ies") {
                self.set_to("i");
            } else if self.b.len() >= 2 && self.b[self.b.len() - 2] != b's' {
                self.b.pop();
            }
        }
        if self.ends("eed") {
            if self.m() > 0 {
                self.b.pop();
            }
        } else if (self.ends("ed") || self.ends("ing")) && self.vowel_in_stem() {
            self.b.truncate(self.j);
            if self.ends("at") {
                self.set_to("ate");
            } else if self.ends("bl") {
                self.set_to("ble");
            } else if self.ends("iz") {
                self.set_to("ize");
            } else if self.doublec(self.b.len() - 1) {
                let last = self.b[self.b.len() - 1];
                if !matches!(last, b'l' | b's' | b'z') {
                    self.b.pop();
                }
            } else {
                self.j = self.b.len();
                if self.m() == 1 && self.cvc(self.b.len() - 1) {
                    self.b.push(b'e');
                }
            }
        }
    }

    fn step1c(&mut self) {
        if self.ends("y") && self.vowel_in_stem() {
            let last = self.b.len() - 1;
            self.b[last] = b'i';
        }
    }

    fn step2(&mut self) {
        const RULES: &[(&str, &str)] = &[
            ("ational", "ate"),
            ("tional", "tion"),
            ("enci", "ence"),
            ("anci", "ance"),
            ("izer", "ize"),
            ("bli", "ble"),
            ("alli", "al"),
            ("entli", "ent"),
            ("eli", "e"),
            ("ousli", "ous"),
            ("ization", "ize"),
            ("ation", "ate"),
            ("ator", "ate"),
            ("alism", "al"),
            ("iveness", "ive"),
            ("fulness", "ful"),
            ("ousness", "ous"),
            ("aliti", "al"),
            ("iviti", "ive"),
            ("biliti", "ble"),
            ("logi", "log"),
        ];
        self.apply(RULES);
    }

    fn step3(&mut self) {
        const RULES: &[(&str, &str)] = &[
            ("icate", "ic"),
            ("ative", ""),
            ("alize", "al"),
            ("iciti", "ic"),
            ("ical", "ic"),
            ("ful", ""),
            ("ness", ""),
        ];
        self.apply(RULES);
    }

    /// The first rule whose suffix matches decides (replaced only when m() > 0).
    fn apply(&mut self, rules: &[(&str, &str)]) {
        for (from, to) in rules {
            if self.ends(from) {
                self.r(to);
                return;
            }
        }
    }

    fn step4(&mut self) {
        const SUFFIXES: &[&str] = &[
            "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
            "ou", "ism", "ate", "iti", "ous", "ive", "ize",
        ];
        for suffix in SUFFIXES {
            if self.ends(suffix) {
                if *suffix == "ion" && !(self.j > 0 && matches!(self.b[self.j - 1], b's' | b't')) {
                    return;
                }
                if self.m() > 1 {
                    self.b.truncate(self.j);
                }
                return;
            }
        }
    }

    fn step5(&mut self) {
        self.j = self.b.len();
        if self.b.last() == Some(&b'e') {
            self.j = self.b.len() - 1;
            let a = self.m();
            if a > 1 || (a == 1 && !self.cvc(self.b.len() - 2)) {
                self.b.pop();
            }
        }
        self.j = self.b.len();
        if self.b.last() == Some(&b'l') && self.doublec(self.b.len() - 1) && self.m() > 1 {
            self.b.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stem;

    #[test]
    fn classic_examples() {
        let cases = [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("generalization", "gener"),
            ("hopeful", "hope"),
            ("goodness", "good"),
            ("adjustment", "adjust"),
            ("adoption", "adopt"),
            ("controll", "control"),
            ("painting", "paint"),
            ("painted", "paint"),
            ("paints", "paint"),
            ("running", "run"),
            ("adopted", "adopt"),
            ("camping", "camp"),
        ];
        for (word, expected) in cases {
            assert_eq!(stem(word), expected, "stem({word})");
        }
    }

    #[test]
    fn leaves_short_and_non_ascii_words() {
        assert_eq!(stem("is"), "is");
        assert_eq!(stem("café"), "café");
        assert_eq!(stem("2023"), "2023");
    }
}
