//! Terminal progress (indicatif). Hidden when disabled, e.g. in tests or when the output
//! is not a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// One progress bar (or spinner when the total is unknown).
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar counting to `total`; drawn only when `enabled`.
    pub fn new(enabled: bool, total: u64, label: &str) -> Progress {
        if !enabled {
            return Progress {
                bar: ProgressBar::hidden(),
            };
        }
        let bar = ProgressBar::new(total);
        let style = ProgressStyle::with_template(
            "{prefix:>16} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar }
    }

    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    pub fn set_position(&self, n: u64) {
        self.bar.set_position(n);
    }

    pub fn message(&self, text: String) {
        self.bar.set_message(text);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
