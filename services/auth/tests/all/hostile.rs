//! A corpus of hostile JWTs, each built here from real keys, that `Authenticator::verify`
//! must refuse — with the expected reason (so a token refused "by luck" for another reason
//! is noticed), the one opaque public message, a log text that carries no part of the token,
//! and, for refusals that need no key, without touching the key cache.
//!
//! Keys: the 2048-bit RSA fixture, fresh P-256 and Ed25519 keys (all three in the JWKS), a
//! fresh P-384 key and the 1024-bit RSA fixture (both published in the JWKS too, where the
//! loader must skip them), and fresh "attacker" keys that are not published at all.

use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine as _;
use lumina_auth::{AuthConfig, AuthError, Authenticator, JwksSource, PUBLIC_MESSAGE};
use serde_json::{json, Value};

use super::support::*;

mod craft;
mod legacy_rsa;
use craft::*;
use legacy_rsa::LegacyRsa;

/// The test-only 1024-bit RSA key (n, e, d as a private JWK; see tests/fixtures/README.md).
const RSA_1024_FIXTURE_JWK: &str = include_str!("../fixtures/rsa-1024-test-key.jwk.json");

/// What `verify` must answer.
enum Want {
    Is(AuthError),
    Expired,
    NotYetValid,
}

struct Case {
    name: &'static str,
    token: String,
    want: Want,
}

fn case(name: &'static str, token: String, want: AuthError) -> Case {
    Case {
        name,
        token,
        want: Want::Is(want),
    }
}

/// How `lumina-auth` renders an attacker-controlled string in a reason (quoted, escaped, at
/// most 64 characters).
fn logged(s: &str) -> String {
    let mut cut: String = s.chars().take(64).collect();
    if s.chars().count() > 64 {
        cut.push('…');
    }
    format!("{cut:?}")
}

fn claims_with(key: &str, value: Value) -> Value {
    let mut c = claims();
    c[key] = value;
    c
}

fn claims_without(keys: &[&str]) -> Value {
    let mut c = claims();
    let map = c.as_object_mut().expect("claims are an object");
    for key in keys {
        map.remove(*key);
    }
    c
}

/// The valid claim set as JSON text with `extra` members spliced in before the closing
/// brace (duplicates that a `Value` could not hold).
fn claims_text_with(extra: &str) -> String {
    let text = claims().to_string();
    format!("{},{extra}}}", &text[..text.len() - 1])
}

#[tokio::test]
async fn hostile_tokens_are_all_refused() {
    let rsa = TestKey::rsa("rsa-test-1");
    let ec = TestKey::ec("ec-1");
    let ed = TestKey::ed("ed-1");
    let p384 = TestKey::ec384("p384");
    let weak = LegacyRsa::fixture();
    // Never published: the keys an attacker signs with.
    let attacker_ed = TestKey::ed("attacker");
    let attacker_ec = TestKey::ec("attacker-ec");
    let impostor_ed = TestKey::ed("ed-1");
    let impostor_ec = TestKey::ec("ec-1");

    // The JWKS publishes the weak RSA and the P-384 key as well: the loader must skip both.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(
        &path,
        &json!({"keys": [rsa.jwk(), ec.jwk(), ed.jwk(), p384.jwk(), weak.public_jwk()]}),
    );
    let mut cfg = AuthConfig::new(ISSUER, AUDIENCE, JwksSource::File(path));
    // Every unknown kid reloads, so "refused before key lookup" is observable below.
    cfg.refresh_min_interval = Duration::ZERO;
    let auth = Authenticator::new(cfg).await.expect("authenticator");
    assert_eq!(
        auth.key_stats().keys,
        3,
        "P-384 and 1024-bit RSA are skipped"
    );

    // Embedded-key headers point here; nothing may ever be fetched from it.
    let attacker_jwks = JwksServer::start(&jwks(&[&attacker_ed]), Duration::ZERO).await;

    let good = ed.token(&claims());
    let [good_h, good_p, good_s] = segments(&good);
    let c = claims();
    let ed_header = |extra: Value| {
        let mut h = json!({"alg": "EdDSA", "typ": "JWT", "kid": "ed-1"});
        for (k, v) in extra.as_object().expect("object").clone() {
            h[k] = v;
        }
        h
    };
    let unsigned = |header: Value| format!("{}.{}.", b64(header.to_string()), b64(c.to_string()));
    let long_kid = "k".repeat(8_000);
    let (url_claims, url_payload) = claims_needing_url_alphabet();
    let url_sig_token = token_with_url_alphabet_signature(&ed);
    let [us_h, us_p, us_s] = segments(&url_sig_token);
    let ec_token = ec.token(&c);
    let [ec_h, ec_p, ec_s] = segments(&ec_token);
    let p384_sig = p384.sign(format!("{ec_h}.{ec_p}").as_bytes());
    let weak_sig =
        weak.sign(format!("{}.{good_p}", b64(r#"{"alg":"RS256","kid":"rsa-test-1"}"#)).as_bytes());
    let nested_inner = ed.token(&c);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    // Padded header: pick a header whose JSON length is not a multiple of 3.
    let padded_header_json = r#"{"alg":"EdDSA","kid":"ed-1"}"#;
    assert_ne!(padded_header_json.len() % 3, 0);
    let payload_json = c.to_string();
    let padded_payload_json = if payload_json.len().is_multiple_of(3) {
        claims_text_with(r#""pad":"x""#)
    } else {
        payload_json.clone()
    };
    assert_ne!(padded_payload_json.len() % 3, 0);

    let cases = vec![
        // --- kid injection ---
        case(
            "kid path traversal",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": "../../../../etc/passwd"}), &c),
            AuthError::UnknownKey(logged("../../../../etc/passwd")),
        ),
        case(
            "kid SQL injection",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": "x' OR '1'='1' --"}), &c),
            AuthError::UnknownKey(logged("x' OR '1'='1' --")),
        ),
        case(
            "kid with NUL and newline",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": "ed-1\u{0}\nadmin"}), &c),
            AuthError::UnknownKey(logged("ed-1\u{0}\nadmin")),
        ),
        case(
            "very long kid (8000 characters)",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": long_kid}), &c),
            AuthError::UnknownKey(logged(&long_kid)),
        ),
        case(
            "kid as a number",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": 1}), &c),
            AuthError::Malformed("kid is not a string"),
        ),
        case(
            "kid of another key (an EC key's kid on an EdDSA token)",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": "ec-1"}), &c),
            AuthError::KeyAlgorithmMismatch {
                kid: logged("ec-1"),
                alg: "EdDSA",
            },
        ),
        case(
            "kid of a key the loader skipped (1024-bit RSA)",
            weak.token(&json!({"alg": "RS256", "kid": weak.kid}), &c),
            AuthError::UnknownKey(logged("rsa-1024-test")),
        ),
        case(
            "signature of another Ed25519 key under the same kid",
            impostor_ed.token(&c),
            AuthError::BadSignature,
        ),
        case(
            "signature of another P-256 key under the same kid",
            impostor_ec.token(&c),
            AuthError::BadSignature,
        ),
        // --- embedded keys and key URLs: never used, never fetched ---
        case(
            "jwk header carrying the attacker's key",
            attacker_ed.token_with_header(&ed_header(json!({"jwk": attacker_ed.jwk()})), &c),
            AuthError::BadSignature,
        ),
        case(
            "jwk header carrying the legitimate public key",
            attacker_ed.token_with_header(&ed_header(json!({"jwk": ed.jwk()})), &c),
            AuthError::BadSignature,
        ),
        case(
            "jwk header and no kid",
            attacker_ed.token_with_header(
                &json!({"alg": "EdDSA", "jwk": attacker_ed.jwk()}),
                &c,
            ),
            AuthError::KidRequired(3),
        ),
        case(
            "jku header naming the attacker's JWKS and kid",
            attacker_ed.token_with_header(
                &json!({"alg": "EdDSA", "kid": "attacker", "jku": attacker_jwks.url}),
                &c,
            ),
            AuthError::UnknownKey(logged("attacker")),
        ),
        case(
            "x5u header",
            attacker_ed.token_with_header(&ed_header(json!({"x5u": attacker_jwks.url})), &c),
            AuthError::BadSignature,
        ),
        case(
            "x5c header carrying the attacker's key",
            attacker_ec.token_with_header(
                &json!({"alg": "ES256", "kid": "ec-1",
                        "x5c": [STANDARD.encode(attacker_ec.public_key_bytes())]}),
                &c,
            ),
            AuthError::BadSignature,
        ),
        // --- critical and unsupported header parameters (signed by the real key) ---
        case(
            "crit naming a claim",
            ed.token_with_header(&ed_header(json!({"crit": ["exp"], "exp": 1})), &c),
            AuthError::CriticalHeader,
        ),
        case(
            "crit empty",
            ed.token_with_header(&ed_header(json!({"crit": []})), &c),
            AuthError::CriticalHeader,
        ),
        case(
            "crit b64 (unencoded payload)",
            ed.token_with_header(&ed_header(json!({"b64": false, "crit": ["b64"]})), &c),
            AuthError::CriticalHeader,
        ),
        case(
            "b64 false without crit",
            ed.token_with_header(&ed_header(json!({"b64": false})), &c),
            AuthError::UnsupportedHeader("b64"),
        ),
        case(
            "nested JWT (cty JWT, payload is a token)",
            ed.token_from_segments(
                &b64(ed_header(json!({"cty": "JWT"})).to_string()),
                &b64(&nested_inner),
            ),
            AuthError::UnsupportedHeader("cty"),
        ),
        case(
            "nested JWT marker on a claims payload (cty jwt)",
            ed.token_with_header(&ed_header(json!({"cty": "jwt"})), &c),
            AuthError::UnsupportedHeader("cty"),
        ),
        // --- size ---
        case(
            "oversized token (1 MiB claim)",
            ed.token(&claims_with("blob", json!("A".repeat(1 << 20)))),
            AuthError::Malformed("token too long"),
        ),
        case(
            "oversized token (1 MiB header)",
            ed.token_with_header(&ed_header(json!({"pad": "A".repeat(1 << 20)})), &c),
            AuthError::Malformed("token too long"),
        ),
        // --- duplicate members (signed by the real key) ---
        case(
            "two exp (expired first, far future last)",
            ed.token_from_json(
                r#"{"alg":"EdDSA","kid":"ed-1"}"#,
                &format!(
                    r#"{{"exp":{},"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","tenant":"acme","scope":"lumina:session:read","exp":{}}}"#,
                    now() - 3600,
                    now() + 86_400 * 365
                ),
            ),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "two sub",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}"#, &claims_text_with(r#""sub":"admin""#)),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "two tenant",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}"#, &claims_text_with(r#""tenant":"other""#)),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "two scope",
            ed.token_from_json(
                r#"{"alg":"EdDSA","kid":"ed-1"}"#,
                &claims_text_with(r#""scope":"lumina:admin""#),
            ),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "duplicate tenant spelled with a JSON escape",
            ed.token_from_json(
                r#"{"alg":"EdDSA","kid":"ed-1"}"#,
                &claims_text_with(r#""\u0074enant":"other""#),
            ),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "duplicate member inside a nested claim",
            ed.token_from_json(
                r#"{"alg":"EdDSA","kid":"ed-1"}"#,
                &claims_text_with(r#""ctx":{"role":"user","role":"admin"}"#),
            ),
            AuthError::Malformed("payload has a duplicate member"),
        ),
        case(
            "duplicate header alg (none first)",
            ed.token_from_json(r#"{"alg":"none","kid":"ed-1","alg":"EdDSA"}"#, &c.to_string()),
            AuthError::Malformed("header has a duplicate member"),
        ),
        case(
            "duplicate header kid",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ec-1","kid":"ed-1"}"#, &c.to_string()),
            AuthError::Malformed("header has a duplicate member"),
        ),
        // --- curves ---
        case(
            "ES256 header, P-256 kid, P-384 signature",
            format!("{ec_h}.{ec_p}.{}", b64(&p384_sig)),
            AuthError::BadSignature,
        ),
        case(
            "ES256 header naming the (skipped) P-384 key",
            p384.token_with_header(&json!({"alg": "ES256", "kid": "p384"}), &c),
            AuthError::UnknownKey(logged("p384")),
        ),
        case(
            "ES384 with a P-384 key",
            p384.token(&c),
            AuthError::AlgorithmNotAllowed(logged("ES384")),
        ),
        case(
            "ES256 signature in DER instead of r||s",
            format!("{ec_h}.{ec_p}.{}", b64(ecdsa_der(&decode(&ec_s)))),
            AuthError::BadSignature,
        ),
        case(
            "ES256 all-zero signature (r = s = 0)",
            format!("{ec_h}.{ec_p}.{}", b64([0u8; 64])),
            AuthError::BadSignature,
        ),
        case(
            "Ed25519 signature with S + L",
            format!("{good_h}.{good_p}.{}", b64(ed25519_malleated(&decode(&good_s)))),
            AuthError::BadSignature,
        ),
        // --- RSA below 2048 bits ---
        case(
            "1024-bit RSA signature under the 2048-bit key's kid",
            format!(
                "{}.{good_p}.{}",
                b64(r#"{"alg":"RS256","kid":"rsa-test-1"}"#),
                b64(&weak_sig)
            ),
            AuthError::BadSignature,
        ),
        // --- non-canonical base64url (each re-signed over exactly the text sent) ---
        case(
            "header with = padding",
            ed.token_from_segments(&URL_SAFE.encode(padded_header_json), &good_p),
            AuthError::Malformed("header is not base64url"),
        ),
        case(
            "payload with = padding",
            ed.token_from_segments(&good_h, &URL_SAFE.encode(&padded_payload_json)),
            AuthError::Malformed("payload is not base64url"),
        ),
        case(
            "signature with = padding",
            format!("{good_h}.{good_p}.{}", URL_SAFE.encode(decode(&good_s))),
            AuthError::Malformed("signature is not base64url"),
        ),
        case(
            "payload in the standard alphabet (+ /)",
            ed.token_from_segments(&good_h, &STANDARD.encode(url_claims.to_string()).replace('=', "")),
            AuthError::Malformed("payload is not base64url"),
        ),
        case(
            "signature in the standard alphabet (+ /)",
            format!("{us_h}.{us_p}.{}", us_s.replace('-', "+").replace('_', "/")),
            AuthError::Malformed("signature is not base64url"),
        ),
        case(
            "signature with non-zero trailing bits",
            format!("{good_h}.{good_p}.{}", with_trailing_bits(&good_s)),
            AuthError::Malformed("signature is not base64url"),
        ),
        case(
            "header with non-zero trailing bits",
            ed.token_from_segments(&with_trailing_bits(&b64(padded_header_json)), &good_p),
            AuthError::Malformed("header is not base64url"),
        ),
        case(
            "line break inside the payload segment",
            ed.token_from_segments(&good_h, &format!("{}\n{}", &url_payload[..10], &url_payload[10..])),
            AuthError::Malformed("payload is not base64url"),
        ),
        // --- algorithm / key-type confusion ---
        case(
            "RS256 token naming an EC key",
            rsa.token_with_header(&json!({"alg": "RS256", "kid": "ec-1"}), &c),
            AuthError::KeyAlgorithmMismatch {
                kid: logged("ec-1"),
                alg: "RS256",
            },
        ),
        case(
            "ES256 token naming the RSA key",
            ec.token_with_header(&json!({"alg": "ES256", "kid": "rsa-test-1"}), &c),
            AuthError::KeyAlgorithmMismatch {
                kid: logged("rsa-test-1"),
                alg: "ES256",
            },
        ),
        case(
            "EdDSA token naming the RSA key",
            ed.token_with_header(&json!({"alg": "EdDSA", "kid": "rsa-test-1"}), &c),
            AuthError::KeyAlgorithmMismatch {
                kid: logged("rsa-test-1"),
                alg: "EdDSA",
            },
        ),
        case(
            "HS256 keyed with the RSA public key (PEM)",
            hs256_token(RSA_FIXTURE_PUB_PEM.as_bytes(), "rsa-test-1", &c),
            AuthError::AlgorithmNotAllowed(logged("HS256")),
        ),
        case(
            "HS256 keyed with the Ed25519 public key",
            hs256_token(&ed.public_key_bytes(), "ed-1", &c),
            AuthError::AlgorithmNotAllowed(logged("HS256")),
        ),
        case(
            "HS256 keyed with the P-256 point",
            hs256_token(&ec.public_key_bytes(), "ec-1", &c),
            AuthError::AlgorithmNotAllowed(logged("HS256")),
        ),
        // --- none and other algorithm spellings ---
        case(
            "alg none",
            unsigned(json!({"alg": "none", "typ": "JWT"})),
            AuthError::AlgorithmNotAllowed(logged("none")),
        ),
        case(
            "alg None",
            unsigned(json!({"alg": "None", "kid": "ed-1"})),
            AuthError::AlgorithmNotAllowed(logged("None")),
        ),
        case(
            "alg NONE",
            unsigned(json!({"alg": "NONE"})),
            AuthError::AlgorithmNotAllowed(logged("NONE")),
        ),
        case(
            "alg nOnE",
            unsigned(json!({"alg": "nOnE", "kid": "unknown"})),
            AuthError::AlgorithmNotAllowed(logged("nOnE")),
        ),
        case(
            "alg none with a real signature",
            ed.token_with_header(&json!({"alg": "none", "kid": "ed-1"}), &c),
            AuthError::AlgorithmNotAllowed(logged("none")),
        ),
        case(
            "alg eddsa (wrong case)",
            ed.token_with_header(&json!({"alg": "eddsa", "kid": "ed-1"}), &c),
            AuthError::AlgorithmNotAllowed(logged("eddsa")),
        ),
        case(
            "alg with a trailing NUL",
            ed.token_with_header(&json!({"alg": "EdDSA\u{0}", "kid": "ed-1"}), &c),
            AuthError::AlgorithmNotAllowed(logged("EdDSA\u{0}")),
        ),
        case(
            "alg as an array",
            ed.token_with_header(&json!({"alg": ["EdDSA"], "kid": "ed-1"}), &c),
            AuthError::Malformed("header has no alg"),
        ),
        case(
            "alg null",
            ed.token_with_header(&json!({"alg": null, "kid": "ed-1"}), &c),
            AuthError::Malformed("header has no alg"),
        ),
        // --- signatures ---
        case(
            "empty signature",
            format!("{good_h}.{good_p}."),
            AuthError::Malformed("empty segment"),
        ),
        case(
            "one-byte signature",
            format!("{good_h}.{good_p}.AA"),
            AuthError::BadSignature,
        ),
        case(
            "signature truncated to an impossible length",
            format!("{good_h}.{good_p}.{}", &good_s[..good_s.len() - 1]),
            AuthError::Malformed("signature is not base64url"),
        ),
        case(
            "payload truncated, signature kept",
            format!("{good_h}.{}.{good_s}", &good_p[..good_p.len() - 4]),
            AuthError::BadSignature,
        ),
        // --- claims (all properly signed) ---
        Case {
            name: "expired",
            token: ed.token(&claims_with("exp", json!(now() - 3600))),
            want: Want::Expired,
        },
        Case {
            name: "not yet valid",
            token: ed.token(&claims_with("nbf", json!(now() + 3600))),
            want: Want::NotYetValid,
        },
        case(
            "wrong issuer",
            ed.token(&claims_with("iss", json!("https://issuer.test.evil"))),
            AuthError::WrongIssuer(logged("https://issuer.test.evil")),
        ),
        case(
            "issuer with a trailing slash",
            ed.token(&claims_with("iss", json!("https://issuer.test/"))),
            AuthError::WrongIssuer(logged("https://issuer.test/")),
        ),
        case(
            "issuer as an array",
            ed.token(&claims_with("iss", json!([ISSUER]))),
            AuthError::InvalidClaim("iss"),
        ),
        case(
            "wrong audience",
            ed.token(&claims_with("aud", json!("lumina-admin"))),
            AuthError::WrongAudience,
        ),
        case(
            "audience list without ours",
            ed.token(&claims_with("aud", json!(["lumin", "lumina "]))),
            AuthError::WrongAudience,
        ),
        case(
            "audience as an object",
            ed.token(&claims_with("aud", json!({AUDIENCE: true}))),
            AuthError::InvalidClaim("aud"),
        ),
        case(
            "missing exp",
            ed.token(&claims_without(&["exp"])),
            AuthError::MissingClaim("exp"),
        ),
        case(
            "missing tenant",
            ed.token(&claims_without(&["tenant"])),
            AuthError::MissingClaim("tenant"),
        ),
        case(
            "tenant escaping its namespace",
            ed.token(&claims_with("tenant", json!("../other"))),
            AuthError::InvalidClaim("tenant"),
        ),
        case(
            "missing scope",
            ed.token(&claims_without(&["scope"])),
            AuthError::MissingScope,
        ),
        case(
            "empty scope",
            ed.token(&claims_with("scope", json!("  "))),
            AuthError::MissingScope,
        ),
        case(
            "only foreign scopes",
            ed.token(&claims_with("scope", json!("openid profile"))),
            AuthError::MissingScope,
        ),
        case(
            "exp as a string",
            ed.token(&claims_with("exp", json!((now() + 300).to_string()))),
            AuthError::InvalidClaim("exp"),
        ),
        case(
            "exp as a boolean",
            ed.token(&claims_with("exp", json!(true))),
            AuthError::InvalidClaim("exp"),
        ),
        case(
            "exp null",
            ed.token(&claims_with("exp", Value::Null)),
            AuthError::InvalidClaim("exp"),
        ),
        case(
            "exp 1e300",
            ed.token(&claims_with("exp", json!(1e300))),
            AuthError::InvalidClaim("exp"),
        ),
        case(
            "nbf beyond f64 (1e400)",
            ed.token_from_json(
                r#"{"alg":"EdDSA","kid":"ed-1"}"#,
                &claims_text_with(r#""nbf":1e400"#),
            ),
            AuthError::Malformed("payload is not a JSON object"),
        ),
        case(
            "nbf as a string",
            ed.token(&claims_with("nbf", json!("0"))),
            AuthError::InvalidClaim("nbf"),
        ),
        case(
            "iat as a string",
            ed.token(&claims_with("iat", json!("yesterday"))),
            AuthError::InvalidClaim("iat"),
        ),
        case(
            "sub as a number",
            ed.token(&claims_with("sub", json!(0))),
            AuthError::InvalidClaim("sub"),
        ),
        case(
            "scope as a number",
            ed.token(&claims_with("scope", json!(7))),
            AuthError::InvalidClaim("scope"),
        ),
        // --- shape ---
        case(
            "empty token",
            String::new(),
            AuthError::Malformed("not three segments"),
        ),
        case(
            "header segment only",
            good_h.clone(),
            AuthError::Malformed("not three segments"),
        ),
        case(
            "two segments",
            format!("{good_h}.{good_p}"),
            AuthError::Malformed("not three segments"),
        ),
        case(
            "extra segment",
            format!("{good}.{good_s}"),
            AuthError::Malformed("not three segments"),
        ),
        case(
            "JWE-shaped (five segments)",
            format!("{good_h}.{good_p}.{good_s}.{good_p}.{good_s}"),
            AuthError::Malformed("not three segments"),
        ),
        case(
            "non-JSON header",
            format!("{}.{good_p}.{good_s}", b64("alg=EdDSA")),
            AuthError::Malformed("header is not a JSON object"),
        ),
        case(
            "header as a JSON array",
            ed.token_from_json(r#"[{"alg":"EdDSA","kid":"ed-1"}]"#, &c.to_string()),
            AuthError::Malformed("header is not a JSON object"),
        ),
        case(
            "header as a JSON string",
            ed.token_from_json(r#""EdDSA""#, &c.to_string()),
            AuthError::Malformed("header is not a JSON object"),
        ),
        case(
            "header with trailing bytes",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}x"#, &c.to_string()),
            AuthError::Malformed("header is not a JSON object"),
        ),
        case(
            "header with a UTF-8 BOM",
            ed.token_from_json("\u{feff}{\"alg\":\"EdDSA\",\"kid\":\"ed-1\"}", &c.to_string()),
            AuthError::Malformed("header is not a JSON object"),
        ),
        case(
            "payload as a JSON array",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}"#, &format!("[{c}]")),
            AuthError::Malformed("payload is not a JSON object"),
        ),
        case(
            "payload that is not UTF-8",
            ed.token_from_segments(&good_h, &b64(b"{\"sub\":\"\xff\"}")),
            AuthError::Malformed("payload is not a JSON object"),
        ),
        case(
            "payload with trailing bytes",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}"#, &format!("{c}{c}")),
            AuthError::Malformed("payload is not a JSON object"),
        ),
        case(
            "payload nested 200 levels deep",
            ed.token_from_json(r#"{"alg":"EdDSA","kid":"ed-1"}"#, &claims_text_with(&format!(r#""deep":{deep}"#))),
            AuthError::Malformed("payload is not a JSON object"),
        ),
    ];
    assert!(cases.len() >= 30, "the corpus has {} tokens", cases.len());

    // The honest token from the same keys verifies: the refusals are about the hostility.
    assert!(auth.verify(&good).await.is_ok(), "the valid token verifies");
    assert!(auth.verify(&rsa.token(&c)).await.is_ok());
    assert!(auth.verify(&ec.token(&c)).await.is_ok());

    let mut failures = Vec::new();
    for Case { name, token, want } in &cases {
        let loads_before = auth.key_stats().loads;
        let result = auth.verify(token).await;
        let loads_after = auth.key_stats().loads;
        let err = match result {
            Ok(principal) => {
                failures.push(format!("{name}: ACCEPTED as {principal:?}"));
                continue;
            }
            Err(err) => err,
        };
        let expected = match want {
            Want::Is(e) => err == *e,
            Want::Expired => matches!(err, AuthError::Expired { .. }),
            Want::NotYetValid => matches!(err, AuthError::NotYetValid { .. }),
        };
        if !expected {
            failures.push(format!("{name}: refused for another reason: {err:?}"));
        }
        assert_eq!(err.public_message(), PUBLIC_MESSAGE, "{name}");
        let log_text = format!("{err} {err:?}");
        for segment in token.split('.').filter(|s| s.len() > 8) {
            assert!(
                !log_text.contains(segment),
                "{name}: the reason leaks a token segment"
            );
        }
        // Refusals decided by the token alone must not reach the key cache.
        let before_lookup = matches!(
            err,
            AuthError::Malformed(_)
                | AuthError::AlgorithmNotAllowed(_)
                | AuthError::CriticalHeader
                | AuthError::UnsupportedHeader(_)
        ) && !matches!(err, AuthError::Malformed(m) if m.starts_with("payload") || m.starts_with("signature"));
        if before_lookup && loads_after != loads_before {
            failures.push(format!("{name}: refused as {err:?} but reloaded the JWKS"));
        }
    }
    assert_eq!(attacker_jwks.hits(), 0, "jku/x5u were fetched");
    assert!(
        failures.is_empty(),
        "{} of {} hostile tokens were mishandled:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
