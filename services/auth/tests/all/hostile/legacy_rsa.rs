//! A 1024-bit RSA signer for the hostile corpus: ring refuses to sign with keys below 2048
//! bits, so RS256 signatures are computed here and proven real with ring's legacy verifier.

use ring::signature::{RsaPublicKeyComponents, RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY};
use serde_json::{json, Value};

use super::{decode, RSA_1024_FIXTURE_JWK};
use crate::all::support::*;

/// The 1024-bit RSA fixture. ring refuses to sign with keys below 2048 bits, so RS256
/// signatures are computed here (EMSA-PKCS1-v1_5 + a Montgomery modular exponentiation)
/// and checked with ring's legacy 1024-bit verifier, which proves they are real.
pub(super) struct LegacyRsa {
    pub(super) kid: String,
    pub(super) n: Vec<u8>,
    pub(super) e: Vec<u8>,
    pub(super) d: Vec<u8>,
}

impl LegacyRsa {
    pub(super) fn fixture() -> LegacyRsa {
        let jwk: Value = serde_json::from_str(RSA_1024_FIXTURE_JWK).expect("fixture jwk");
        let field = |name: &str| decode(jwk[name].as_str().expect("fixture member"));
        LegacyRsa {
            kid: jwk["kid"].as_str().expect("kid").to_owned(),
            n: field("n"),
            e: field("e"),
            d: field("d"),
        }
    }

    pub(super) fn public_jwk(&self) -> Value {
        json!({"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig",
               "n": b64(&self.n), "e": b64(&self.e)})
    }

    pub(super) fn sign(&self, message: &[u8]) -> Vec<u8> {
        // DigestInfo prefix for SHA-256 (RFC 8017 §9.2, note 1).
        const SHA256_PREFIX: [u8; 19] = [
            0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02,
            0x01, 0x05, 0x00, 0x04, 0x20,
        ];
        let k = self.n.len();
        let digest = ring::digest::digest(&ring::digest::SHA256, message);
        let mut em = vec![0x00, 0x01];
        em.resize(k - SHA256_PREFIX.len() - 32 - 1, 0xff);
        em.push(0x00);
        em.extend_from_slice(&SHA256_PREFIX);
        em.extend_from_slice(digest.as_ref());
        assert_eq!(em.len(), k);
        let signature = modpow(&em, &self.d, &self.n);
        RsaPublicKeyComponents {
            n: &self.n,
            e: &self.e,
        }
        .verify(
            &RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
            message,
            &signature,
        )
        .expect("the hand-made signature is a valid 1024-bit RS256 signature");
        signature
    }

    pub(super) fn token(&self, header: &Value, claims: &Value) -> String {
        let message = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        format!("{message}.{}", b64(self.sign(message.as_bytes())))
    }
}

/// `base^exp mod n` over big-endian byte strings (n odd, base < n), in Montgomery form
/// with 32-bit limbs.
pub(super) fn modpow(base: &[u8], exp: &[u8], n: &[u8]) -> Vec<u8> {
    let s = n.len().div_ceil(4);
    let n_limbs = limbs(n, s);
    // -n^-1 mod 2^32 by Newton iteration (n is odd).
    let mut inv: u32 = 1;
    for _ in 0..5 {
        inv = inv.wrapping_mul(2u32.wrapping_sub(n_limbs[0].wrapping_mul(inv)));
    }
    let n0inv = inv.wrapping_neg();
    // R^2 mod n, R = 2^(32 s), by doubling 1 modulo n.
    let mut n_ext = n_limbs.clone();
    n_ext.push(0);
    let mut r2 = vec![0u32; s + 1];
    r2[0] = 1;
    for _ in 0..64 * s {
        let mut carry = 0u32;
        for limb in r2.iter_mut() {
            let next = *limb >> 31;
            *limb = (*limb << 1) | carry;
            carry = next;
        }
        if !less(&r2, &n_ext) {
            subtract(&mut r2, &n_ext);
        }
    }
    r2.truncate(s);
    let mut one = vec![0u32; s];
    one[0] = 1;
    let base_m = mont_mul(&limbs(base, s), &r2, &n_limbs, n0inv);
    let mut acc = mont_mul(&one, &r2, &n_limbs, n0inv);
    for byte in exp {
        for bit in (0..8).rev() {
            acc = mont_mul(&acc, &acc, &n_limbs, n0inv);
            if byte >> bit & 1 == 1 {
                acc = mont_mul(&acc, &base_m, &n_limbs, n0inv);
            }
        }
    }
    let result = mont_mul(&acc, &one, &n_limbs, n0inv);
    let mut out = vec![0u8; n.len()];
    for (i, byte) in out.iter_mut().rev().enumerate() {
        *byte = (result[i / 4] >> (8 * (i % 4))) as u8;
    }
    out
}

pub(super) fn limbs(be: &[u8], len: usize) -> Vec<u32> {
    let mut out = vec![0u32; len];
    for (i, b) in be.iter().rev().enumerate() {
        out[i / 4] |= u32::from(*b) << (8 * (i % 4));
    }
    out
}

pub(super) fn less(a: &[u32], b: &[u32]) -> bool {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x < y;
        }
    }
    false
}

pub(super) fn subtract(a: &mut [u32], b: &[u32]) {
    let mut borrow = 0u64;
    for (x, y) in a.iter_mut().zip(b) {
        let d = u64::from(*x)
            .wrapping_sub(u64::from(*y))
            .wrapping_sub(borrow);
        *x = d as u32;
        borrow = (d >> 63) & 1;
    }
}

/// Montgomery product a·b·R^-1 mod n (CIOS).
pub(super) fn mont_mul(a: &[u32], b: &[u32], n: &[u32], n0inv: u32) -> Vec<u32> {
    let s = n.len();
    let mut t = vec![0u32; s + 2];
    for &bi in b {
        let mut carry = 0u64;
        for j in 0..s {
            let x = u64::from(t[j]) + u64::from(a[j]) * u64::from(bi) + carry;
            t[j] = x as u32;
            carry = x >> 32;
        }
        let x = u64::from(t[s]) + carry;
        t[s] = x as u32;
        t[s + 1] = (x >> 32) as u32;
        let m = t[0].wrapping_mul(n0inv);
        let mut carry = (u64::from(t[0]) + u64::from(m) * u64::from(n[0])) >> 32;
        for j in 1..s {
            let x = u64::from(t[j]) + u64::from(m) * u64::from(n[j]) + carry;
            t[j - 1] = x as u32;
            carry = x >> 32;
        }
        let x = u64::from(t[s]) + carry;
        t[s - 1] = x as u32;
        t[s] = t[s + 1] + (x >> 32) as u32;
        t[s + 1] = 0;
    }
    let mut n_ext = n.to_vec();
    n_ext.push(0);
    let mut result = t[..=s].to_vec();
    if !less(&result, &n_ext) {
        subtract(&mut result, &n_ext);
    }
    result.truncate(s);
    result
}

#[test]
pub(super) fn the_legacy_rsa_signer_is_correct() {
    // Small numbers checked by hand: 4^13 mod 497 = 445.
    assert_eq!(modpow(&[4], &[13], &[0x01, 0xf1]), vec![0x01, 0xbd]);
    let rsa = LegacyRsa::fixture();
    assert_eq!(rsa.n.len(), 128, "the fixture is a 1024-bit key");
    // `sign` itself asserts that ring's legacy verifier accepts the signature.
    assert_eq!(rsa.sign(b"message").len(), 128);
}
