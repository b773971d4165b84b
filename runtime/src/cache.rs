//! Precompiled policies on disk: loading a precompiled policy is far
//! cheaper than compiling it (docs/benchmarks.md, policy load). Entries are
//! keyed by the engine's compatibility hash (wasmtime version and settings)
//! and the policy's sha256, so a stale entry is never even looked at.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use wasmtime::Engine;
use wasmtime::component::Component;

pub(crate) struct PrecompiledCache {
    dir: PathBuf,
}

impl PrecompiledCache {
    pub(crate) fn new(dir: PathBuf) -> Self {
        PrecompiledCache { dir }
    }

    fn path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{:016x}-{sha256}.cwasm", hasher.finish()))
    }

    pub(crate) fn contains(&self, engine: &Engine, sha256: &str) -> bool {
        self.path(engine, sha256).is_file()
    }

    pub(crate) fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.path(engine, sha256);
        // Read into memory rather than `deserialize_file`: a mapped file that
        // someone truncates or rewrites in place would crash the process
        // with SIGBUS.
        let bytes = std::fs::read(&path).ok()?;
        // SAFETY: the cache directory is the scheduler's own; entries are
        // written only by `store` below from components this engine compiled,
        // and wasmtime still rejects artifacts from another version or config.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "ignoring unusable precompiled policy");
                None
            }
        }
    }

    pub(crate) fn store(&self, engine: &Engine, sha256: &str, component: &Component) {
        let path = self.path(engine, sha256);
        let result = (|| -> wasmtime::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            let bytes = component.serialize()?;
            // Write then rename, so a concurrent reader never sees half a file.
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "could not cache precompiled policy");
        }
    }
}
