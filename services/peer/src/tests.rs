use std::collections::HashMap;

use base64::Engine as _;
use lumina_config::{PeerNode, PeerSettings, Secret};
use pretty_assertions::assert_eq;

use super::*;

const SHARED: &str = "shared-key-of-the-fleet-0123456789abcdef";
const MASTER: &str = "derivation-master-secret-0123456789abcdef";
const NOW: i64 = 1_800_000_000;

fn node(scopes: &[&str], ed25519: Option<&str>) -> PeerNode {
    PeerNode {
        ed25519_public_key: ed25519.map(str::to_owned),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        tenant: None,
    }
}

/// The verifier of node "hub", accepting node "a" (both scopes).
fn hub(shared: bool, master: bool, a_public: Option<&str>) -> PeerSettings {
    PeerSettings {
        node: Some("hub".into()),
        shared_key: shared.then(|| Secret::new(SHARED)),
        derive_master: master.then(|| Secret::new(MASTER)),
        nodes: [("a".to_owned(), node(&[SCOPE_READ, SCOPE_WRITE], a_public))].into(),
        ..PeerSettings::default()
    }
}

fn signer(settings: PeerSettings) -> Signer {
    Signer::from_settings(&settings).unwrap().unwrap()
}

fn node_a() -> PeerSettings {
    PeerSettings {
        node: Some("a".into()),
        ..PeerSettings::default()
    }
}

type Headers = HashMap<&'static str, String>;

fn headers(signed: &Signed) -> Headers {
    signed.headers().into_iter().collect()
}

fn verify(verifier: &Verifier, headers: &Headers, now: i64) -> Result<Verified, Refused> {
    verifier.verify_at(|name| headers.get(name).map(String::as_str), now)
}

fn ok(kind: KeyKind, scope: &str) -> Result<Verified, Refused> {
    Ok(Verified {
        node: "a".into(),
        scope: scope.into(),
        kind,
    })
}

#[test]
fn each_key_kind_round_trips() {
    let pair = generate_ed25519().unwrap();
    let cases = [
        (
            KeyKind::Ed25519,
            PeerSettings {
                ed25519_private_key: Some(pair.private_seed.clone()),
                shared_key: Some(Secret::new(SHARED)),
                ..node_a()
            },
            hub(true, true, Some(&pair.public_key)),
        ),
        (
            KeyKind::Derived,
            PeerSettings {
                derive_master: Some(Secret::new(MASTER)),
                shared_key: Some(Secret::new(SHARED)),
                ..node_a()
            },
            hub(true, true, None),
        ),
        (
            KeyKind::Derived,
            PeerSettings {
                derived_key: Some(Secret::new(
                    base64::engine::general_purpose::STANDARD
                        .encode(derive_key(MASTER.as_bytes(), "a")),
                )),
                ..node_a()
            },
            hub(false, true, None),
        ),
        (
            KeyKind::Shared,
            PeerSettings {
                shared_key: Some(Secret::new(SHARED)),
                ..node_a()
            },
            hub(true, false, None),
        ),
    ];
    for (kind, signing, verifying) in cases {
        let signer = signer(signing);
        assert_eq!(signer.kind(), kind, "the strongest key is used");
        let verifier = Verifier::from_settings(&verifying).unwrap();
        for scope in [SCOPE_READ, SCOPE_WRITE] {
            let signed = signer.sign_at(scope, "hub", NOW).unwrap();
            assert_eq!(
                verify(&verifier, &headers(&signed), NOW + 5),
                ok(kind, scope)
            );
        }
    }
}

#[test]
fn the_canonical_string_is_five_lines() {
    let claims = Claims {
        node: "a".into(),
        ts: 17,
        nonce: "0123456789abcdef".into(),
        scope: SCOPE_WRITE.into(),
        audience: "hub".into(),
    };
    assert_eq!(
        claims.canonical(),
        "a\n17\n0123456789abcdef\na2a:write\nhub"
    );
    // The signature is over exactly that string: an HMAC computed independently matches.
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let signed = signer.sign_claims(claims.clone());
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SHARED.as_bytes());
    assert!(ring::hmac::verify(&key, claims.canonical().as_bytes(), &signed.signature).is_ok());
}

#[test]
fn tampered_fields_are_refused() {
    let signer = signer(PeerSettings {
        derive_master: Some(Secret::new(MASTER)),
        ..node_a()
    });
    let mut verifying = hub(false, true, None);
    verifying
        .nodes
        .insert("b".into(), node(&[SCOPE_READ, SCOPE_WRITE], None));
    let verifier = Verifier::from_settings(&verifying).unwrap();
    let signed = signer.sign_at(SCOPE_READ, "hub", NOW).unwrap();
    let good = headers(&signed);
    let tampered = [
        (HEADER_NODE, "b".to_owned()),
        (HEADER_TS, (NOW + 1).to_string()),
        (HEADER_NONCE, "ffffffffffffffffffffffffffffffff".to_owned()),
        (HEADER_SCOPE, SCOPE_WRITE.to_owned()),
        (HEADER_AUDIENCE, "other".to_owned()),
        (HEADER_SIGNATURE, {
            let mut sig = signed.signature.clone();
            sig[0] ^= 1;
            URL_SAFE_NO_PAD.encode(sig)
        }),
    ];
    for (name, value) in tampered {
        let mut h = good.clone();
        h.insert(name, value);
        assert_eq!(verify(&verifier, &h, NOW), Err(Refused), "{name}");
    }
    assert_eq!(
        verify(&verifier, &good, NOW),
        ok(KeyKind::Derived, SCOPE_READ)
    );
}

#[test]
fn a_signature_is_accepted_only_by_its_audience() {
    // Node `a` signs a call for `hub`. Another deployment, `spoke`, trusts `a` with the
    // same key: the call presented there (a replay by `hub`, say) is refused, for every key
    // kind, before its nonce is remembered.
    let cases = [
        (
            PeerSettings {
                shared_key: Some(Secret::new(SHARED)),
                ..node_a()
            },
            hub(true, false, None),
        ),
        (
            PeerSettings {
                derive_master: Some(Secret::new(MASTER)),
                ..node_a()
            },
            hub(false, true, None),
        ),
    ];
    for (signing, verifying) in cases {
        let signer = signer(signing);
        let at_hub = Verifier::from_settings(&verifying).unwrap();
        let spoke = Verifier::from_settings(&PeerSettings {
            node: Some("spoke".into()),
            ..verifying.clone()
        })
        .unwrap();
        let nameless = Verifier::from_settings(&PeerSettings {
            node: None,
            ..verifying
        })
        .unwrap();
        let for_hub = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap());
        assert_eq!(verify(&spoke, &for_hub, NOW), Err(Refused));
        // A verifier without a node name of its own accepts no signature at all.
        assert_eq!(verify(&nameless, &for_hub, NOW), Err(Refused));
        // Relabelling the audience breaks the signature.
        let mut relabelled = for_hub.clone();
        relabelled.insert(HEADER_AUDIENCE, "spoke".into());
        assert_eq!(verify(&spoke, &relabelled, NOW), Err(Refused));
        // The audience itself accepts it (its nonce was not spent by the refusals).
        assert_eq!(
            verify(&at_hub, &for_hub, NOW).map(|v| v.node),
            Ok("a".to_owned())
        );
    }
}

#[test]
fn timestamps_outside_the_window_are_refused() {
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&hub(true, false, None)).unwrap();
    let at = |now: i64| headers(&signer.sign_at(SCOPE_READ, "hub", now).unwrap());
    assert_eq!(
        verify(&verifier, &at(NOW - 301), NOW),
        Err(Refused),
        "expired"
    );
    assert_eq!(
        verify(&verifier, &at(NOW + 301), NOW),
        Err(Refused),
        "future"
    );
    assert!(verify(&verifier, &at(NOW - 300), NOW).is_ok());
    assert!(verify(&verifier, &at(NOW + 300), NOW).is_ok());
}

#[test]
fn a_replayed_nonce_is_refused_and_memory_is_bounded() {
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&PeerSettings {
        nonce_capacity: 3,
        window_secs: 10,
        ..hub(true, false, None)
    })
    .unwrap();
    let first = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap());
    assert!(verify(&verifier, &first, NOW).is_ok());
    assert_eq!(verify(&verifier, &first, NOW + 1), Err(Refused), "replay");
    for _ in 0..2 {
        let h = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap());
        assert!(verify(&verifier, &h, NOW).is_ok());
    }
    let fourth = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap());
    assert_eq!(verify(&verifier, &fourth, NOW), Err(Refused), "full");
    // Twice the window later the old nonces are forgotten (their timestamps are out of
    // the window by then, so they cannot be replayed anyway).
    let later = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW + 20).unwrap());
    assert!(verify(&verifier, &later, NOW + 20).is_ok());
    assert_eq!(verifier.nonces.lock().unwrap().len(), 1);
    assert_eq!(verify(&verifier, &first, NOW + 20), Err(Refused));
}

#[test]
fn an_unspent_call_leaves_replay_to_the_callers_memory() {
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&PeerSettings {
        window_secs: 10,
        ..hub(true, false, None)
    })
    .unwrap();
    let signed = signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap();
    let h = headers(&signed);
    let get = |name: &str| h.get(name).map(String::as_str);
    let unspent = verifier.verify_unspent_at(get, NOW).unwrap();
    assert_eq!(
        unspent.nonce_key(),
        format!("a:{}", signed.claims.nonce),
        "keyed by node and nonce"
    );
    assert_eq!(unspent.ttl_secs(), 20);
    // The local memory is not consulted nor filled: the shared one decides.
    assert!(verifier.verify_unspent_at(get, NOW).is_ok());
    assert_eq!(verifier.nonces.lock().unwrap().len(), 0);
    assert_eq!(unspent.clone().spend(false), Err(Refused), "seen: a replay");
    assert_eq!(unspent.spend(true).map(|v| v.node), Ok("a".to_owned()));
    // Everything else is still checked.
    assert_eq!(
        verifier.verify_unspent_at(get, NOW + 11).map(|_| ()),
        Err(Refused),
        "expired"
    );
}

#[test]
fn a_wrong_key_is_refused() {
    let other = "another-fleet-shared-key-0123456789abcdef";
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(other)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&hub(true, false, None)).unwrap();
    let h = headers(&signer.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    assert_eq!(verify(&verifier, &h, NOW), Err(Refused));

    let mine = generate_ed25519().unwrap();
    let theirs = generate_ed25519().unwrap();
    let signer = self::signer(PeerSettings {
        ed25519_private_key: Some(mine.private_seed),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&hub(false, false, Some(&theirs.public_key))).unwrap();
    let h = headers(&signer.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    assert_eq!(verify(&verifier, &h, NOW), Err(Refused));
}

#[test]
fn weaker_kinds_than_configured_are_refused() {
    let pair = generate_ed25519().unwrap();
    let shared = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let derived = signer(PeerSettings {
        derive_master: Some(Secret::new(MASTER)),
        ..node_a()
    });
    // The node has an Ed25519 key: HMAC signatures (even valid ones) are a downgrade.
    let strict = Verifier::from_settings(&hub(true, true, Some(&pair.public_key))).unwrap();
    for s in [&shared, &derived] {
        let h = headers(&s.sign_at(SCOPE_READ, "hub", NOW).unwrap());
        assert_eq!(verify(&strict, &h, NOW), Err(Refused), "{:?}", s.kind());
    }
    // A master is configured: a shared-key signature is a downgrade.
    let derived_only = Verifier::from_settings(&hub(true, true, None)).unwrap();
    let h = headers(&shared.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    assert_eq!(verify(&derived_only, &h, NOW), Err(Refused));
    // Relabelling the algorithm does not help either.
    let mut h = headers(&shared.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    h.insert(HEADER_ALG, KeyKind::Derived.wire_name().into());
    assert_eq!(verify(&derived_only, &h, NOW), Err(Refused));
}

#[test]
fn scopes_are_mapped_per_node() {
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let mut settings = hub(true, false, None);
    settings.nodes.insert("a".into(), node(&[SCOPE_READ], None));
    let verifier = Verifier::from_settings(&settings).unwrap();
    let read = headers(&signer.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    assert_eq!(
        verify(&verifier, &read, NOW),
        ok(KeyKind::Shared, SCOPE_READ)
    );
    let write = headers(&signer.sign_at(SCOPE_WRITE, "hub", NOW).unwrap());
    assert_eq!(verify(&verifier, &write, NOW), Err(Refused));
    // An unknown node is refused even with the fleet's key.
    let stranger = self::signer(PeerSettings {
        node: Some("z".into()),
        shared_key: Some(Secret::new(SHARED)),
        ..PeerSettings::default()
    });
    let h = headers(&stranger.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    assert_eq!(verify(&verifier, &h, NOW), Err(Refused));
}

#[test]
fn malformed_headers_get_the_one_opaque_refusal() {
    let signer = signer(PeerSettings {
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&hub(true, false, None)).unwrap();
    let good = headers(&signer.sign_at(SCOPE_READ, "hub", NOW).unwrap());
    let mut cases: Vec<Headers> = Vec::new();
    for name in [
        HEADER_NODE,
        HEADER_TS,
        HEADER_NONCE,
        HEADER_SCOPE,
        HEADER_AUDIENCE,
        HEADER_ALG,
        HEADER_SIGNATURE,
    ] {
        let mut h = good.clone();
        h.remove(name);
        cases.push(h);
    }
    for (name, value) in [
        (HEADER_NODE, "a\nb"),
        (HEADER_NODE, ""),
        (HEADER_TS, "-5"),
        (HEADER_TS, "12a"),
        (HEADER_TS, "99999999999999999999"),
        (HEADER_NONCE, "short"),
        (HEADER_NONCE, "0123456789abcdef\n"),
        (HEADER_SCOPE, "admin"),
        (HEADER_ALG, "none"),
        (HEADER_ALG, "HMAC-SHARED"),
        (HEADER_SIGNATURE, "***"),
        (HEADER_SIGNATURE, "AAAA"),
    ] {
        let mut h = good.clone();
        h.insert(name, value.to_owned());
        cases.push(h);
    }
    for h in &cases {
        let refused = verify(&verifier, h, NOW);
        assert_eq!(refused, Err(Refused), "{h:?}");
        assert_eq!(Refused.to_string(), "peer signature refused");
    }
    assert!(verify(&verifier, &good, NOW).is_ok());
}

#[test]
fn no_secret_in_errors_or_debug() {
    let short = Secret::new("too-short-secret");
    let err = Verifier::from_settings(&PeerSettings {
        shared_key: Some(short.clone()),
        ..PeerSettings::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "peer settings: `peer.shared_key` must be at least 32 bytes"
    );
    let err = Signer::from_settings(&PeerSettings {
        ed25519_private_key: Some(Secret::new("not*base64*seed-material")),
        ..node_a()
    })
    .unwrap_err();
    assert!(!err.to_string().contains("seed-material"), "{err}");
    let pair = generate_ed25519().unwrap();
    assert!(!format!("{pair:?}").contains(pair.private_seed.expose()));
    let signer = signer(PeerSettings {
        ed25519_private_key: Some(pair.private_seed.clone()),
        shared_key: Some(Secret::new(SHARED)),
        ..node_a()
    });
    let verifier = Verifier::from_settings(&hub(true, true, None)).unwrap();
    let printed = format!("{signer:?} {verifier:?}");
    assert!(
        !printed.contains(SHARED) && !printed.contains(MASTER),
        "{printed}"
    );
}

#[test]
fn derivation_is_per_node_and_stable() {
    let a = derive_key(MASTER.as_bytes(), "a");
    assert_eq!(a, derive_key(MASTER.as_bytes(), "a"));
    assert_ne!(a, derive_key(MASTER.as_bytes(), "b"));
    assert_ne!(a, derive_key(SHARED.as_bytes(), "a"));
}
