//! The proxy against a scripted guard and real loopback sockets: the client side speaks
//! SOCKS5 byte by byte, so every reply code is checked as Chromium would read it.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Answers from a table and counts how often each host was asked.
#[derive(Default)]
struct ScriptedGuard {
    answers: HashMap<String, Connection>,
    asked: Mutex<HashMap<String, usize>>,
}

impl ScriptedGuard {
    fn with(mut self, host: &str, answer: Connection) -> Self {
        self.answers.insert(host.to_string(), answer);
        self
    }

    fn asked(&self, host: &str) -> usize {
        lock(&self.asked).get(host).copied().unwrap_or(0)
    }
}

#[async_trait]
impl RequestGuard for ScriptedGuard {
    async fn refusal(&self, _url: &str) -> Option<String> {
        Some("not used by the proxy".into())
    }

    async fn connection(&self, host: &str, _port: u16) -> Connection {
        *lock(&self.asked).entry(host.to_string()).or_default() += 1;
        self.answers
            .get(host)
            .cloned()
            .unwrap_or_else(|| Connection::Refused(format!("{host} is not in the table")))
    }
}

enum Dest<'a> {
    Name(&'a str),
    Ip(SocketAddr),
}

/// Opens a SOCKS5 CONNECT through `proxy` and returns the stream and the reply code.
async fn socks_connect(proxy: SocketAddr, dest: Dest<'_>, port: u16) -> (TcpStream, u8) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(&[5, 1, 0]).await.unwrap();
    let mut chosen = [0u8; 2];
    stream.read_exact(&mut chosen).await.unwrap();
    assert_eq!(chosen, [5, 0], "no-authentication should be chosen");
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
    assert_eq!(reply[0], 5);
    (stream, reply[1])
}

async fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// A listener to ask [`pending`].
fn std_listener() -> (std::net::TcpListener, SocketAddr) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// Whether a connection is queued on `listener` now (the kernel's answer, no waiting). The
/// proxy connects before it replies, so after a reply a connection it made is queued.
fn pending(listener: &std::net::TcpListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

async fn start(guard: ScriptedGuard) -> (Proxy, Arc<ScriptedGuard>) {
    let guard = Arc::new(guard);
    let proxy = Proxy::start(guard.clone(), Duration::from_secs(10))
        .await
        .unwrap();
    (proxy, guard)
}

#[tokio::test]
async fn a_name_is_connected_to_the_address_the_guard_vetted_and_asked_about_once() {
    let (vetted, vetted_addr) = listener().await;
    let (_other, other_addr) = listener().await;
    let (proxy, guard) =
        start(ScriptedGuard::default().with("public.example", Connection::To(vec![vetted_addr])))
            .await;

    // The port Chromium asks for is the guard's business: the vetted address carries it.
    let (mut client, code) = socks_connect(
        proxy.addr(),
        Dest::Name("public.example"),
        other_addr.port(),
    )
    .await;
    assert_eq!(code, 0);
    let (mut upstream, _) = vetted.accept().await.unwrap();
    client.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    upstream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    upstream.write_all(b"pong").await.unwrap();
    client.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");

    assert_eq!(guard.asked("public.example"), 1);
    assert_eq!(proxy.take_refused(), Vec::<Blocked>::new());
}

#[tokio::test]
async fn a_refusal_is_answered_recorded_and_nothing_is_connected() {
    let (private, private_addr) = std_listener();
    let (proxy, guard) = start(ScriptedGuard::default().with(
        "rebind.example",
        Connection::Refused("rebind.example resolves to 127.0.0.1, a loopback address".into()),
    ))
    .await;

    let (_, code) = socks_connect(proxy.addr(), Dest::Name("rebind.example"), 80).await;
    assert_eq!(code, 2, "connection not allowed by ruleset");
    // A literal address goes to the guard as text, and the refusal names it.
    let (_, code) = socks_connect(proxy.addr(), Dest::Ip(private_addr), 0).await;
    assert_eq!(code, 2);
    assert_eq!(guard.asked("127.0.0.1"), 1);
    // Chromium retries: the same refusal is listed once.
    let (_, code) = socks_connect(proxy.addr(), Dest::Name("rebind.example"), 80).await;
    assert_eq!(code, 2);

    assert!(!pending(&private), "the private listener got a connection");
    assert_eq!(
        proxy.take_refused(),
        vec![
            Blocked {
                url: "rebind.example:80".into(),
                reason: "rebind.example resolves to 127.0.0.1, a loopback address".into(),
            },
            Blocked {
                url: private_addr.to_string(),
                reason: "127.0.0.1 is not in the table".into(),
            },
        ]
    );
    assert_eq!(proxy.take_refused(), Vec::<Blocked>::new(), "taken once");
}

#[tokio::test]
async fn the_next_vetted_address_is_tried_when_one_does_not_answer() {
    // A port that was free a moment ago: nothing listens there.
    let closed = listener().await.1;
    let (open, open_addr) = std_listener();
    let (proxy, _) = start(
        ScriptedGuard::default().with("two.example", Connection::To(vec![closed, open_addr])),
    )
    .await;
    let (_client, code) = socks_connect(proxy.addr(), Dest::Name("two.example"), 80).await;
    assert_eq!(code, 0);
    assert!(pending(&open));

    let (proxy, _) =
        start(ScriptedGuard::default().with("none.example", Connection::To(vec![closed]))).await;
    let (_, code) = socks_connect(proxy.addr(), Dest::Name("none.example"), 80).await;
    assert_eq!(code, 4, "host unreachable");
    assert_eq!(proxy.take_refused(), Vec::<Blocked>::new(), "not a refusal");
}

#[tokio::test]
async fn other_commands_and_garbage_are_refused_and_the_proxy_keeps_serving() {
    let (target, target_addr) = std_listener();
    let (proxy, guard) =
        start(ScriptedGuard::default().with("ok.example", Connection::To(vec![target_addr]))).await;

    // UDP ASSOCIATE (3) and BIND (2): command not supported, the guard is not asked.
    for command in [2u8, 3] {
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        stream.write_all(&[5, 1, 0]).await.unwrap();
        let mut chosen = [0u8; 2];
        stream.read_exact(&mut chosen).await.unwrap();
        stream
            .write_all(&[5, command, 0, 1, 127, 0, 0, 1, 0, 80])
            .await
            .unwrap();
        let mut reply = [0u8; 10];
        stream.read_exact(&mut reply).await.unwrap();
        assert_eq!(reply[1], 7, "command {command}");
    }
    assert_eq!(guard.asked("127.0.0.1"), 0);

    // SOCKS4, an HTTP request, an unknown address type, a truncated request: closed.
    for garbage in [
        &[4u8, 1, 0, 80, 127, 0, 0, 1, 0][..],
        b"GET / HTTP/1.1\r\n\r\n",
        &[5, 1, 0, 5, 1, 0, 9, 1, 2, 3, 4, 0, 80],
        &[5, 1, 0, 5, 1, 0, 3, 200, b'a'],
    ] {
        let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
        // The proxy may close as soon as it has read enough to refuse.
        let _ = stream.write_all(garbage).await;
        let _ = stream.shutdown().await;
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest).await;
        assert!(rest.len() <= 12, "{garbage:?} got {rest:?}");
        if rest.len() > 2 {
            assert_ne!(rest[3], 0, "{garbage:?} must not succeed: {rest:?}");
        }
    }
    assert!(!pending(&target));

    let (_client, code) = socks_connect(proxy.addr(), Dest::Name("ok.example"), 80).await;
    assert_eq!(code, 0);
    assert!(pending(&target));
}

#[tokio::test]
async fn stopping_closes_the_port_and_the_relayed_connections() {
    let (target, target_addr) = listener().await;
    let (proxy, _) =
        start(ScriptedGuard::default().with("ok.example", Connection::To(vec![target_addr]))).await;
    let addr = proxy.addr();
    let (mut client, code) = socks_connect(addr, Dest::Name("ok.example"), 80).await;
    assert_eq!(code, 0);
    let (mut upstream, _) = target.accept().await.unwrap();

    proxy.stop().await;

    assert!(
        TcpStream::connect(addr).await.is_err(),
        "{addr} still accepts"
    );
    let mut buf = [0u8; 1];
    assert!(matches!(client.read(&mut buf).await, Ok(0) | Err(_)));
    assert!(matches!(upstream.read(&mut buf).await, Ok(0) | Err(_)));
}
