//! Binding for `wasmsched:policy@0.1.x`, the first frozen version: the
//! calls every version has ([`super::binding`]), and nothing more.

super::binding::contract_binding!("../wit/0.1.0", "0.1.0", |_| false);
super::binding::number_columns!();

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, salt: u64) -> Vec<facts::Candidate> {
        (0..n as u64)
            .map(|i| facts::Candidate {
                node: (i * 3 + salt) as u32,
                requested_milli_cpu: i + salt,
                requested_memory: i * 7 + salt,
                requested_ephemeral_storage: i * 11 + salt,
                nonzero_requested_milli_cpu: i * 13 + salt,
                nonzero_requested_memory: i * 17 + salt,
                pod_count: (i * 19 + salt) as u32,
            })
            .collect()
    }

    /// Each column beside the row field it is built from.
    type Column = (fn(&facts::Candidate) -> u64, fn(&wit::Candidates) -> Vec<u64>);
    const COLUMNS: [Column; 7] = [
        (|r| r.node.into(), |c| c.nodes.iter().map(|&v| v.into()).collect()),
        (|r| r.requested_milli_cpu, |c| c.requested_milli_cpu.clone()),
        (|r| r.requested_memory, |c| c.requested_memory.clone()),
        (|r| r.requested_ephemeral_storage, |c| c.requested_ephemeral_storage.clone()),
        (|r| r.nonzero_requested_milli_cpu, |c| c.nonzero_requested_milli_cpu.clone()),
        (|r| r.nonzero_requested_memory, |c| c.nonzero_requested_memory.clone()),
        (|r| r.pod_count.into(), |c| c.pod_count.iter().map(|&v| v.into()).collect()),
    ];

    /// Whether `columns` are `rows`, column by column.
    fn hold(columns: &wit::Candidates, rows: &[facts::Candidate]) -> bool {
        COLUMNS.iter().all(|(field, column)| column(columns) == rows.iter().map(field).collect::<Vec<_>>())
    }

    #[test]
    fn reused_columns_hold_each_call_s_rows_and_nothing_of_the_last() {
        // Growing, shrinking and growing within the capacity: each call
        // sees its own rows only.
        for (n, salt) in [(5, 1), (3, 100), (4, 7), (0, 9), (9, 2)] {
            let candidates = rows(n, salt);
            assert!(with_columns(&candidates, |c| hold(c, &candidates)), "{n} rows");
        }
    }

    #[test]
    fn a_call_within_a_call_gets_columns_of_its_own() {
        let (outer, inner) = (rows(6, 1), rows(2, 50));
        // The inner call first: the outer's columns are untouched by it.
        let (outer_held, inner_held) = with_columns(&outer, |o| {
            let inner_held = with_columns(&inner, |c| hold(c, &inner));
            (hold(o, &outer), inner_held)
        });
        assert!(outer_held && inner_held);
    }
}
