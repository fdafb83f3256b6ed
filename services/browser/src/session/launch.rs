//! Starting Chromium: its command line (headless, the temporary profile, the proxy, no
//! background traffic) and the DevTools connection read from its stderr.

use std::net::SocketAddr;
use std::path::Path;

use chromiumoxide::handler::HandlerConfig;
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::{process, Options};

/// The command line: headless, the temporary profile, a DevTools endpoint on a free
/// loopback port, and everything that would make requests of its own (updates, sync,
/// metrics, safe browsing, translation) off. Every connection goes through `proxy` (the
/// SOCKS5 proxy of [`crate::Proxy`]), loopback included (`<-loopback>` removes Chromium's
/// implicit loopback bypass); QUIC, which a SOCKS5 proxy cannot carry, is off, and WebRTC
/// may not send UDP past the proxy, i.e. not at all.
pub(super) fn chromium_args(options: &Options, profile: &Path, proxy: SocketAddr) -> Vec<String> {
    let mut args: Vec<String> = [
        "--headless=new",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-component-extensions-with-background-pages",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--disable-breakpad",
        "--disable-crash-reporter",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,InterestFeedContentSuggestions,NetworkTimeServiceQuerying",
        "--metrics-recording-only",
        "--no-pings",
        "--password-store=basic",
        "--use-mock-keychain",
        "--mute-audio",
        "--hide-scrollbars",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--disable-quic",
        "--proxy-bypass-list=<-loopback>",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Chromium's own sandbox cannot run as root.
    if process::running_as_root() {
        args.push("--no-sandbox".into());
    }
    args.push(format!(
        "--window-size={},{}",
        options.window.0, options.window.1
    ));
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push(format!("--proxy-server=socks5://{proxy}"));
    args.push("about:blank".into());
    args
}

/// Reads the DevTools endpoint from stderr, connects and spawns the protocol handler.
pub(super) async fn start(
    executable: &Path,
    options: &Options,
    child: &mut tokio::process::Child,
) -> Result<(chromiumoxide::Browser, JoinHandle<()>)> {
    let failed = |detail: String| Error::Start {
        path: executable.to_path_buf(),
        detail,
    };
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| failed("no stderr pipe".into()))?;
    let mut lines = BufReader::new(stderr).lines();
    let mut seen: Vec<String> = Vec::new();
    let endpoint = tokio::time::timeout(options.launch_timeout, async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    if let Some(url) = line.split("DevTools listening on ").nth(1) {
                        return Ok(url.trim().to_string());
                    }
                    if seen.len() == 8 {
                        seen.remove(0);
                    }
                    seen.push(line);
                }
                Ok(None) | Err(_) => {
                    return Err(format!(
                        "it exited before opening its DevTools endpoint; its last output: {}",
                        seen.join(" | ")
                    ))
                }
            }
        }
    })
    .await;
    let endpoint = match endpoint {
        Ok(Ok(url)) => url,
        Ok(Err(detail)) => return Err(failed(detail)),
        Err(_) => {
            return Err(failed(format!(
                "no DevTools endpoint within {} s",
                options.launch_timeout.as_secs()
            )))
        }
    };
    // Keep draining stderr so the browser never blocks on a full pipe.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::trace!(line, "chromium");
        }
    });
    let config = HandlerConfig {
        request_timeout: options.call_timeout,
        viewport: None,
        ..HandlerConfig::default()
    };
    let connect = chromiumoxide::Browser::connect_with_config(endpoint, config);
    let (cdp, mut handler) = match tokio::time::timeout(options.launch_timeout, connect).await {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => return Err(failed(format!("cannot connect to DevTools: {e}"))),
        Err(_) => return Err(failed("connecting to DevTools timed out".into())),
    };
    let handler = tokio::spawn(async move {
        while let Some(event) = handler.next().await {
            if let Err(e) = event {
                tracing::debug!(error = %e, "devtools handler");
            }
        }
    });
    Ok((cdp, handler))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_goes_through_the_proxy() {
        let proxy: SocketAddr = "127.0.0.1:41234".parse().unwrap();
        let args = chromium_args(&Options::default(), Path::new("/tmp/p"), proxy);
        for flag in [
            "--proxy-server=socks5://127.0.0.1:41234",
            "--proxy-bypass-list=<-loopback>",
            "--disable-quic",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--user-data-dir=/tmp/p",
        ] {
            assert!(
                args.iter().any(|a| a == flag),
                "{flag} missing from {args:?}"
            );
        }
        // Nothing else may name a proxy or a bypass.
        let proxy_flags: Vec<&String> = args.iter().filter(|a| a.contains("proxy")).collect();
        assert_eq!(proxy_flags.len(), 2, "{proxy_flags:?}");
    }
}
