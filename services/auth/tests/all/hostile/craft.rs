//! Token surgery for the hostile corpus: segments, non-canonical base64url, signature
//! re-encodings (ECDSA DER, Ed25519 malleation).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use super::claims_with;
use crate::all::support::*;

pub(super) fn segments(token: &str) -> [String; 3] {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS has three segments");
    [parts[0].into(), parts[1].into(), parts[2].into()]
}

pub(super) fn decode(segment: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .expect("canonical base64url")
}

/// Sets the unused low bits of the last base64url character: lenient decoders return the
/// same bytes, a canonical one refuses the text.
pub(super) fn with_trailing_bits(segment: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let unused_bits = match segment.len() % 4 {
        2 => 4,
        3 => 2,
        _ => panic!("segment length {} leaves no unused bits", segment.len()),
    };
    let last = segment.as_bytes()[segment.len() - 1];
    let value = ALPHABET
        .iter()
        .position(|c| *c == last)
        .expect("base64url character");
    assert_eq!(value & ((1 << unused_bits) - 1), 0, "canonical input");
    let changed = ALPHABET[value | 1] as char;
    format!("{}{changed}", &segment[..segment.len() - 1])
}

/// Claims whose base64url form contains `-` or `_`, so the standard alphabet differs.
pub(super) fn claims_needing_url_alphabet() -> (Value, String) {
    for i in 0..1000 {
        let c = claims_with("jti", json!(format!("~~~?>{i}")));
        let encoded = b64(c.to_string());
        if encoded.contains('-') || encoded.contains('_') {
            return (c, encoded);
        }
    }
    panic!("no claim set with - or _ in its encoding");
}

/// An Ed25519 token whose signature text contains `-` or `_` (signatures are
/// deterministic, so the claims are varied until one does).
pub(super) fn token_with_url_alphabet_signature(key: &TestKey) -> String {
    for i in 0..1000 {
        let token = key.token(&claims_with("jti", json!(i)));
        if segments(&token)[2].contains(['-', '_']) {
            return token;
        }
    }
    panic!("no signature with - or _ in its encoding");
}

/// DER `ECDSA-Sig-Value` for a fixed-size `r || s` signature (what JOSE does *not* use).
pub(super) fn ecdsa_der(fixed: &[u8]) -> Vec<u8> {
    fn integer(bytes: &[u8]) -> Vec<u8> {
        let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
        let mut body = Vec::new();
        if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
            body.push(0);
        }
        body.extend(trimmed);
        let mut out = vec![0x02, body.len() as u8];
        out.extend(body);
        out
    }
    let (r, s) = fixed.split_at(fixed.len() / 2);
    let mut body = integer(r);
    body.extend(integer(s));
    let mut out = vec![0x30, body.len() as u8];
    out.extend(body);
    out
}

/// An Ed25519 signature with `S` replaced by `S + L` (the group order): the same point
/// equation holds, so only a verifier that checks `S < L` refuses it.
pub(super) fn ed25519_malleated(signature: &[u8]) -> Vec<u8> {
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut out = signature.to_vec();
    let mut carry = 0u16;
    for (i, l) in L.iter().enumerate() {
        let sum = u16::from(out[32 + i]) + u16::from(*l) + carry;
        out[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "S + L fits in 32 bytes");
    out
}
