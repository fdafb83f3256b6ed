//! SSRF protection for `web_fetch` and the browser tools: which addresses a request may
//! connect to, and the injectable DNS resolver whose answers are checked (and, by
//! `web_fetch`, then pinned; by the browser's proxy, then connected to) before connecting.
//! [`vet`] is the one check both use ([`vet_host`] for a host and port without a URL: the
//! browser's proxy).
//!
//! Refused: unspecified, loopback, private (RFC 1918), link-local (including the cloud
//! metadata address 169.254.169.254), CGNAT (100.64/10), multicast, broadcast and other
//! reserved IPv4 ranges; IPv6 unspecified, loopback, unique-local (fc00::/7, including the
//! EC2 metadata address fd00:ec2::254), link-local, site-local, multicast, documentation,
//! and every IPv6 form that embeds an IPv4 address (mapped, compatible, NAT64, 6to4) when
//! the embedded address is refused.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use async_trait::async_trait;

/// Resolves host names for `web_fetch`. The system implementation asks the OS; tests use
/// [`StaticResolver`] so they never send traffic outside the machine.
#[async_trait]
pub trait Resolver: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo` through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((host, port)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// A fixed name → addresses table; unknown names fail to resolve. For tests.
#[derive(Debug, Default, Clone)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the answer for `host`.
    pub fn with(mut self, host: &str, addrs: &[IpAddr]) -> Self {
        self.names.insert(host.to_ascii_lowercase(), addrs.to_vec());
        self
    }
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.names
            .get(&host.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"))
    }
}

/// Why `ip` may not be fetched, or `None` when it is a public address.
pub fn refusal_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

/// Whether a connection to `addr` is allowed: public, or the one explicit exception. The
/// error is why not (`a private address`).
pub(crate) fn check_target(
    addr: SocketAddr,
    exception: Option<SocketAddr>,
) -> Result<(), &'static str> {
    if exception == Some(addr) {
        return Ok(());
    }
    match refusal_reason(addr.ip()) {
        None => Ok(()),
        Some(reason) => Err(reason),
    }
}

/// Why a URL's host may not be reached (`10.0.0.5 is a private address`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A vetted URL's host: the name to pin (none for IP literals) and its addresses, every
/// one of them allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vetted {
    pub host: Option<String>,
    pub addrs: Vec<SocketAddr>,
}

/// Resolves the URL's host and checks every address (and the port) with [`check_target`].
/// The scheme is the caller's business. One refused address refuses the host: a name that
/// answers with a public and a private address could be connected to either.
pub(crate) async fn vet(
    resolver: &dyn Resolver,
    url: &url::Url,
    exception: Option<SocketAddr>,
) -> Result<Vetted, Refusal> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| Refusal("no port".into()))?;
    let host = url
        .host()
        .ok_or_else(|| Refusal("the URL has no host".into()))?;
    vet_host(resolver, host, port, exception).await
}

/// [`vet`] for a host and port without a URL (the browser's proxy asks for connections):
/// a name is resolved once and every answer checked; the addresses returned are the only
/// ones that may be connected to.
pub(crate) async fn vet_host(
    resolver: &dyn Resolver,
    host: url::Host<&str>,
    port: u16,
    exception: Option<SocketAddr>,
) -> Result<Vetted, Refusal> {
    let refuse = |why: String| Refusal(why);
    let (host, ips) = match host {
        url::Host::Ipv4(ip) => (None, vec![ip.into()]),
        url::Host::Ipv6(ip) => (None, vec![ip.into()]),
        url::Host::Domain(name) => {
            let ips = resolver
                .resolve(name, port)
                .await
                .map_err(|e| refuse(format!("cannot resolve {name}: {e}")))?;
            if ips.is_empty() {
                return Err(refuse(format!("{name} has no addresses")));
            }
            (Some(name.to_string()), ips)
        }
    };
    let mut addrs = Vec::with_capacity(ips.len());
    for ip in ips {
        let addr = SocketAddr::new(ip, port);
        check_target(addr, exception).map_err(|why| match &host {
            Some(name) => refuse(format!("{name} resolves to {ip}, {why}")),
            None => refuse(format!("{ip} is {why}")),
        })?;
        addrs.push(addr);
    }
    Ok(Vetted { host, addrs })
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Some("a cloud metadata address");
    }
    let reason = match (a, b) {
        (0, _) => "an unspecified (\"this network\") address",
        (10, _) | (172, 16..=31) | (192, 168) => "a private address",
        (127, _) => "a loopback address",
        (169, 254) => "a link-local address",
        (100, 64..=127) => "a carrier-grade NAT (shared) address",
        (192, 0) if c == 0 || c == 2 => "a reserved address",
        (198, 18..=19) => "a benchmarking address",
        (198, 51) if c == 100 => "a documentation address",
        (203, 0) if c == 113 => "a documentation address",
        (224..=239, _) => "a multicast address",
        (240..=255, _) => "a reserved or broadcast address",
        _ => return None,
    };
    Some(reason)
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Some("a cloud metadata address");
    }
    if ip.is_unspecified() {
        return Some("the unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if let Some(v4) = embedded_v4(ip) {
        return v4_reason(v4);
    }
    let s = ip.segments();
    let reason = match s[0] {
        0xfc00..=0xfdff => "a unique-local address",
        0xfe80..=0xfebf => "a link-local address",
        0xfec0..=0xfeff => "a site-local address",
        0xff00..=0xffff => "a multicast address",
        0x2001 if s[1] == 0x0db8 => "a documentation address",
        0x0000 => "a reserved address",
        _ => return None,
    };
    Some(reason)
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail()),
        [0, 0, 0, 0, 0, 0, _, _] => Some(tail()),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail()),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn refused(s: &str) -> bool {
        refusal_reason(s.parse().unwrap()).is_some()
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        for addr in [
            "0.0.0.0",
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.5",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.5",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:5",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(refused(addr), "{addr} should be refused");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
            "2002:0101:0101::",
        ] {
            assert!(!refused(addr), "{addr} should be allowed");
        }
    }

    #[test]
    fn metadata_addresses_are_named() {
        assert_eq!(
            refusal_reason("169.254.169.254".parse().unwrap()),
            Some("a cloud metadata address")
        );
        assert_eq!(
            refusal_reason("fd00:ec2::254".parse().unwrap()),
            Some("a cloud metadata address")
        );
    }

    #[test]
    fn the_exception_is_exact() {
        let allowed: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(check_target(allowed, Some(allowed)), Ok(()));
        assert!(check_target("127.0.0.1:8081".parse().unwrap(), Some(allowed)).is_err());
        assert!(check_target("127.0.0.1:8080".parse().unwrap(), None).is_err());
    }
}
