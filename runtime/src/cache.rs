//! Precompiled policies on disk: loading a precompiled policy is far
//! cheaper than compiling it (docs/benchmarks.md, policy load). Entries are
//! keyed by the engine's compatibility hash (wasmtime version and settings)
//! and the policy's sha256, so a stale entry is never even looked at.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::time::SystemTime;

use wasmtime::Engine;
use wasmtime::component::Component;

pub(crate) struct PrecompiledCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// What the entries together may take: past it the least recently used
/// go. deploy/ gives the cache an `emptyDir` of 1 GiB, which the kubelet
/// enforces by evicting the scheduler; tenants sending ever new
/// components must not get it there.
pub(crate) const MAX_CACHE_BYTES: u64 = 512 << 20;

impl PrecompiledCache {
    pub(crate) fn new(dir: PathBuf) -> Self {
        PrecompiledCache { dir, max_bytes: MAX_CACHE_BYTES }
    }

    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    #[cfg(test)]
    fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
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
        // Used: the last to go when the cache is full.
        let _ = std::fs::File::options().write(true).open(&path).and_then(|f| f.set_modified(SystemTime::now()));
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
        self.forget_least_used();
    }

    /// Removes the entries used longest ago until the rest fit.
    fn forget_least_used(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(|e| {
                let e = e.ok()?;
                let meta = e.metadata().ok()?;
                meta.is_file().then(|| (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component of one core module holding one function returning `n`.
    fn component(engine: &Engine, n: u32) -> Component {
        use wasm_encoder::{CodeSection, Function, FunctionSection, Instruction, Module, TypeSection, ValType};
        let mut module = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        module.section(&types);
        let mut functions = FunctionSection::new();
        functions.function(0);
        module.section(&functions);
        let mut code = CodeSection::new();
        let mut body = Function::new([]);
        body.instruction(&Instruction::I32Const(n as i32)).instruction(&Instruction::End);
        code.function(&body);
        module.section(&code);
        let mut component = wasm_encoder::Component::new();
        component.section(&wasm_encoder::ModuleSection(&module));
        Component::new(engine, component.finish()).unwrap()
    }

    /// Past its bound the cache keeps the entries used last.
    #[test]
    fn a_full_cache_forgets_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let one = component(&engine, 0).serialize().unwrap().len() as u64;
        let cache = PrecompiledCache::new(dir.path().to_path_buf()).with_max_bytes(one * 5 / 2);
        for n in 0..2 {
            cache.store(&engine, &format!("{n}"), &component(&engine, n));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(cache.load(&engine, "0").is_some(), "the first, used again");
        std::thread::sleep(std::time::Duration::from_millis(20));
        cache.store(&engine, "2", &component(&engine, 2));
        assert!(cache.contains(&engine, "0") && cache.contains(&engine, "2"));
        assert!(!cache.contains(&engine, "1"), "the least recently used went");
    }
}
