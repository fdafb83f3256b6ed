//! The browser's SOCKS5 proxy with the browser tools' real guard (`web_fetch`'s address
//! check and its test exception), spoken to byte by byte as Chromium would: names that
//! resolve to private addresses, private literals in every spelling, the allowed test
//! address, and a name whose answers change between lookups (DNS rebinding). No Chromium
//! needed; every socket is on loopback, and refused connections are never attempted.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lumina_browser::{Blocked, Proxy};
use lumina_tools::builtin::{BrowserTools, Resolver, StaticResolver};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

enum Dest<'a> {
    Name(&'a str),
    Ip(SocketAddr),
}

/// A SOCKS5 CONNECT through `proxy`; the stream and the reply code (0: connected).
async fn socks_connect(proxy: SocketAddr, dest: Dest<'_>, port: u16) -> (TcpStream, u8) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(&[5, 1, 0]).await.unwrap();
    let mut chosen = [0u8; 2];
    stream.read_exact(&mut chosen).await.unwrap();
    assert_eq!(chosen, [5, 0]);
    let mut request = vec![5, 1, 0];
    match dest {
        Dest::Name(name) => {
            request.push(3);
            request.push(u8::try_from(name.len()).unwrap());
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(&port.to_be_bytes());
        }
        Dest::Ip(SocketAddr::V4(addr)) => {
            request.push(1);
            request.extend_from_slice(&addr.ip().octets());
            request.extend_from_slice(&addr.port().to_be_bytes());
        }
        Dest::Ip(SocketAddr::V6(addr)) => {
            request.push(4);
            request.extend_from_slice(&addr.ip().octets());
            request.extend_from_slice(&addr.port().to_be_bytes());
        }
    }
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    stream.read_exact(&mut reply).await.unwrap();
    (stream, reply[1])
}

/// A non-blocking listener, so [`pending`] can ask the kernel without waiting.
fn listen(addr: &str) -> (std::net::TcpListener, SocketAddr) {
    let listener = std::net::TcpListener::bind(addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// Accepts the connection queued on `listener`, if one is. The proxy connects before it
/// replies, so after its reply a connection it made is queued.
fn pending(listener: &std::net::TcpListener) -> Option<std::net::TcpStream> {
    match listener.accept() {
        Ok((stream, _)) => Some(stream),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
        Err(e) => panic!("accept: {e}"),
    }
}

async fn proxy_for(kit: &BrowserTools) -> Proxy {
    Proxy::start(kit.guard(), Duration::from_secs(10))
        .await
        .unwrap()
}

#[tokio::test]
async fn names_that_resolve_to_private_addresses_are_refused() {
    let (private, private_addr) = listen("127.0.0.1:0");
    let resolver = StaticResolver::new()
        .with("intranet.test", &[private_addr.ip()])
        .with(
            "mixed.test",
            &["93.184.215.14".parse().unwrap(), private_addr.ip()],
        )
        .with("metadata.test", &["169.254.169.254".parse().unwrap()]);
    let proxy = proxy_for(&BrowserTools::new(Arc::new(resolver))).await;
    let port = private_addr.port();

    for name in [
        "intranet.test",
        "mixed.test",
        "metadata.test",
        "unknown.test",
    ] {
        let (_, code) = socks_connect(proxy.addr(), Dest::Name(name), port).await;
        assert_eq!(code, 2, "{name}: connection not allowed");
    }
    assert!(
        pending(&private).is_none(),
        "the private server got a connection"
    );
    let reasons: Vec<(String, String)> = proxy
        .take_refused()
        .into_iter()
        .map(|b| (b.url, b.reason))
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert_eq!(
        reasons[0],
        (
            format!("intranet.test:{port}"),
            "intranet.test resolves to 127.0.0.1, a loopback address".to_string()
        )
    );
    // One private answer among public ones refuses the name (either could be connected to).
    assert_eq!(
        reasons[1].1,
        "mixed.test resolves to 127.0.0.1, a loopback address"
    );
    assert_eq!(
        reasons[2].1,
        "metadata.test resolves to 169.254.169.254, a cloud metadata address"
    );
    assert!(
        reasons[3].1.starts_with("cannot resolve unknown.test"),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn private_literals_are_refused_in_every_spelling() {
    let (private, private_addr) = listen("127.0.0.1:0");
    let proxy = proxy_for(&BrowserTools::new(Arc::new(StaticResolver::new()))).await;
    let port = private_addr.port();

    let (_, code) = socks_connect(proxy.addr(), Dest::Ip(private_addr), 0).await;
    assert_eq!(code, 2);
    let v6: SocketAddr = format!("[::ffff:127.0.0.1]:{port}").parse().unwrap();
    let (_, code) = socks_connect(proxy.addr(), Dest::Ip(v6), 0).await;
    assert_eq!(code, 2);
    for spelling in [
        "127.1",
        "0x7f.0.0.1",
        "2130706433",
        "[::1]",
        "::1",
        "localhost",
        "a b",
    ] {
        let (_, code) = socks_connect(proxy.addr(), Dest::Name(spelling), port).await;
        assert_eq!(code, 2, "{spelling}");
    }
    let (_, code) = socks_connect(proxy.addr(), Dest::Name("169.254.169.254"), 80).await;
    assert_eq!(code, 2);

    assert!(
        pending(&private).is_none(),
        "the private server got a connection"
    );
    let refused = proxy.take_refused();
    let reason = |url: &str| {
        refused
            .iter()
            .find(|b| b.url == url)
            .map(|b| b.reason.clone())
            .unwrap_or_else(|| panic!("{url} not in {refused:?}"))
    };
    assert_eq!(
        reason(&private_addr.to_string()),
        "127.0.0.1 is a loopback address"
    );
    assert_eq!(
        reason(&v6.to_string()),
        "::ffff:127.0.0.1 is a loopback address"
    );
    assert_eq!(
        reason(&format!("127.1:{port}")),
        "127.0.0.1 is a loopback address"
    );
    assert_eq!(
        reason(&format!("0x7f.0.0.1:{port}")),
        "127.0.0.1 is a loopback address"
    );
    assert_eq!(
        reason(&format!("[::1]:{port}")),
        "::1 is a loopback address"
    );
    assert_eq!(
        reason("169.254.169.254:80"),
        "169.254.169.254 is a cloud metadata address"
    );
    assert!(reason(&format!("a b:{port}")).starts_with("invalid host"));
}

#[tokio::test]
async fn the_test_exception_passes_and_is_connected_to() {
    let site = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let site_addr = site.local_addr().unwrap();
    let resolver = StaticResolver::new().with("site.test", &[site_addr.ip()]);
    let kit = BrowserTools::new(Arc::new(resolver)).allow_private_target_for_tests(site_addr);
    let proxy = proxy_for(&kit).await;

    for dest in [Dest::Name("site.test"), Dest::Ip(site_addr)] {
        let (mut client, code) = socks_connect(proxy.addr(), dest, site_addr.port()).await;
        assert_eq!(code, 0);
        let (mut server, _) = site.accept().await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut got = [0u8; 16];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"GET / HTTP/1.1\r\n");
    }
    // The exception is one address and port: the same name on another port is refused.
    let (_, code) =
        socks_connect(proxy.addr(), Dest::Name("site.test"), site_addr.port() + 1).await;
    assert_eq!(code, 2);
    assert_eq!(
        proxy.take_refused(),
        vec![Blocked {
            url: format!("site.test:{}", site_addr.port() + 1),
            reason: "site.test resolves to 127.0.0.1, a loopback address".into(),
        }]
    );
}

/// Answers `first` to the first `allowed` lookups of `rebind.test` and `then` afterwards:
/// a name server that rebinds.
struct Rebinding {
    first: IpAddr,
    then: IpAddr,
    allowed: usize,
    lookups: AtomicUsize,
}

#[async_trait]
impl Resolver for Rebinding {
    async fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        assert_eq!(host, "rebind.test");
        let n = self.lookups.fetch_add(1, Ordering::SeqCst);
        Ok(vec![if n < self.allowed {
            self.first
        } else {
            self.then
        }])
    }
}

#[tokio::test]
async fn a_rebinding_name_is_resolved_once_per_connection_and_connected_where_vetted() {
    // The site on 127.0.0.1:P (the test exception); the "private" server on 127.0.0.2:P.
    let (site, site_addr) = listen("127.0.0.1:0");
    let (private, _) = listen(&format!("127.0.0.2:{}", site_addr.port()));
    let resolver = Arc::new(Rebinding {
        first: site_addr.ip(),
        then: "127.0.0.2".parse().unwrap(),
        allowed: 1,
        lookups: AtomicUsize::new(0),
    });
    let kit = BrowserTools::new(resolver.clone()).allow_private_target_for_tests(site_addr);
    let proxy = proxy_for(&kit).await;

    // One lookup, vetted, and the connection goes to that answer, not to a later one.
    let (_client, code) =
        socks_connect(proxy.addr(), Dest::Name("rebind.test"), site_addr.port()).await;
    assert_eq!(code, 0);
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 1);
    assert!(
        pending(&site).is_some(),
        "the site did not get the connection"
    );
    assert!(pending(&private).is_none());

    // The next connection's lookup answers the private address: refused, nothing connected.
    let (_, code) = socks_connect(proxy.addr(), Dest::Name("rebind.test"), site_addr.port()).await;
    assert_eq!(code, 2);
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 2);
    assert!(
        pending(&private).is_none(),
        "the private server got a connection"
    );
    assert!(pending(&site).is_none());
    assert_eq!(
        proxy.take_refused(),
        vec![Blocked {
            url: format!("rebind.test:{}", site_addr.port()),
            reason: "rebind.test resolves to 127.0.0.2, a loopback address".into(),
        }]
    );
}
