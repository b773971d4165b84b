//! Binding for `wasmsched:policy@0.3.x`: 0.2's calls, with the per-node
//! numbers packed little-endian in bytes (the candidates' columns, the
//! filter's verdicts, the scores), so that they cross as one block in
//! every guest language, and `independent-nodes` in `describe`.

super::binding::contract_binding!("../wit/0.3.0", "0.3.0", |info| info.independent_nodes);
super::binding::explain_score!();

super::binding::packed_columns!();

#[cfg(test)]
mod tests {
    use super::super::binding::unpack;
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
