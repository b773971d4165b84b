//! A policy bundle in a directory (`--policy-dir`): local authoring, or a
//! ConfigMap mounted as a volume.
//!
//! The kubelet updates a mounted ConfigMap atomically: the files live in a
//! timestamped directory, `..data` is a symlink to it, and each key is a
//! symlink `KEY -> ..data/KEY`. A new version is written to a new
//! timestamped directory and `..data` is swapped in one rename; only then
//! are the key symlinks added or removed. Reading the keys in between would
//! mix versions (or find none), so when `..data` exists the bundle is read
//! from it: always one complete version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use sha2::{Digest, Sha256};

/// The files of the bundle in `dir` (see the module doc), hidden entries
/// and subdirectories skipped.
pub fn read_bundle_dir(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let data = dir.join("..data");
    let root = if data.is_dir() { data } else { dir.to_path_buf() };
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&root)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        // Follows symlinks; a dangling one is skipped.
        let Ok(meta) = std::fs::metadata(entry.path()) else { continue };
        if meta.is_file() {
            files.insert(name, std::fs::read(entry.path())?);
        }
    }
    Ok(files)
}

/// A digest of a bundle's names and contents, to skip reloads of what is
/// already active.
pub fn bundle_digest(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut h = Sha256::new();
    for (name, bytes) in files {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    hex::encode(h.finalize())
}

/// Watches `dir` (not recursively: the kubelet's swap is a rename in it)
/// and sends `()` once the directory has been quiet for `settle` after a
/// change: a file being written produces several events, and the reader
/// should see the end result.
pub struct DirWatcher {
    _watcher: notify::RecommendedWatcher,
    pub changes: mpsc::Receiver<()>,
}

impl DirWatcher {
    pub fn new(dir: &Path, settle: Duration) -> notify::Result<DirWatcher> {
        let (raw_tx, raw_rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher = notify::recommended_watcher(raw_tx)?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        let (tx, changes) = mpsc::channel();
        let dir: PathBuf = dir.to_path_buf();
        std::thread::Builder::new()
            .name("policy-dir-watch".into())
            .spawn(move || {
                while let Ok(first) = raw_rx.recv() {
                    if let Err(e) = first {
                        tracing::warn!(dir = %dir.display(), error = %e, "watching the policy directory");
                    }
                    // Debounce: wait until no event for `settle`.
                    while raw_rx.recv_timeout(settle).is_ok() {}
                    if tx.send(()).is_err() {
                        return;
                    }
                }
            })
            .map_err(notify::Error::io)?;
        Ok(DirWatcher { _watcher: watcher, changes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn reads_the_kubelets_data_view_and_plain_directories() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.wasm"), b"a").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join(".hidden"), b"h").unwrap();
        symlink(d.path().join("missing"), d.path().join("dangling.wasm")).unwrap();
        let files = read_bundle_dir(d.path()).unwrap();
        assert_eq!(files.keys().collect::<Vec<_>>(), ["a.wasm"]);

        // The kubelet's layout, caught between the ..data swap and the key
        // symlinks update: the old key dangles, the new one is not linked.
        let k = tempfile::tempdir().unwrap();
        let v2 = k.path().join("..2026_11_22_v2");
        std::fs::create_dir(&v2).unwrap();
        std::fs::write(v2.join("new.wasm"), b"new").unwrap();
        symlink("..2026_11_22_v2", k.path().join("..data")).unwrap();
        symlink("..data/old.wasm", k.path().join("old.wasm")).unwrap();
        let files = read_bundle_dir(k.path()).unwrap();
        assert_eq!(files.keys().collect::<Vec<_>>(), ["new.wasm"]);
        assert_ne!(bundle_digest(&files), bundle_digest(&BTreeMap::new()));
    }
}
