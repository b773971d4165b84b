//! A policy's bytes and where they came from.

use std::sync::Arc;

use sha2::{Digest, Sha256};

/// Where a policy's bytes came from, for messages (`policies/x.wasm`,
/// `configmap kube-system/wasmsched-policies key x.wasm`).
#[derive(Debug, Clone)]
pub struct PolicySource {
    pub origin: String,
    pub bytes: Arc<[u8]>,
}

impl PolicySource {
    pub fn new(origin: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Self {
        PolicySource { origin: origin.into(), bytes: bytes.into() }
    }

    pub fn from_file(path: &std::path::Path) -> std::io::Result<Self> {
        Ok(PolicySource::new(path.display().to_string(), std::fs::read(path)?))
    }

    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }
}
