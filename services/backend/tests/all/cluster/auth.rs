//! JWT rules at the gateway: refused tokens get 401 and reveal nothing; scopes and tenants
//! are enforced.

use lumina_client::ClientError;
use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::ErrorCode;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::submit;

fn tamper(token: &str) -> String {
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let sig = parts[2].clone();
    let flipped = if sig.starts_with('A') { "B" } else { "A" };
    parts[2] = format!("{flipped}{}", &sig[1..]);
    parts.join(".")
}

fn b64(value: serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_scopes_and_tenants() {
    let cluster = Cluster::start(1, vec![]).await;
    let good = cluster.user_token();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let unsigned = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "typ": "JWT"})),
        b64(
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant": TENANT, "exp": now + 600})
        )
    );
    let hs256 = format!(
        "{}.{}.c2lnbmF0dXJl",
        b64(json!({"alg": "HS256", "typ": "JWT"})),
        b64(
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant": TENANT, "exp": now + 600})
        )
    );
    for (name, token) in [
        ("alg none", unsigned),
        ("hs256", hs256),
        ("tampered", tamper(&good)),
        ("garbage", "not-a-jwt".to_string()),
    ] {
        match cluster.try_client(0, &token).await {
            Err(ClientError::Unauthorized(message)) => assert!(!message.contains(&token), "{name}"),
            other => panic!("{name}: expected 401, got {:?}", other.map(|_| ())),
        }
    }

    // A read-only token cannot submit; a non-admin cannot drain.
    let reader = cluster.token("bob", TENANT, &["lumina:session:read"]);
    let (writer, _w) = cluster.client(0, &good).await;
    let session = writer
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    let (read_only, _r) = cluster.client(0, &reader).await;
    let err = read_only
        .session_submit(&submit(&session.id, "hi", json!(null)))
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::Forbidden);
    let err = writer
        .call::<_, serde_json::Value>("admin.drain", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::Forbidden);

    // Tenant B sees nothing of tenant A.
    let other = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let (eve, _e) = cluster.client(0, &other).await;
    assert!(eve.session_list(true).await.unwrap().is_empty());
    let err = eve.session_events(&session.id, 0, None).await.unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::NotFound);
    let err = eve.session_resume(&session.id, 0).await.unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::NotFound);
    let err = eve
        .session_submit(&submit(&session.id, "steal", json!(null)))
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::NotFound);
}

fn signed(cluster: &Cluster, claims: serde_json::Value) -> String {
    let pem = std::fs::read_to_string(cluster.key_dir.join(lumina_auth::KEY_FILE)).unwrap();
    let der = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<String>();
    use base64::Engine;
    let pkcs8 = base64::engine::general_purpose::STANDARD
        .decode(der)
        .unwrap();
    let info: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cluster.key_dir.join(lumina_auth::CLUSTER_FILE)).unwrap(),
    )
    .unwrap();
    lumina_auth::sign_ed25519_pkcs8(&pkcs8, info["kid"].as_str().unwrap(), &claims).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_checked_at_upgrade_and_expiry_closes_the_connection() {
    let cluster = Cluster::start(1, vec![]).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let base = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant": TENANT, "exp": now + 600, "scope": "lumina:session:read"});
    let with = |k: &str, v: serde_json::Value| {
        let mut c = base.clone();
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = base.clone();
        c.as_object_mut().unwrap().remove(k);
        c
    };
    // The same key signs a valid token: the refusals below are about the claims.
    assert!(cluster
        .try_client(0, &signed(&cluster, base.clone()))
        .await
        .is_ok());
    for (name, claims) in [
        ("expired", with("exp", json!(now - 120))),
        ("not yet valid", with("nbf", json!(now + 600))),
        ("wrong issuer", with("iss", json!("someone-else"))),
        ("wrong audience", with("aud", json!("other"))),
        ("no tenant", without("tenant")),
        ("no sub", without("sub")),
    ] {
        match cluster.try_client(0, &signed(&cluster, claims)).await {
            Err(ClientError::Unauthorized(_)) => {}
            other => panic!("{name}: expected 401, got {:?}", other.map(|_| ())),
        }
    }
    // An unknown kid (a key not in the JWKS) is refused.
    let stranger = lumina_auth::generate_ed25519_pkcs8().unwrap();
    let token = lumina_auth::sign_ed25519_pkcs8(&stranger, "unknown-kid", &base).unwrap();
    assert!(matches!(
        cluster.try_client(0, &token).await,
        Err(ClientError::Unauthorized(_))
    ));

    // A connection outlives neither its token.
    let short = signed(&cluster, with("exp", json!(now + 2)));
    let (client, mut notes) = cluster.client(0, &short).await;
    client.hello("t").await.unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut saw_error = false;
    loop {
        match tokio::time::timeout_at(deadline, notes.recv())
            .await
            .unwrap()
        {
            Some(lumina_client::Notification::ProtocolError(e)) => {
                assert_eq!(e.code, ErrorCode::Unauthorized);
                saw_error = true;
            }
            Some(lumina_client::Notification::Closed(_)) | None => break,
            Some(_) => {}
        }
    }
    assert!(saw_error);
}

/// One WebSocket upgrade request with `authorization` (raw bytes, so non-ASCII values can
/// be sent); returns the status line, the headers without `date` (lower-cased, sorted) and
/// the body, exactly as received.
async fn raw_upgrade(port: u16, authorization: Option<&[u8]>) -> (String, Vec<String>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut request = format!(
        "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    )
    .into_bytes();
    if let Some(value) = authorization {
        request.extend_from_slice(b"Authorization: ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");
    stream.write_all(&request).await.unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&response[..end]).into_owned();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                if response.len() >= end + 4 + length {
                    return (head, response[end + 4..end + 4 + length].to_vec());
                }
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before a full response");
            response.extend_from_slice(&buf[..n]);
        }
    };
    let (head, body) = tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_string();
    let mut headers: Vec<String> = lines
        .map(str::to_ascii_lowercase)
        .filter(|l| !l.starts_with("date:"))
        .collect();
    headers.sort();
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_upgrade_gets_the_same_opaque_401() {
    let cluster = Cluster::start(1, vec![]).await;
    let port = cluster.instances[0].port;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let base = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant": TENANT,
                      "exp": now + 600, "scope": "lumina:session:read"});
    let with = |k: &str, v: serde_json::Value| {
        let mut c = base.clone();
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = base.clone();
        c.as_object_mut().unwrap().remove(k);
        c
    };
    let good = signed(&cluster, base.clone());

    // The harness request is a proper upgrade: a valid token switches protocols.
    let (status, _, _) = raw_upgrade(port, Some(format!("Bearer {good}").as_bytes())).await;
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");

    let payload = b64(base.clone());
    let stranger = lumina_auth::generate_ed25519_pkcs8().unwrap();
    let tokens: Vec<(&str, String)> = vec![
        (
            "alg none",
            format!("{}.{payload}.", b64(json!({"alg": "none"}))),
        ),
        (
            "alg nOnE",
            format!("{}.{payload}.", b64(json!({"alg": "nOnE"}))),
        ),
        (
            "hs256",
            format!("{}.{payload}.c2lnbmF0dXJl", b64(json!({"alg": "HS256"}))),
        ),
        ("tampered signature", tamper(&good)),
        ("garbage", "not-a-jwt".into()),
        ("extra segment", format!("{good}.x")),
        ("expired", signed(&cluster, with("exp", json!(now - 3600)))),
        (
            "not yet valid",
            signed(&cluster, with("nbf", json!(now + 3600))),
        ),
        ("wrong issuer", signed(&cluster, with("iss", json!("evil")))),
        (
            "wrong audience",
            signed(&cluster, with("aud", json!("other"))),
        ),
        ("no exp", signed(&cluster, without("exp"))),
        ("no tenant", signed(&cluster, without("tenant"))),
        ("no scope", signed(&cluster, without("scope"))),
        (
            "exp as a string",
            signed(&cluster, with("exp", json!("soon"))),
        ),
        (
            "unknown kid",
            lumina_auth::sign_ed25519_pkcs8(&stranger, "unknown-kid", &base).unwrap(),
        ),
        (
            "kid path traversal",
            lumina_auth::sign_ed25519_pkcs8(&stranger, "../../jwks.json", &base).unwrap(),
        ),
        (
            "over the verifier's size limit (64 KiB)",
            signed(&cluster, with("blob", json!("A".repeat(64 * 1024)))),
        ),
    ];
    let mut requests: Vec<(String, Option<Vec<u8>>)> = tokens
        .iter()
        .map(|(name, token)| {
            (
                (*name).to_string(),
                Some(format!("Bearer {token}").into_bytes()),
            )
        })
        .collect();
    requests.push(("no authorization header".into(), None));
    requests.push(("basic scheme".into(), Some(b"Basic dXNlcjpwdw==".to_vec())));
    requests.push(("empty bearer".into(), Some(b"Bearer ".to_vec())));
    requests.push((
        "non-ASCII header value".into(),
        Some(b"Bearer \xff\xfe.\xfd".to_vec()),
    ));

    let mut responses = Vec::new();
    for (name, authorization) in &requests {
        let response = raw_upgrade(port, authorization.as_deref()).await;
        assert!(
            response.0.starts_with("HTTP/1.1 401"),
            "{name}: {}",
            response.0
        );
        responses.push((name, response));
    }
    let (_, expected) = &responses[0];
    for (name, response) in &responses {
        assert_eq!(response, expected, "{name}: the response differs");
    }
    let (_, headers, body) = expected.clone();
    assert!(
        headers
            .iter()
            .any(|h| h == "content-type: application/json"),
        "{headers:?}"
    );
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], json!("unauthorized"), "{body}");

    // The refusals are logged (reason only), never the token.
    let log = cluster.log(0);
    assert!(log.contains("bearer token refused"), "refusals are logged");
    for (name, token) in &tokens {
        for segment in token.split('.').filter(|s| s.len() > 8) {
            assert!(!log.contains(segment), "{name}: the log contains the token");
        }
    }
}
