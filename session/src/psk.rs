//! The pre-shared key: derived from a user's secret and a purpose, so one
//! secret file serves several uses without one use's key working for
//! another.

use hkdf::Hkdf;
use sha2::Sha256;

/// A 32-byte key for the Noise handshake.
#[derive(Clone)]
pub struct Psk([u8; 32]);

impl Psk {
    /// `HKDF-SHA256(salt = "gossamer psk", ikm = secret, info = purpose)`.
    /// The secret may be any length (a file's contents, a random hex string).
    pub fn derive(secret: &[u8], purpose: &str) -> Psk {
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(Some(b"gossamer psk"), secret)
            .expand(purpose.as_bytes(), &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Psk(key)
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::Psk;

    #[test]
    fn keys_depend_on_secret_and_purpose() {
        let a = Psk::derive(b"secret", "daemon");
        assert_eq!(a.bytes(), Psk::derive(b"secret", "daemon").bytes());
        assert_ne!(a.bytes(), Psk::derive(b"secret", "rendezvous").bytes());
        assert_ne!(a.bytes(), Psk::derive(b"secreT", "daemon").bytes());
        assert_eq!(format!("{a:?}"), "Psk(..)");
    }
}
