//! Binding for `wasmsched:policy@0.3.x`: 0.2's calls, with the per-node
//! numbers packed little-endian in bytes (the candidates' columns, the
//! filter's verdicts, the scores), so that they cross as one block in
//! every guest language, and `independent-nodes` in `describe`.

super::binding::contract_binding!("../wit/0.3.0", "0.3.0", |info| info.independent_nodes);
super::binding::explain_score!();

/// Verdicts as the runtime reads them: u32s, packed.
fn verdicts(answer: wit::FilterVerdicts) -> Result<RawVerdicts, Refusal> {
    Ok((answer.reasons, unpack(&answer.verdicts, "verdicts", "u32", u32::from_le_bytes)?))
}

/// Scores as the runtime reads them: f64s, packed.
fn scores(answer: Vec<u8>) -> Result<Vec<f64>, Refusal> {
    unpack(&answer, "scores", "f64", f64::from_le_bytes)
}

/// Packed little-endian numbers of `N` bytes each; bytes left over are
/// an answer the contract cannot carry.
fn unpack<T, const N: usize>(bytes: &[u8], what: &str, kind: &str, from: fn([u8; N]) -> T) -> Result<Vec<T>, Refusal> {
    let chunks = bytes.chunks_exact(N);
    if !chunks.remainder().is_empty() {
        return Err(Refusal::Malformed(format!(
            "the {what} are {} bytes, not a whole number of {kind}s ({N} bytes each, little-endian)",
            bytes.len()
        )));
    }
    Ok(chunks.map(|c| from(c.try_into().expect("chunks_exact gives N bytes"))).collect())
}

/// Rows to packed columns, in one pass over the rows.
fn fill_columns(out: &mut wit::Candidates, candidates: &[facts::Candidate]) {
    let columns = [
        &mut out.nodes,
        &mut out.requested_milli_cpu,
        &mut out.requested_memory,
        &mut out.requested_ephemeral_storage,
        &mut out.nonzero_requested_milli_cpu,
        &mut out.nonzero_requested_memory,
        &mut out.pod_count,
    ];
    for column in columns {
        column.clear();
    }
    for c in candidates {
        out.nodes.extend_from_slice(&c.node.to_le_bytes());
        out.requested_milli_cpu.extend_from_slice(&c.requested_milli_cpu.to_le_bytes());
        out.requested_memory.extend_from_slice(&c.requested_memory.to_le_bytes());
        out.requested_ephemeral_storage.extend_from_slice(&c.requested_ephemeral_storage.to_le_bytes());
        out.nonzero_requested_milli_cpu.extend_from_slice(&c.nonzero_requested_milli_cpu.to_le_bytes());
        out.nonzero_requested_memory.extend_from_slice(&c.nonzero_requested_memory.to_le_bytes());
        out.pod_count.extend_from_slice(&c.pod_count.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_the_rows_packed_little_endian() {
        let rows: Vec<facts::Candidate> = (0..3u64)
            .map(|i| facts::Candidate {
                node: 7 + i as u32,
                requested_milli_cpu: 1_000 * i,
                requested_memory: 1 << (33 + i),
                requested_ephemeral_storage: 5,
                nonzero_requested_milli_cpu: 100 + i,
                nonzero_requested_memory: 200 + i,
                pod_count: 3 * i as u32,
            })
            .collect();
        // A longer call first: the next one sees its own rows only.
        with_columns(&[rows[0]; 9], |_| ());
        with_columns(&rows, |c| {
            let u32s = |b: &[u8]| unpack(b, "", "", u32::from_le_bytes).unwrap();
            let u64s = |b: &[u8]| unpack(b, "", "", u64::from_le_bytes).unwrap();
            assert_eq!(u32s(&c.nodes), [7, 8, 9]);
            assert_eq!(u64s(&c.requested_memory), [1 << 33, 1 << 34, 1 << 35]);
            assert_eq!(u64s(&c.nonzero_requested_milli_cpu), [100, 101, 102]);
            assert_eq!(u32s(&c.pod_count), [0, 3, 6]);
        });
    }

    #[test]
    fn bytes_left_over_are_malformed_and_say_what_was_expected() {
        assert_eq!(unpack(&2.5f64.to_le_bytes(), "scores", "f64", f64::from_le_bytes), Ok(vec![2.5]));
        assert_eq!(
            unpack(&[0u8; 10], "scores", "f64", f64::from_le_bytes),
            Err(Refusal::Malformed(
                "the scores are 10 bytes, not a whole number of f64s (8 bytes each, little-endian)".into()
            ))
        );
    }
}
