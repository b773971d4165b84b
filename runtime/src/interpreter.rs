//! Policies shipped as source: a Python or JavaScript file run by its
//! language's interpreter component, which wasmsched provides (one per
//! language, with that language's SDK inside). The interpreter is compiled
//! once and shared by every policy of its language; each policy still runs
//! in instances of its own, with its own limits. The interpreter asks for
//! the policy's source through the one import it adds to the contract,
//! `wasmsched:interpreter/source` (wit/interpreter/0.2.0 on the policy
//! contract 0.4; 0.1.0, on 0.3, for interpreters built before it),
//! answered here from the instance's store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use wasmtime::component::Linker;

use crate::host_state::HostState;
use crate::source::{Language, PolicySource, SourceFile};

/// The largest interpreter component read: ours, whatever the size cap
/// of the policies it runs (a tenant's is 4 MiB, far below an
/// interpreter's 12-20 MB).
pub(crate) const MAX_INTERPRETER_BYTES: usize = 64 << 20;

/// Where the interpreter components are looked for, in order.
#[derive(Debug, Clone, Default)]
pub struct Interpreters {
    pub dirs: Vec<PathBuf>,
}

impl Interpreters {
    /// The interpreter of `language`: the first directory that holds it.
    /// An error says where it looked and how to get one.
    pub fn find(&self, language: Language) -> Result<PathBuf, String> {
        let file = language.interpreter_file();
        if let Some(found) = self.dirs.iter().map(|d| d.join(file)).find(|p| p.is_file()) {
            return Ok(found);
        }
        let looked: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        Err(format!(
            "a {} policy shipped as source runs on the {} interpreter component ({file}), which is in none of: {}; \
             `policies/install-toolchains.sh` builds it into target/interpreters/, and `--interpreters DIR` \
             (or WASMSCHED_INTERPRETERS) says where it is",
            language.as_str(),
            language.as_str(),
            if looked.is_empty() { "(no directory given)".to_string() } else { looked.join(", ") }
        ))
    }

    /// The directories beside an executable where a build or an install
    /// puts the interpreters: `interpreters/` beside it, `target/interpreters/`
    /// for one in `target/release/`, and `share/wasmsched/interpreters/`
    /// of its prefix (the container image's `/usr/local`).
    pub fn beside(executable: &Path) -> Interpreters {
        let Some(dir) = executable.parent() else { return Interpreters::default() };
        let mut dirs = vec![dir.join("interpreters")];
        if let Some(up) = dir.parent() {
            dirs.push(up.join("interpreters"));
            dirs.push(up.join("share/wasmsched/interpreters"));
        }
        Interpreters { dirs }
    }
}

/// Every released version of the interpreters' import; each has the same
/// one function.
const SOURCE_INTERFACES: [&str; 2] = ["wasmsched:interpreter/source@0.1.0", "wasmsched:interpreter/source@0.2.0"];

/// `source.files`, for every component: only an interpreter imports it,
/// and only a source policy's instances have files to give.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    for interface in SOURCE_INTERFACES {
        linker.instance(interface)?.func_wrap("files", |store, (): ()| {
            let state: &HostState = store.data();
            Ok((state.program.as_deref().map(<[SourceFile]>::to_vec).unwrap_or_default(),))
        })?;
    }
    Ok(())
}

/// Interpreter components as read from disk, with their sha256: each file
/// is read and hashed again only when its size or modification time
/// changed, not at every policy of its language (20 MB apiece).
#[derive(Default)]
pub(crate) struct InterpreterFiles {
    read: Mutex<HashMap<PathBuf, ReadFile>>,
}

/// A file as read: its modification time and size then, its bytes and
/// their sha256.
struct ReadFile {
    stamp: (Option<SystemTime>, u64),
    source: PolicySource,
    sha256: String,
}

impl InterpreterFiles {
    /// The component at `path` and its sha256.
    pub(crate) fn read(&self, path: &Path) -> Result<(PolicySource, String), String> {
        let reading = |e: &dyn std::fmt::Display| format!("reading {}: {e}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| reading(&e))?;
        let stamp = (meta.modified().ok(), meta.len());
        let mut read = self.read.lock().expect("never poisoned");
        if let Some(file) = read.get(path).filter(|file| file.stamp == stamp) {
            return Ok((file.source.clone(), file.sha256.clone()));
        }
        let source = PolicySource::from_file_within(path, MAX_INTERPRETER_BYTES).map_err(|e| reading(&e))?;
        let sha256 = source.sha256();
        read.insert(path.to_path_buf(), ReadFile { stamp, source: source.clone(), sha256: sha256.clone() });
        Ok((source, sha256))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_says_its_language() {
        assert_eq!(Language::of_file_name("team_fit.py"), Some(Language::Python));
        assert_eq!(Language::of_file_name("configmap ns/p: cheapest.js"), Some(Language::JavaScript));
        assert_eq!(Language::of_file_name("x.wasm"), None);
    }

    #[test]
    fn a_missing_interpreter_says_where_it_looked_and_what_builds_it() {
        let e = Interpreters { dirs: vec!["/nowhere".into()] }.find(Language::Python).unwrap_err();
        assert!(e.contains("(wasmsched-python.wasm), which is in none of: /nowhere;"), "{e}");
        assert!(e.contains("policies/install-toolchains.sh"), "{e}");
    }

    #[test]
    fn an_interpreter_file_is_read_again_only_when_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wasmsched-python.wasm");
        std::fs::write(&path, b"\0asm one").unwrap();
        let files = InterpreterFiles::default();
        let (first, sha) = files.read(&path).unwrap();
        assert_eq!(sha, first.sha256());
        assert_eq!(files.read(&path).unwrap().1, sha, "unchanged: the same");
        std::fs::write(&path, b"\0asm second").unwrap();
        let (again, changed) = files.read(&path).unwrap();
        assert_ne!(changed, sha, "a new size is a new file");
        assert_eq!(&*again.bytes, b"\0asm second");
        std::fs::remove_file(&path).unwrap();
        assert!(files.read(&path).unwrap_err().starts_with("reading "), "a file gone is an error");
    }
}
