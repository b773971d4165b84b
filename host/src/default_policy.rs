//! The default policy, `least-allocated`, built from `policies/` by
//! `build.rs` and carried in the binary.

use wasmsched_runtime::PolicySource;

pub const DEFAULT_POLICY_WASM: &[u8] = include_bytes!(env!("WASMSCHED_DEFAULT_POLICY"));

pub fn source() -> PolicySource {
    PolicySource::new("embedded least-allocated", DEFAULT_POLICY_WASM.to_vec())
}
