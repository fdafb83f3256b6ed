//! `init_local` / `mint`: files, modes, idempotence, and that what they write verifies.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use lumina_auth::{
    ed25519_jwk, init_local, mint, AuthConfig, Authenticator, JwksSource, LocalCluster, Principal,
    SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE,
};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const ISS: &str = "lumina-local";
const AUD: &str = "lumina";
const DAY: Duration = Duration::from_secs(86_400);

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
}

async fn authenticator(cluster: &LocalCluster) -> Authenticator {
    let cfg = AuthConfig::new(
        &cluster.issuer,
        &cluster.audience,
        JwksSource::File(cluster.jwks_path.clone()),
    );
    Authenticator::new(cfg)
        .await
        .expect("authenticator over the written jwks")
}

#[tokio::test]
async fn init_local_writes_the_expected_files_and_modes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("config/cluster");
    let cluster = init_local(&dir, "local", ISS, AUD, DAY).expect("init");

    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("signing-key.pem")), 0o600);
    assert_eq!(mode(&cluster.admin_token_path), 0o600);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["admin.jwt", "cluster.json", "jwks.json", "signing-key.pem"]
    );

    assert_eq!(
        cluster,
        LocalCluster {
            dir: dir.clone(),
            jwks_path: dir.join("jwks.json"),
            admin_token_path: dir.join("admin.jwt"),
            issuer: ISS.into(),
            audience: AUD.into(),
            tenant: "local".into(),
            kid: cluster.kid.clone(),
        }
    );

    // The JWKS is exactly one public OKP key whose x is the key's public half.
    let jwks = read_json(&cluster.jwks_path);
    let x = jwks["keys"][0]["x"].as_str().expect("x").to_owned();
    let public = base64_url(&x);
    assert_eq!(jwks, json!({"keys": [ed25519_jwk(&public, &cluster.kid)]}));
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA");
    assert_eq!(jwks["keys"][0]["use"], "sig");
    assert_eq!(jwks["keys"][0].get("d"), None, "no private material");
    assert_eq!(cluster.kid, lumina_auth::ed25519_kid(&public));

    assert_eq!(
        read_json(&dir.join("cluster.json")),
        json!({"issuer": ISS, "audience": AUD, "tenant": "local", "kid": cluster.kid})
    );

    let pem = std::fs::read_to_string(dir.join("signing-key.pem")).expect("key");
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));

    // The admin token verifies against the JWKS just written.
    let token = std::fs::read_to_string(&cluster.admin_token_path).expect("token");
    assert!(!token.ends_with('\n'));
    let principal = authenticator(&cluster)
        .await
        .verify(&token)
        .await
        .expect("admin token verifies");
    let expires_at = principal.expires_at;
    assert!((expires_at - now() - 86_400).abs() <= 5, "expires in a day");
    assert_eq!(
        principal,
        Principal {
            sub: "admin".into(),
            tenant: "local".into(),
            scopes: vec![SCOPE_READ.into(), SCOPE_WRITE.into(), SCOPE_ADMIN.into()],
            expires_at,
        }
    );
}

#[tokio::test]
async fn init_local_is_idempotent_and_reuses_the_key() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cluster");
    let first = init_local(&dir, "local", ISS, AUD, DAY).expect("first");
    let key_before = std::fs::read(dir.join("signing-key.pem")).expect("key");
    let user_token = mint(&dir, "bob", "local", &[SCOPE_READ], DAY).expect("mint");

    // Someone loosened permissions in between; a re-run narrows them again.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::fs::set_permissions(
        dir.join("signing-key.pem"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod key");
    std::fs::remove_file(&first.admin_token_path).expect("remove token");

    let second = init_local(&dir, "local", ISS, AUD, Duration::from_secs(60)).expect("second");
    assert_eq!(second, first);
    assert_eq!(
        std::fs::read(dir.join("signing-key.pem")).expect("key"),
        key_before
    );
    assert_eq!(
        (mode(&dir), mode(&dir.join("signing-key.pem"))),
        (0o700, 0o600)
    );

    let auth = authenticator(&second).await;
    let admin = std::fs::read_to_string(&second.admin_token_path).expect("rewritten token");
    let principal = auth.verify(&admin).await.expect("new admin token verifies");
    assert!(
        principal.expires_at <= now() + 61,
        "rewritten with the new ttl"
    );
    assert!(
        auth.verify(&user_token).await.is_ok(),
        "earlier tokens survive a re-run"
    );
}

#[tokio::test]
async fn minted_tokens_verify_with_the_written_jwks() {
    let root = tempfile::tempdir().expect("tempdir");
    let cluster = init_local(root.path(), "local", ISS, AUD, DAY).expect("init");
    let token = mint(
        root.path(),
        "carol",
        "team-a",
        &[SCOPE_READ, SCOPE_WRITE],
        Duration::from_secs(600),
    )
    .expect("mint");
    let principal = authenticator(&cluster)
        .await
        .verify(&token)
        .await
        .expect("verifies");
    assert_eq!(
        principal,
        Principal {
            sub: "carol".into(),
            tenant: "team-a".into(),
            scopes: vec![SCOPE_READ.into(), SCOPE_WRITE.into()],
            expires_at: principal.expires_at,
        }
    );
    assert!((principal.expires_at - now() - 600).abs() <= 5);

    // Header carries the thumbprint kid and EdDSA.
    let header: Value =
        serde_json::from_slice(&base64_url(token.split('.').next().expect("header")))
            .expect("json");
    assert_eq!(header["alg"], "EdDSA");
    assert_eq!(header["kid"], json!(cluster.kid));

    assert!(mint(root.path(), "carol", "bad/tenant", &[], DAY).is_err());
    assert!(mint(&root.path().join("nowhere"), "carol", "local", &[], DAY).is_err());
}

#[test]
fn export_lines_point_at_files_and_never_print_the_token() {
    let root = tempfile::tempdir().expect("tempdir");
    let cluster = init_local(root.path(), "local", ISS, AUD, DAY).expect("init");
    let jwks = cluster.jwks_path.display();
    let token_path = cluster.admin_token_path.display();
    assert_eq!(
        cluster.export_lines(),
        format!("export LUMINA_JWT_JWKS_FILE={jwks}\nexport LUMINA_JWT=$(cat {token_path})\n")
    );
    let token = std::fs::read_to_string(&cluster.admin_token_path).expect("token");
    assert!(!cluster.export_lines().contains(&token));
}

#[test]
fn init_local_refuses_bad_input_and_never_overwrites_a_broken_key() {
    let root = tempfile::tempdir().expect("tempdir");
    assert!(init_local(root.path(), "", ISS, AUD, DAY).is_err());
    assert!(init_local(root.path(), "a b", ISS, AUD, DAY).is_err());
    assert!(init_local(root.path(), "local", "", AUD, DAY).is_err());
    assert!(init_local(root.path(), "local", ISS, AUD, Duration::ZERO).is_err());

    let key = root.path().join("signing-key.pem");
    std::fs::write(
        &key,
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    )
    .expect("write");
    let err = init_local(root.path(), "local", ISS, AUD, DAY).expect_err("broken key");
    assert!(err.to_string().contains("signing-key.pem"), "{err}");
    assert!(
        !err.to_string().contains("bm90IGEga2V5"),
        "key content must not leak: {err}"
    );
    assert_eq!(
        std::fs::read_to_string(&key).expect("key"),
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
    );
}

fn base64_url(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .expect("base64url")
}

fn now() -> i64 {
    super::support::now()
}
