//! The crate's error type: every way a browser operation can fail, worded for the model
//! (the tools show `Display` as the tool's error output).

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No Chromium to start: none configured and none on `PATH`.
    #[error(
        "no Chromium found: set the `browser_executable` setting (or LUMINA_BROWSER_EXECUTABLE) \
         to a Chromium or Chrome binary, or install one on PATH (Debian: apt-get install chromium)"
    )]
    NoExecutable,

    /// The configured executable does not exist or cannot be run.
    #[error("cannot start the browser `{path}` (from the `browser_executable` setting or PATH): {source}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Chromium started but never said where its DevTools endpoint is.
    #[error("the browser `{path}` did not start: {detail}")]
    Start { path: PathBuf, detail: String },

    /// The temporary profile directory could not be created.
    #[error("cannot create the browser's temporary profile: {0}")]
    Profile(#[source] std::io::Error),

    /// The browser's SOCKS5 proxy could not listen on a loopback port.
    #[error("cannot start the browser's network proxy: {0}")]
    Proxy(#[source] std::io::Error),

    /// A DevTools Protocol call failed.
    #[error("{what}: {source}")]
    Cdp {
        what: &'static str,
        #[source]
        source: chromiumoxide::error::CdpError,
    },

    /// A DevTools Protocol call or a wait took longer than allowed.
    #[error("{what} timed out after {} ms", after.as_millis())]
    Timeout { what: &'static str, after: Duration },

    /// The URL is not one the browser may open.
    #[error("refusing to open {url}: {reason}")]
    Refused { url: String, reason: String },

    /// The URL cannot be parsed.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },

    /// Navigation failed (DNS, connection, a blocked request).
    #[error("opening {url} failed: {reason}")]
    Navigation { url: String, reason: String },

    /// A script in the page failed, or an element operation found nothing usable.
    #[error("{0}")]
    Page(String),

    /// No tab with this number.
    #[error("there is no tab {index} (open tabs: {open})")]
    NoSuchTab { index: usize, open: usize },

    /// The browser process is gone (crashed or killed).
    #[error("the browser is no longer running")]
    Gone,
}

impl Error {
    pub(crate) fn cdp(what: &'static str) -> impl FnOnce(chromiumoxide::error::CdpError) -> Error {
        move |source| Error::Cdp { what, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
