//! `wasmsched new`: a policy project that builds, tests and simulates with
//! no edit, outside this repository.

mod js_project;
mod python_project;
mod rust_project;
mod sample_files;
mod sdk_copy;

use std::path::{Path, PathBuf};

pub use js_project::js_project;
pub use python_project::python_project;
pub use rust_project::rust_project;

/// Which phases the example policy takes part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    pub filter: bool,
    pub score: bool,
}

impl Phases {
    /// From `filter`, `score` or `filter,score`.
    pub fn parse(text: &str) -> Result<Phases, String> {
        let mut phases = Phases { filter: false, score: false };
        for part in text.split(',').map(str::trim) {
            match part {
                "filter" => phases.filter = true,
                "score" => phases.score = true,
                other => return Err(format!("unknown phase {other:?}: use filter, score or filter,score")),
            }
        }
        Ok(phases)
    }

    /// `filter`'s part, then `score`'s, of those the example takes part in:
    /// how every template is put together.
    pub fn pick(self, filter: &str, score: &str) -> String {
        let mut text = String::new();
        if self.filter {
            text += filter;
        }
        if self.score {
            text += score;
        }
        text
    }
}

/// The file name the build gives policy `name`'s component, without
/// `.wasm` (`prefer-zone` → `prefer_zone`).
fn wasm_stem(name: &str) -> String {
    name.replace('-', "_")
}

/// A policy name is its crate's name and what `describe` reports: lower
/// case letters, digits and `-`, starting with a letter.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a policy name: use lower-case letters, digits and '-', starting with a letter (e.g. prefer-zone)"
        ))
    }
}

/// Writes `files` under `dir`, creating it. Refuses, before writing
/// anything, if `dir` exists and is not empty: nothing is overwritten.
pub fn write(dir: &Path, files: &[(PathBuf, String)]) -> Result<(), String> {
    if let Ok(mut entries) = std::fs::read_dir(dir) {
        if entries.next().is_some() {
            return Err(format!(
                "{} already exists and is not empty; nothing was written. Choose another NAME or --dir",
                dir.display()
            ));
        }
    } else if dir.exists() {
        return Err(format!("{} exists and is not a directory; nothing was written", dir.display()));
    }
    for (relative, contents) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        std::io::Write::write_all(&mut file, contents.as_bytes())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_phases_are_checked() {
        assert!(check_name("prefer-zone").is_ok());
        assert!(check_name("p2").is_ok());
        for bad in ["", "Prefer", "2fast", "a_b", "a-", "a b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Phases::parse("filter,score"), Ok(Phases { filter: true, score: true }));
        assert_eq!(Phases::parse("score"), Ok(Phases { filter: false, score: true }));
        assert!(Phases::parse("filter,sort").unwrap_err().contains("unknown phase \"sort\""));
    }

    #[test]
    fn an_existing_directory_is_never_written_into() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let files = vec![(PathBuf::from("keep.txt"), "theirs".to_string())];
        let e = write(dir.path(), &files).unwrap_err();
        assert!(e.contains("already exists and is not empty; nothing was written"), "{e}");
        assert_eq!(std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(), "mine");
        let fresh = dir.path().join("new");
        write(&fresh, &files).unwrap();
        assert_eq!(std::fs::read_to_string(fresh.join("keep.txt")).unwrap(), "theirs");
    }
}
