//! Binding for `wasmsched:policy@0.3.x`: 0.2's calls, with the per-node
//! numbers packed little-endian in bytes (the candidates' columns, the
//! filter's verdicts, the scores), so that they cross as one block in
//! every guest language, and `independent-nodes` in `describe`.

super::binding::contract_binding!("../wit/0.3.0", "0.3.0", |info| info.independent_nodes);

use crate::facts::ScorePart;

impl Bindings {
    pub(crate) fn filter(
        &self,
        store: &mut Store<HostState>,
        pod: &facts::PodFacts,
        candidates: &[facts::Candidate],
    ) -> wasmtime::Result<Result<RawVerdicts, Refusal>> {
        let answer = with_columns(candidates, |c| self.guest().call_filter(store, &pod_info(pod), c))?;
        Ok(answer.map_err(Refusal::Declined).and_then(|v| {
            let verdicts = unpack(&v.verdicts, "verdicts", "u32", u32::from_le_bytes)?;
            Ok((v.reasons, verdicts))
        }))
    }

    pub(crate) fn score(
        &self,
        store: &mut Store<HostState>,
        pod: &facts::PodFacts,
        candidates: &[facts::Candidate],
        seed: u64,
    ) -> wasmtime::Result<Result<Vec<f64>, Refusal>> {
        let answer = with_columns(candidates, |c| self.guest().call_score(store, &pod_info(pod), c, seed))?;
        Ok(answer.map_err(Refusal::Declined).and_then(|bytes| unpack(&bytes, "scores", "f64", f64::from_le_bytes)))
    }

    /// Each candidate's parts, as the policy names them; an empty list
    /// where it does not say.
    pub(crate) fn explain_score(
        &self,
        store: &mut Store<HostState>,
        pod: &facts::PodFacts,
        candidates: &[facts::Candidate],
        seed: u64,
    ) -> wasmtime::Result<Result<Vec<Vec<ScorePart>>, String>> {
        let answer = with_columns(candidates, |c| self.guest().call_explain_score(store, &pod_info(pod), c, seed))?;
        Ok(answer.map(|per_node| {
            per_node
                .into_iter()
                .map(|parts| parts.into_iter().map(|p| ScorePart { name: p.name, value: p.value }).collect())
                .collect()
        }))
    }
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

thread_local! {
    /// The columns of this thread's last call, refilled for its next: no
    /// allocation but where a call has more candidates than any before it.
    /// Holds one attempt's columns (48 bytes a candidate) per thread that
    /// calls policies.
    static COLUMNS: std::cell::RefCell<wit::Candidates> = std::cell::RefCell::new(no_columns());
}

fn no_columns() -> wit::Candidates {
    wit::Candidates {
        nodes: Vec::new(),
        requested_milli_cpu: Vec::new(),
        requested_memory: Vec::new(),
        requested_ephemeral_storage: Vec::new(),
        nonzero_requested_milli_cpu: Vec::new(),
        nonzero_requested_memory: Vec::new(),
        pod_count: Vec::new(),
    }
}

/// `call` with `candidates` as the contract's byte columns.
fn with_columns<R>(candidates: &[facts::Candidate], call: impl FnOnce(&wit::Candidates) -> R) -> R {
    COLUMNS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut columns) => {
            fill_columns(&mut columns, candidates);
            call(&columns)
        }
        // A call made within a call (the host makes none) gets columns
        // of its own.
        Err(_) => {
            let mut columns = no_columns();
            fill_columns(&mut columns, candidates);
            call(&columns)
        }
    })
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
