//! Policies from a directory (`--policy-dir DIR`), hot-swapped: a
//! ConfigMap mounted as a volume (read through the kubelet's `..data`
//! view, so never half of an update) or a directory an author builds into.
//! Same validation and swap as the ConfigMap source; a rejection is logged
//! and counted (there is no API object to put an Event on).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::kubernetes::hot_swap::profile_updates::{ProfilePolicies, ProfileUpdates};
use crate::kubernetes::scheduler_status::SyncedSources;
use crate::kubernetes::writes::bind_gate::BindGate;
use crate::policy::directory::{DirWatcher, bundle_digest, read_bundle_dir};
use crate::policy::validator::BundleValidator;
use crate::scheduler_metrics::SchedulerMetrics;

/// Quiet time after the last change before the directory is read.
const SETTLE: Duration = Duration::from_millis(150);
/// Read again this often even without a notification (some volume types
/// do not deliver inotify events).
const RESCAN: Duration = Duration::from_secs(10);

pub struct PolicyDirSource {
    dir: PathBuf,
    profile: String,
    validator: Arc<BundleValidator>,
}

impl PolicyDirSource {
    pub fn new(dir: PathBuf, profile: String, validator: Arc<BundleValidator>) -> Self {
        PolicyDirSource { dir, profile, validator }
    }

    pub fn source_name(dir: &std::path::Path) -> String {
        format!("policy dir {}", dir.display())
    }

    /// Runs on its own thread until the scheduling loop is gone.
    pub fn run<T: From<ProfilePolicies>>(
        self,
        tx: std::sync::mpsc::Sender<T>,
        (metrics, synced, gate): (Arc<SchedulerMetrics>, Arc<SyncedSources>, Arc<BindGate>),
    ) {
        let watcher = match DirWatcher::new(&self.dir, SETTLE) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot watch the policy directory; rescanning every {RESCAN:?}");
                None
            }
        };
        let origin = format!("dir {}", self.dir.display());
        let mut updates = ProfileUpdates::new(&self.profile, origin, self.validator.clone(), tx, metrics);
        let mut last_digest: Option<String> = None;
        loop {
            match read_bundle_dir(&self.dir) {
                Ok(files) => {
                    let digest = bundle_digest(&files);
                    if last_digest.as_ref() != Some(&digest) {
                        last_digest = Some(digest);
                        updates.offer(&files);
                    }
                }
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "cannot read the policy directory");
                    updates.unavailable(&format!("policy dir {}: {e}", self.dir.display()));
                }
            }
            synced.set_synced(&Self::source_name(&self.dir));
            if gate.is_stopping() {
                return;
            }
            match &watcher {
                Some(w) => match w.changes.recv_timeout(RESCAN) {
                    Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                },
                None => std::thread::sleep(RESCAN),
            }
        }
    }
}
