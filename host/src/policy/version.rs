//! Which contract a component was built against, found from its exports
//! before anything is instantiated, and the header checks that let a wrong
//! file fail with a useful message.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::error::PolicyError;

const POLICY_INTERFACE: &str = "wasmsched:policy/policy";
pub const SUPPORTED: &str = "0.1.x";

/// A supported contract version; each has its own binding module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractVersion {
    V0_1,
}

impl ContractVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => super::v0_1::VERSION,
        }
    }

    pub(crate) fn detect(engine: &Engine, origin: &str, component: &Component) -> Result<Self, PolicyError> {
        let ty = component.component_type();
        let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
        let Some(found) = exports.iter().find_map(|name| {
            let rest = name.strip_prefix(POLICY_INTERFACE)?;
            Some(rest.strip_prefix('@').unwrap_or(""))
        }) else {
            return Err(PolicyError::MissingExport {
                source_name: origin.to_string(),
                exports: if exports.is_empty() { "none".into() } else { exports.join(", ") },
            });
        };
        let mut parts = found.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some("1")) => Ok(ContractVersion::V0_1),
            _ => Err(PolicyError::IncompatibleVersion {
                source_name: origin.to_string(),
                found: if found.is_empty() { "(unversioned)".into() } else { found.to_string() },
                supported: SUPPORTED.to_string(),
            }),
        }
    }
}

/// `\0asm` then a 4-byte version/layer: `1 0 0 0` is a core module,
/// `0x0d 0 1 0` a component.
pub(crate) fn check_header(origin: &str, bytes: &[u8]) -> Result<(), PolicyError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(PolicyError::NotWasm { source_name: origin.to_string() });
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(PolicyError::CoreModule { source_name: origin.to_string() });
    }
    Ok(())
}
