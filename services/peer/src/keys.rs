//! Key material: decoding from the settings (errors name the field, never the value), the
//! HKDF-SHA256 derivation of per-node keys, and Ed25519 key generation.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use lumina_config::Secret;
use ring::hkdf;
use ring::signature::Ed25519KeyPair;

use crate::{Error, Result};

/// The HKDF salt of derived keys; a new derivation scheme gets a new salt.
const DERIVE_SALT: &[u8] = b"lumina-peer/v1";
/// Shortest shared key or derivation master.
const MIN_SECRET_BYTES: usize = 32;

/// The HMAC key of `node` derived from `master`: HKDF-SHA256 with salt `lumina-peer/v1`,
/// the master as input key material and the node name as info; 32 bytes.
pub fn derive_key(master: &[u8], node: &str) -> [u8; 32] {
    struct Len32;
    impl hkdf::KeyType for Len32 {
        fn len(&self) -> usize {
            32
        }
    }
    let mut out = [0u8; 32];
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, DERIVE_SALT).extract(master);
    let info = [node.as_bytes()];
    // Expanding 32 bytes from SHA-256 cannot fail (the limit is 255 × 32).
    if let Ok(okm) = prk.expand(&info, Len32) {
        let _ = okm.fill(&mut out);
    }
    out
}

/// [`derive_key`] as base64 (standard, padded): the form `peer.derived_key` takes.
pub fn derive_key_base64(master: &[u8], node: &str) -> String {
    STANDARD.encode(derive_key(master, node))
}

/// A new Ed25519 key, base64: the private seed (for `peer.ed25519_private_key`) and the
/// public key (for the verifier's `peer.nodes.<node>.ed25519_public_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ed25519Pair {
    pub private_seed: Secret,
    pub public_key: String,
}

pub fn generate_ed25519() -> Result<Ed25519Pair> {
    let mut seed = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .map_err(|_| Error::Random)?;
    let pair = Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|_| Error::Random)?;
    Ok(Ed25519Pair {
        private_seed: Secret::new(STANDARD.encode(seed)),
        public_key: STANDARD.encode(crate::public_of(&pair)),
    })
}

/// The key pair of a base64 seed.
pub(crate) fn ed25519_pair(seed: &Secret, field: &str) -> Result<Ed25519KeyPair> {
    let seed = decode32(seed.expose(), field)?;
    Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|_| Error::Key {
        field: field.to_owned(),
        problem: "is not an Ed25519 seed",
    })
}

/// 32 bytes of base64 (standard or URL-safe, padded or not).
pub(crate) fn decode32(text: &str, field: &str) -> Result<[u8; 32]> {
    let text = text.trim();
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| Error::Key {
            field: field.to_owned(),
            problem: "is not base64",
        })?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| Error::Key {
        field: field.to_owned(),
        problem: "must be 32 bytes (base64)",
    })
}

/// A shared key or master as bytes, at least 32 of them.
pub(crate) fn secret_bytes<'a>(secret: &'a Secret, field: &str) -> Result<&'a [u8]> {
    let bytes = secret.expose().as_bytes();
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(Error::Key {
            field: field.to_owned(),
            problem: "must be at least 32 bytes",
        });
    }
    Ok(bytes)
}
