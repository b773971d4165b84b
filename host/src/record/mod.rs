//! Recordings of a running scheduler (`wasmsched run --record DIR`): what
//! the core consumed (cluster events, binding results, policy swaps) and
//! what it decided, in order, on the core's own clock, so that
//! `wasmsched simulate --replay DIR` can feed the same inputs through the
//! same core, with the recorded policies or others (Borg's Fauxmaster).
//!
//! A recording is a directory of JSON-lines files (`journal-NNNNNN.jsonl`),
//! each opening with a header. The files are rotated at a size; the oldest
//! go once the recording passes its bound, and each new file opens with
//! a snapshot of the objects alive at that moment, so that any file can
//! start a replay. Nothing secret is kept: wasmsched watches no Secrets,
//! and environment values and last-applied annotations are removed
//! (`redact.rs`).

mod entry;
mod reader;
mod redact;
mod writer;

pub use entry::{Attempted, BindingRecord, Entry, Header, Line};
pub use reader::{Journal, read_journal};
pub use writer::{RecordSettings, Recorder};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::scheduler::{ClusterEvent, NodeLayout, ObjectKey};

    fn pod(i: usize) -> ClusterEvent {
        let yaml = format!(
            "metadata: {{name: p{i}, namespace: t}}\nspec:\n  containers:\n  - name: c\n    env: [{{name: TOKEN, value: hunter2}}]\n"
        );
        ClusterEvent::applied(serde_yaml::from_str::<Pod>(&yaml).unwrap())
    }

    fn record(dir: &std::path::Path, max_bytes: u64, pods: usize) {
        record_churn(dir, max_bytes, pods, usize::MAX);
    }

    /// As `record`, with each pod deleted once `alive` newer ones came.
    fn record_churn(dir: &std::path::Path, max_bytes: u64, pods: usize, alive: usize) {
        let settings =
            RecordSettings { dir: dir.to_path_buf(), max_bytes, profiles: vec!["wasmsched".into()], seed: 7 };
        let recorder = Recorder::start(settings).unwrap();
        for i in 0..pods {
            recorder.event(Duration::from_millis(i as u64), &pod(i));
            if let Some(old) = i.checked_sub(alive) {
                let key = ObjectKey { namespace: "t".into(), name: format!("p{old}") };
                recorder.event(Duration::from_millis(i as u64), &ClusterEvent::deleted::<Pod>(key, None));
            }
            // The layout after every input, not only once the writer asks
            // (the loop's way): a writer that is behind still rotates
            // where the file filled. Unasked, it is not written.
            recorder.layout(Duration::from_millis(i as u64), NodeLayout::default());
        }
        recorder.event(
            Duration::from_secs(3600),
            &ClusterEvent::deleted::<Pod>(ObjectKey { namespace: "t".into(), name: "p0".into() }, None),
        );
    }

    fn pod_names(journal: &Journal) -> Vec<String> {
        journal
            .lines()
            .filter(|l| !matches!(l.as_ref().map(|l| &l.entry), Ok(Entry::Layout(_))))
            .map(|l| match l.unwrap().entry {
                Entry::Event(e) => match e.change {
                    crate::scheduler::events::ChangeRecord::Applied(v) => {
                        v["metadata"]["name"].as_str().unwrap().to_string()
                    }
                    other => format!("{other:?}"),
                },
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// Files rotate at an eighth of the bound (at least 1 MiB); a replay
    /// through them sees each input once, the second file's snapshot
    /// skipped; no environment value is written.
    #[test]
    fn a_recording_reads_back_in_order_across_its_files() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), 8 << 20, 12_000);
        let files = writer::journal_files(dir.path()).unwrap();
        assert!(files.len() >= 2, "{files:?}");
        let journal = read_journal(dir.path()).unwrap();
        assert_eq!((journal.header.segment, journal.header.seed, journal.header.snapshot_lines), (1, 7, 0));
        let names = pod_names(&journal);
        assert_eq!(names.len(), 12_001);
        assert_eq!((names[0].as_str(), names[11_999].as_str()), ("p0", "p11999"));
        assert!(names[12_000].contains("Deleted"), "{}", names[12_000]);
        let text = std::fs::read_to_string(&files[1]).unwrap();
        assert!(!text.contains("hunter2") && text.contains("(not recorded)"));
    }

    /// Past the bound the oldest files go, and the recording then starts
    /// with a file that opens with the live objects.
    #[test]
    fn past_its_bound_a_recording_starts_from_a_snapshot() {
        // Under the bound wherever the recording stops (just after a
        // rotation, or with its last file nearly full), its snapshots
        // small (pods come and go) or large.
        for pods in (5_000..8_000).step_by(500) {
            let dir = tempfile::tempdir().unwrap();
            record_churn(dir.path(), 2 << 20, pods, 1_000);
            let files = writer::journal_files(dir.path()).unwrap();
            let total: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
            assert!(total <= 2 << 20, "{pods} pods: {total} bytes in {files:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), 2 << 20, 6_000);
        let journal = read_journal(dir.path()).unwrap();
        assert!(journal.header.segment > 1 && journal.header.snapshot_lines > 0, "{:?}", journal.header);
        let first = journal.lines().next().unwrap().unwrap();
        assert!(matches!(first.entry, Entry::Layout(_)), "a snapshot opens with the core's node layout: {first:?}");
        let names = pod_names(&journal);
        // The snapshot holds every pod alive at its moment, p0 first.
        assert_eq!(names[0], "p0");
        assert_eq!(names.last().map(|n| n.contains("Deleted")), Some(true));
        assert!(
            Recorder::start(RecordSettings {
                dir: dir.path().to_path_buf(),
                max_bytes: 1 << 20,
                profiles: vec![],
                seed: 0
            })
            .is_err_and(|e| e.contains("already holds a recording"))
        );
    }
}
