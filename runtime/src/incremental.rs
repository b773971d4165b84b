//! Cranelift's incremental compilation cache, kept in a directory: each
//! compiled function under the hash of its input. A Python or JavaScript
//! policy is an interpreter (thousands of functions) and the author's
//! source (data): after an edit only the data differs, so a compile takes
//! every function from here and compiles none (`wasmsched dev`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use wasmtime::CacheStore;

/// An entry larger than this is not kept (a compiled function is a few
/// KiB; cranelift's largest are well under it).
const MAX_ENTRY_BYTES: u64 = 16 << 20;

#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    pub fn new(dir: impl Into<PathBuf>) -> DirStore {
        DirStore { dir: dir.into() }
    }

    /// The file of `key`: its hash in hex, fanned out by its first byte.
    fn path(&self, key: &[u8]) -> PathBuf {
        use sha2::Digest;
        let name = hex::encode(sha2::Sha256::digest(key));
        self.dir.join(&name[..2]).join(&name[2..])
    }
}

impl CacheStore for DirStore {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let path = self.path(key);
        if std::fs::metadata(&path).ok()?.len() > MAX_ENTRY_BYTES {
            return None;
        }
        std::fs::read(path).ok().map(Cow::Owned)
    }

    /// Written beside and renamed into place, so that a reader (another
    /// compile at the same time) never sees half an entry.
    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        if value.len() as u64 > MAX_ENTRY_BYTES {
            return false;
        }
        let path = self.path(key);
        let Some(parent) = path.parent() else { return false };
        let temporary = parent.join(format!(".{}.{}", std::process::id(), unique()));
        std::fs::create_dir_all(parent).is_ok()
            && std::fs::write(&temporary, &value).is_ok()
            && std::fs::rename(&temporary, &path).is_ok()
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The incremental cache under a cache directory's root.
pub fn dir_under(root: &Path) -> PathBuf {
    root.join("functions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        assert!(store.get(b"k").is_none());
        assert!(store.insert(b"k", b"compiled".to_vec()));
        assert_eq!(store.get(b"k").as_deref(), Some(&b"compiled"[..]));
        assert!(store.get(b"other").is_none());
    }
}
