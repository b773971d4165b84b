//! The default policy, `least-allocated`, built from `policies/` by
//! `build.rs` and carried in the binary.

use crate::policy::PolicySource;

pub const DEFAULT_POLICY_WASM: &[u8] = include_bytes!(env!("WASMSCHED_DEFAULT_POLICY"));

pub fn source() -> PolicySource {
    PolicySource::new("embedded least-allocated", DEFAULT_POLICY_WASM.to_vec())
}
