//! The contract's packed columns (0.3 on: little-endian bytes) to and from
//! the numbers policies read: one call's candidates decoded once into
//! [`Candidates`], and the answers packed on the way out.

use crate::bindings::wasmsched::policy::types as wit;

/// One call's candidates as columns of numbers, one entry per candidate in
/// each: the node ids and what is already placed on each node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    pub nodes: Vec<u32>,
    pub requested_milli_cpu: Vec<u64>,
    pub requested_memory: Vec<u64>,
    pub requested_ephemeral_storage: Vec<u64>,
    /// The same sums with kube-scheduler's scoring defaults for pods that
    /// request nothing (100m cpu, 200 MB memory).
    pub nonzero_requested_milli_cpu: Vec<u64>,
    pub nonzero_requested_memory: Vec<u64>,
    pub pod_count: Vec<u32>,
}

impl Candidates {
    /// The host's packed columns, decoded; an error names a column that is
    /// not a whole number of entries.
    pub fn from_wire(c: &wit::Candidates) -> Result<Self, String> {
        Ok(Candidates {
            nodes: unpack(&c.nodes, "nodes", u32::from_le_bytes)?,
            requested_milli_cpu: unpack(&c.requested_milli_cpu, "requested-milli-cpu", u64::from_le_bytes)?,
            requested_memory: unpack(&c.requested_memory, "requested-memory", u64::from_le_bytes)?,
            requested_ephemeral_storage: unpack(
                &c.requested_ephemeral_storage,
                "requested-ephemeral-storage",
                u64::from_le_bytes,
            )?,
            nonzero_requested_milli_cpu: unpack(
                &c.nonzero_requested_milli_cpu,
                "nonzero-requested-milli-cpu",
                u64::from_le_bytes,
            )?,
            nonzero_requested_memory: unpack(
                &c.nonzero_requested_memory,
                "nonzero-requested-memory",
                u64::from_le_bytes,
            )?,
            pod_count: unpack(&c.pod_count, "pod-count", u32::from_le_bytes)?,
        })
    }
}

fn unpack<T, const N: usize>(bytes: &[u8], column: &str, from: fn([u8; N]) -> T) -> Result<Vec<T>, String> {
    let chunks = bytes.chunks_exact(N);
    if !chunks.remainder().is_empty() {
        return Err(format!(
            "candidate column {column} is {} bytes, not a whole number of {N}-byte entries",
            bytes.len()
        ));
    }
    Ok(chunks.map(|c| from(c.try_into().expect("chunks_exact gives N bytes"))).collect())
}

/// u32s or f64s, packed little-endian as the contract carries them.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub fn pack<const N: usize, T: Copy>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * N);
    for v in values {
        bytes.extend_from_slice(&to(*v));
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_columns_decode_and_a_torn_one_is_named() {
        let wire = wit::Candidates {
            nodes: pack(&[3u32, 9], u32::to_le_bytes),
            requested_milli_cpu: pack(&[100u64, 2_000], u64::to_le_bytes),
            requested_memory: pack(&[1u64 << 33, 0], u64::to_le_bytes),
            requested_ephemeral_storage: pack(&[0u64, 0], u64::to_le_bytes),
            nonzero_requested_milli_cpu: pack(&[100u64, 2_000], u64::to_le_bytes),
            nonzero_requested_memory: pack(&[1u64 << 33, 200], u64::to_le_bytes),
            pod_count: pack(&[1u32, 4], u32::to_le_bytes),
        };
        let c = Candidates::from_wire(&wire).unwrap();
        assert_eq!(c.nodes, [3, 9]);
        assert_eq!(c.requested_memory, [1 << 33, 0]);
        assert_eq!(c.pod_count, [1, 4]);
        let torn = wit::Candidates { pod_count: vec![1, 0, 0], ..wire };
        assert_eq!(
            Candidates::from_wire(&torn).unwrap_err(),
            "candidate column pod-count is 3 bytes, not a whole number of 4-byte entries"
        );
    }
}
