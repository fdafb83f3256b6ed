//! Token verification: accepted algorithms, refused algorithms, claims, tampering.

use lumina_auth::{AuthError, Principal, SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};
use pretty_assertions::assert_eq;
use ring::rsa::PublicKeyComponents;
use ring::signature::RsaKeyPair;
use serde_json::{json, Value};

use super::support::*;

fn alice(expires_at: i64) -> Principal {
    Principal {
        sub: "alice".into(),
        tenant: "acme".into(),
        scopes: vec![SCOPE_READ.into()],
        expires_at,
    }
}

fn with(key: &str, value: Value) -> Value {
    let mut c = claims();
    c[key] = value;
    c
}

fn without(key: &str) -> Value {
    let mut c = claims();
    c.as_object_mut().map(|m| m.remove(key));
    c
}

#[test]
fn rsa_fixture_jwk_matches_the_private_key() {
    let pair = RsaKeyPair::from_pkcs8(&pem_body(RSA_FIXTURE_PEM)).expect("fixture key");
    let c: PublicKeyComponents<Vec<u8>> = pair.public().into();
    let committed: Value = serde_json::from_str(RSA_FIXTURE_JWK).expect("fixture jwk");
    assert_eq!(
        committed,
        json!({"kty": "RSA", "kid": "rsa-test-1", "alg": "RS256", "use": "sig",
                                 "n": b64(&c.n), "e": b64(&c.e)})
    );
    assert_eq!(pair.public().modulus_len(), 256, "2048-bit");
}

#[tokio::test]
async fn rs256_es256_and_eddsa_are_accepted() {
    let (rsa, ec, ed) = (
        TestKey::rsa("rsa-test-1"),
        TestKey::ec("ec-1"),
        TestKey::ed("ed-1"),
    );
    let (auth, _dir) = file_authenticator(&[&rsa, &ec, &ed]).await;
    let c = claims();
    let exp = c["exp"].as_i64().expect("exp");
    for key in [&rsa, &ec, &ed] {
        assert_eq!(
            auth.verify(&key.token(&c)).await,
            Ok(alice(exp)),
            "{}",
            key.alg()
        );
    }
    // The committed JWK (n/e from openssl) verifies the fixture's tokens too.
    let committed: Value = serde_json::from_str(RSA_FIXTURE_JWK).expect("fixture jwk");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &json!({"keys": [committed]}));
    let auth = lumina_auth::Authenticator::new(config(lumina_auth::JwksSource::File(path)))
        .await
        .expect("authenticator");
    assert_eq!(auth.verify(&rsa.token(&c)).await, Ok(alice(exp)));
}

#[tokio::test]
async fn refused_algorithms_never_reach_key_lookup() {
    let rsa = TestKey::rsa("rsa-test-1");
    let (auth, _dir) = file_authenticator(&[&rsa]).await;
    let payload = b64(claims().to_string());
    for alg in [
        "none", "None", "NONE", "HS256", "HS384", "HS512", "RS512", "PS256", "ES384", "ES512",
        "eddsa", "",
    ] {
        // An unknown kid would force a JWKS reload if lookup were reached.
        let header = json!({"alg": alg, "typ": "JWT", "kid": "not-cached"});
        let unsigned = format!("{}.{payload}.", b64(header.to_string()));
        let result = auth.verify(&unsigned).await;
        assert_refused(
            result,
            &unsigned,
            AuthError::AlgorithmNotAllowed(format!("{alg:?}")),
        );
        let signed = rsa.token_with_header(&header, &claims());
        assert_refused(
            auth.verify(&signed).await,
            &signed,
            AuthError::AlgorithmNotAllowed(format!("{alg:?}")),
        );
    }
    assert_eq!(auth.key_stats().loads, 1, "no reload was triggered");
}

#[tokio::test]
async fn hs256_signed_with_the_rsa_public_key_is_refused() {
    let rsa = TestKey::rsa("rsa-test-1");
    let (auth, _dir) = file_authenticator(&[&rsa]).await;
    // The classic confusion attack: a verifier that feeds "the key" to whatever `alg` says
    // would accept an HMAC keyed with the public key material.
    let n_e = rsa.jwk();
    let secrets: [Vec<u8>; 4] = [
        RSA_FIXTURE_PUB_PEM.as_bytes().to_vec(),
        pem_body(RSA_FIXTURE_PUB_PEM),
        n_e["n"].as_str().expect("n").as_bytes().to_vec(),
        RSA_FIXTURE_JWK.as_bytes().to_vec(),
    ];
    for secret in &secrets {
        for kid in ["rsa-test-1", ""] {
            let token = hs256_token(secret, kid, &claims());
            assert_refused(
                auth.verify(&token).await,
                &token,
                AuthError::AlgorithmNotAllowed("\"HS256\"".into()),
            );
        }
    }
}

#[tokio::test]
async fn algorithm_must_match_the_key_type() {
    let (rsa, ec, ed) = (
        TestKey::rsa("rsa-test-1"),
        TestKey::ec("ec-1"),
        TestKey::ed("ed-1"),
    );
    let (auth, _dir) = file_authenticator(&[&rsa, &ec, &ed]).await;
    // Each key signs honestly with its own algorithm, but the header claims another key's
    // algorithm for its kid: the key/algorithm binding must refuse before verifying.
    for (signer, header_alg, kid) in [
        (&ec, "ES256", "rsa-test-1"),
        (&ed, "EdDSA", "ec-1"),
        (&rsa, "RS256", "ed-1"),
        (&ed, "EdDSA", "rsa-test-1"),
    ] {
        let token = signer.token_with_header(&json!({"alg": header_alg, "kid": kid}), &claims());
        let expected = AuthError::KeyAlgorithmMismatch {
            kid: format!("{kid:?}"),
            alg: header_alg_static(header_alg),
        };
        assert_refused(auth.verify(&token).await, &token, expected);
    }
}

fn header_alg_static(alg: &str) -> &'static str {
    match alg {
        "RS256" => "RS256",
        "ES256" => "ES256",
        _ => "EdDSA",
    }
}

#[tokio::test]
async fn jwk_declaring_another_alg_or_symmetric_keys_are_not_loaded() {
    let (rsa, ed) = (TestKey::rsa("rsa-test-1"), TestKey::ed("ed-1"));
    let mut rsa_as_ps = rsa.jwk();
    rsa_as_ps["alg"] = json!("PS256");
    let mut enc = ed.jwk();
    enc["kid"] = json!("ed-enc");
    enc["use"] = json!("enc");
    let oct = json!({"kty": "oct", "kid": "hmac", "k": b64(RSA_FIXTURE_PUB_PEM)});
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(
        &path,
        &json!({"keys": [rsa_as_ps, oct, enc, ed.jwk(), {"kty": 42}]}),
    );
    let auth = lumina_auth::Authenticator::new(config(lumina_auth::JwksSource::File(path)))
        .await
        .expect("one usable key is enough");
    assert_eq!(auth.key_stats().keys, 1);
    assert!(auth.verify(&ed.token(&claims())).await.is_ok());
    let token = rsa.token(&claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"rsa-test-1\"".into()),
    );
    let token = rsa.token_with_header(&json!({"alg": "RS256", "kid": "hmac"}), &claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"hmac\"".into()),
    );
}

#[tokio::test]
async fn time_claims_are_enforced_with_leeway() {
    let ed = TestKey::ed("ed-1");
    let (auth, _dir) = file_authenticator(&[&ed]).await;
    let expired = ed.token(&with("exp", json!(now() - 120)));
    let result = auth.verify(&expired).await;
    assert!(
        matches!(result, Err(AuthError::Expired { .. })),
        "{result:?}"
    );
    assert_refused(
        result.clone(),
        &expired,
        result.clone().expect_err("refused"),
    );

    let early = ed.token(&with("nbf", json!(now() + 600)));
    let result = auth.verify(&early).await;
    assert!(
        matches!(result, Err(AuthError::NotYetValid { .. })),
        "{result:?}"
    );

    // Within the default 30 s leeway in both directions.
    assert!(auth
        .verify(&ed.token(&with("exp", json!(now() - 5))))
        .await
        .is_ok());
    assert!(auth
        .verify(&ed.token(&with("nbf", json!(now() + 5))))
        .await
        .is_ok());
}

#[tokio::test]
async fn issuer_audience_sub_and_tenant_are_mandatory() {
    let ed = TestKey::ed("ed-1");
    let (auth, _dir) = file_authenticator(&[&ed]).await;
    let cases = [
        (
            with("iss", json!("https://evil.test")),
            AuthError::WrongIssuer("\"https://evil.test\"".into()),
        ),
        (with("aud", json!("other")), AuthError::WrongAudience),
        (with("aud", json!(["a", "b"])), AuthError::WrongAudience),
        (without("iss"), AuthError::MissingClaim("iss")),
        (without("aud"), AuthError::MissingClaim("aud")),
        (without("exp"), AuthError::MissingClaim("exp")),
        (without("sub"), AuthError::MissingClaim("sub")),
        (without("tenant"), AuthError::MissingClaim("tenant")),
        (with("tenant", json!("")), AuthError::InvalidClaim("tenant")),
    ];
    for (claims, expected) in cases {
        let token = ed.token(&claims);
        assert_refused(auth.verify(&token).await, &token, expected);
    }
    let c = with("aud", json!(["other", AUDIENCE]));
    assert_eq!(
        auth.verify(&ed.token(&c)).await,
        Ok(alice(c["exp"].as_i64().expect("exp")))
    );
}

#[tokio::test]
async fn scopes_come_from_scope_or_scp() {
    let ed = TestKey::ed("ed-1");
    let (auth, _dir) = file_authenticator(&[&ed]).await;
    let from_scope = with("scope", json!(format!("{SCOPE_READ} {SCOPE_WRITE}")));
    let p = auth.verify(&ed.token(&from_scope)).await.expect("valid");
    assert_eq!(
        p.scopes,
        vec![SCOPE_READ.to_owned(), SCOPE_WRITE.to_owned()]
    );
    assert!(p.has_scope(SCOPE_WRITE) && !p.has_scope(SCOPE_ADMIN));

    let mut from_scp = without("scope");
    from_scp["scp"] = json!([SCOPE_ADMIN, SCOPE_READ]);
    let p = auth.verify(&ed.token(&from_scp)).await.expect("valid");
    assert_eq!(
        p.scopes,
        vec![SCOPE_ADMIN.to_owned(), SCOPE_READ.to_owned()]
    );
    assert!(p.has_scope(SCOPE_ADMIN));

    // A token granting no lumina scope could do nothing but `hello`: refused at the door.
    let token = ed.token(&without("scope"));
    assert_refused(auth.verify(&token).await, &token, AuthError::MissingScope);
}

#[tokio::test]
async fn tampered_tokens_are_refused() {
    let (rsa, ec, ed) = (
        TestKey::rsa("rsa-test-1"),
        TestKey::ec("ec-1"),
        TestKey::ed("ed-1"),
    );
    let (auth, _dir) = file_authenticator(&[&rsa, &ec, &ed]).await;
    for key in [&rsa, &ec, &ed] {
        let token = key.token(&claims());
        let parts: Vec<&str> = token.split('.').collect();

        // Payload: grant admin in a different tenant, keep the original signature.
        let forged = b64(with("tenant", json!("other")).to_string());
        let tampered = format!("{}.{forged}.{}", parts[0], parts[2]);
        assert_refused(
            auth.verify(&tampered).await,
            &tampered,
            AuthError::BadSignature,
        );

        // Signature: flip one bit in the middle.
        let mut sig = base64_decode(parts[2]);
        let mid = sig.len() / 2;
        sig[mid] ^= 0x01;
        let tampered = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
        assert_refused(
            auth.verify(&tampered).await,
            &tampered,
            AuthError::BadSignature,
        );

        // Signature from another key of the same type under this kid.
        let impostor = match key.alg() {
            "ES256" => TestKey::ec(&key.kid),
            "EdDSA" => TestKey::ed(&key.kid),
            _ => continue,
        };
        let token = impostor.token(&claims());
        assert_refused(auth.verify(&token).await, &token, AuthError::BadSignature);
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .expect("base64url")
}

#[tokio::test]
async fn kid_is_required_only_when_the_set_has_several_keys() {
    let (ec, ed) = (TestKey::ec("ec-1"), TestKey::ed("ed-1"));
    let no_kid = ed.token_with_header(&json!({"alg": "EdDSA", "typ": "JWT"}), &claims());

    let (single, _d1) = file_authenticator(&[&ed]).await;
    assert!(single.verify(&no_kid).await.is_ok());

    let (several, _d2) = file_authenticator(&[&ec, &ed]).await;
    assert_refused(
        several.verify(&no_kid).await,
        &no_kid,
        AuthError::KidRequired(2),
    );
}

#[tokio::test]
async fn malformed_tokens_are_refused() {
    let ed = TestKey::ed("ed-1");
    let (auth, _dir) = file_authenticator(&[&ed]).await;
    let good = ed.token(&claims());
    let parts: Vec<&str> = good.split('.').collect();
    let crit = ed.token_with_header(
        &json!({"alg": "EdDSA", "kid": "ed-1", "crit": ["exp"], "exp": 1}),
        &claims(),
    );
    let not_object =
        ed.token_with_header(&json!({"alg": "EdDSA", "kid": "ed-1"}), &json!(["array"]));
    let cases = [
        (String::new(), AuthError::Malformed("not three segments")),
        (
            format!("{}.{}", parts[0], parts[1]),
            AuthError::Malformed("not three segments"),
        ),
        (
            format!("{good}.extra"),
            AuthError::Malformed("not three segments"),
        ),
        (
            format!("!!.{}.{}", parts[1], parts[2]),
            AuthError::Malformed("header is not base64url"),
        ),
        (
            format!("{}.{}.{}", b64("[1]"), parts[1], parts[2]),
            AuthError::Malformed("header is not a JSON object"),
        ),
        (
            format!("{}.{}.{}", b64("{}"), parts[1], parts[2]),
            AuthError::Malformed("header has no alg"),
        ),
        (
            format!("{}..{}", parts[0], parts[2]),
            AuthError::Malformed("empty segment"),
        ),
        (
            format!("{}.{}.", parts[0], parts[1]),
            AuthError::Malformed("empty segment"),
        ),
        (
            format!("{good}{}", "A".repeat(17_000)),
            AuthError::Malformed("token too long"),
        ),
        (crit, AuthError::CriticalHeader),
        (
            not_object,
            AuthError::Malformed("payload is not a JSON object"),
        ),
    ];
    for (token, expected) in cases {
        assert_refused(auth.verify(&token).await, &token, expected);
    }
}
