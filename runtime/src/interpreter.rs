//! Policies shipped as source: a Python or JavaScript file run by its
//! language's interpreter component, which wasmsched provides (one per
//! language, with that language's SDK inside). The interpreter is compiled
//! once and shared by every policy of its language; each policy still runs
//! in instances of its own, with its own limits. The interpreter asks for
//! the policy's source through the one import it adds to the contract,
//! `wasmsched:interpreter/source@0.1.0` (wit/interpreter/0.1.0), answered
//! here from the instance's store.

use std::path::{Path, PathBuf};

use wasmtime::component::Linker;

use crate::host_state::HostState;
use crate::source::{Language, SourceFile};

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

const SOURCE_INTERFACE: &str = "wasmsched:interpreter/source@0.1.0";

/// `source.files`, for every component: only an interpreter imports it,
/// and only a source policy's instances have files to give.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.instance(SOURCE_INTERFACE)?.func_wrap("files", |store, (): ()| {
        let state: &HostState = store.data();
        Ok((state.program.as_deref().map(<[SourceFile]>::to_vec).unwrap_or_default(),))
    })?;
    Ok(())
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
}
