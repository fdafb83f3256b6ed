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
