//! A policy's bytes and where they came from; for a policy shipped as
//! source, its language and its files as its interpreter receives them.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use wasmtime::component::{ComponentType, Lower};

/// Where a policy's bytes came from, for messages (`policies/x.wasm`,
/// `configmap kube-system/wasmsched-policies key x.wasm`).
#[derive(Debug, Clone)]
pub struct PolicySource {
    pub origin: String,
    pub bytes: Arc<[u8]>,
    /// For a policy shipped as source (not a component: its name ends in
    /// `.py` or `.js`), its language.
    pub language: Option<Language>,
}

impl PolicySource {
    pub fn new(origin: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Self {
        let (origin, bytes) = (origin.into(), bytes.into());
        let component = bytes.starts_with(b"\0asm");
        let language = if component { None } else { Language::of_file_name(&origin) };
        PolicySource { origin, bytes, language }
    }

    /// The file name its origin ends with (`team_fit.py` of
    /// `configmap ns/p: team_fit.py`), as a traceback shows it.
    pub fn file_name(&self) -> &str {
        let last = self.origin.rsplit([' ', '/']).next().unwrap_or(&self.origin);
        if last.is_empty() { &self.origin } else { last }
    }

    /// The file's bytes, within the default policy size limit.
    pub fn from_file(path: &std::path::Path) -> std::io::Result<Self> {
        Self::from_file_within(path, crate::PolicyLimits::default().max_wasm_bytes)
    }

    /// The file's bytes, read no further than `max_bytes` (an endless or
    /// huge file is refused, not read whole and measured after).
    pub fn from_file_within(path: &std::path::Path, max_bytes: usize) -> std::io::Result<Self> {
        Ok(PolicySource::new(path.display().to_string(), read_bounded(path, max_bytes, "policy size")?))
    }

    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }
}

/// Reads at most `max_bytes` of `path`: a longer file (or `/dev/zero`) is
/// an error naming the limit (`what`), found without reading further.
pub fn read_bounded(path: &std::path::Path, max_bytes: usize, what: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(max_bytes as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than the {max_bytes}-byte {what} limit"),
        ));
    }
    Ok(bytes)
}

/// As [`read_bounded`], as UTF-8 text.
pub fn read_text_bounded(path: &std::path::Path, max_bytes: usize, what: &str) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, max_bytes, what)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// A settings or configuration file: a ConfigMap holds at most 1 MiB.
pub const MAX_SETTINGS_BYTES: usize = 1 << 20;

/// A language whose policies may be shipped as source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Python,
    JavaScript,
}

impl Language {
    pub const ALL: [Language; 2] = [Language::Python, Language::JavaScript];

    /// The language a file name says (`team_fit.py`, `cheapest.js`).
    pub fn of_file_name(name: &str) -> Option<Language> {
        if name.ends_with(".py") {
            Some(Language::Python)
        } else if name.ends_with(".js") || name.ends_with(".mjs") {
            Some(Language::JavaScript)
        } else {
            None
        }
    }

    /// The interpreter component's file name.
    pub fn interpreter_file(self) -> &'static str {
        match self {
            Language::Python => "wasmsched-python.wasm",
            Language::JavaScript => "wasmsched-js.wasm",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "Python",
            Language::JavaScript => "JavaScript",
        }
    }
}

/// One file of a source policy, as the interpreter receives it.
#[derive(Debug, Clone, ComponentType, Lower)]
#[component(record)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

/// A source policy's files, the entry module first, as one instance's
/// store holds them.
pub(crate) type Program = Arc<[SourceFile]>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_without_reading_it_whole() {
        let e = read_bounded(std::path::Path::new("/dev/zero"), 1 << 20, "policy size").unwrap_err();
        assert_eq!(e.to_string(), "longer than the 1048576-byte policy size limit");
    }
}
