//! What a policy declares beside its exports: custom sections the SDK
//! writes into the component, read once when the policy loads. Contract
//! 0.1's `describe` is frozen, and these are facts about the code, not
//! about its configuration, so a custom section carries them.

use wasmparser::{Parser, Payload};

/// Present with the byte 1 when every node's verdict and score depend only
/// on the pod and that node, never on the other candidates or their order:
/// the host may then split an attempt's candidates over several instances
/// (kube's Filter and Score plugins are all of that kind). Absent or 0:
/// every call sees every candidate.
pub const INDEPENDENT_NODES_SECTION: &str = "wasmsched:independent-nodes";

/// Whether the component at `bytes` declares independent nodes. Looks
/// into nested core modules, where a guest's linker puts the section.
pub(crate) fn independent_nodes(bytes: &[u8]) -> bool {
    Parser::new(0).parse_all(bytes).map_while(Result::ok).any(|payload| match payload {
        Payload::CustomSection(section) => section.name() == INDEPENDENT_NODES_SECTION && section.data() == [1],
        _ => false,
    })
}
