//! A policy project as `wasmsched new` writes it, in any of its three
//! languages: what to run to test and build it, where its `.wasm`, its
//! settings and its cluster are, and which files are its sources.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// One command of a round (a test run, a build), run in the project.
#[derive(Debug, Clone)]
pub struct Step {
    pub label: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(&'static str, &'static str)>,
}

/// The SDK's files that `wasmsched new` copies into `src/`: the
/// interpreter carries its own.
const SDK_FILES: &[&str] = &["wasmsched_helpers.py", "wasmsched-helpers.js"];

#[derive(Debug)]
pub struct Project {
    pub root: PathBuf,
    pub name: String,
    pub lang: Lang,
}

/// The Rust build `dev` makes: the release profile without LTO and with
/// incremental compilation, so that an edit rebuilds in about a second
/// (release's LTO and single codegen unit are for the policy you ship).
/// Defined through cargo's environment, so a project written by an older
/// wasmsched needs no edit, and `cargo build --release` stays as it was.
const RUST_DEV_PROFILE: &[(&str, &str)] = &[
    ("CARGO_PROFILE_WASMSCHED_DEV_INHERITS", "release"),
    ("CARGO_PROFILE_WASMSCHED_DEV_LTO", "false"),
    ("CARGO_PROFILE_WASMSCHED_DEV_CODEGEN_UNITS", "16"),
    ("CARGO_PROFILE_WASMSCHED_DEV_INCREMENTAL", "true"),
];

impl Project {
    /// The project in `root`, told by its files: `Cargo.toml` (Rust),
    /// `package.json` (JavaScript), `requirements.txt` and `src/app.py`
    /// (Python).
    pub fn find(root: &Path) -> anyhow::Result<Project> {
        let root = std::path::absolute(root).with_context(|| format!("{}", root.display()))?;
        let (lang, name) = if root.join("Cargo.toml").is_file() {
            (Lang::Rust, manifest_name(&root.join("Cargo.toml"), toml_name)?)
        } else if root.join("package.json").is_file() {
            (Lang::Js, manifest_name(&root.join("package.json"), json_name)?)
        } else if root.join("requirements.txt").is_file() && root.join("src/app.py").is_file() {
            (Lang::Python, settings_name(&root)?)
        } else {
            bail!(
                "{}: not a policy project (no Cargo.toml, package.json, or requirements.txt with src/app.py); \
                 `wasmsched new NAME --lang rust|python|js` writes one",
                root.display()
            );
        };
        let project = Project { root, name, lang };
        for needed in [project.cluster(), project.settings()] {
            if !needed.is_file() {
                bail!("{}: missing; `wasmsched new` writes it beside the policy's sources", needed.display());
            }
        }
        Ok(project)
    }

    pub fn cluster(&self) -> PathBuf {
        self.root.join("cluster.yaml")
    }

    pub fn settings(&self) -> PathBuf {
        self.root.join(format!("{}.yaml", self.name))
    }

    fn file_stem(&self) -> String {
        self.name.replace('-', "_")
    }

    /// The policy a round loads: a Python or JavaScript project's source
    /// file itself, run by its language's interpreter (no build), unless
    /// its `src/` holds modules of the author's besides it, which only a
    /// componentized build carries; else the component a round builds.
    pub fn policy(&self) -> PathBuf {
        self.source_policy().unwrap_or_else(|| self.wasm())
    }

    /// The entry file, when the project runs as source.
    pub fn source_policy(&self) -> Option<PathBuf> {
        let entry = match self.lang {
            Lang::Rust => return None,
            Lang::Python => "app.py",
            Lang::Js => "policy.js",
        };
        let src = self.root.join("src");
        let modules = std::fs::read_dir(&src).ok()?.filter_map(|e| e.ok()?.file_name().into_string().ok());
        let others = modules
            .filter(|f| f.ends_with(".py") || f.ends_with(".js") || f.ends_with(".mjs"))
            .any(|f| f != entry && !SDK_FILES.contains(&f.as_str()));
        (!others).then(|| src.join(entry))
    }

    /// Whether a change to `path` leaves the code as it was: the settings
    /// or the cluster, which a round only simulates again.
    pub fn is_data(&self, path: &Path) -> bool {
        path == self.cluster() || path == self.settings()
    }

    /// The component a round builds.
    pub fn wasm(&self) -> PathBuf {
        let file = format!("{}.wasm", self.file_stem());
        match self.lang {
            Lang::Rust => self.root.join("target/wasm32-wasip2/wasmsched-dev").join(file),
            Lang::Python | Lang::Js => self.root.join(file),
        }
    }

    /// Where compiled components are kept between rounds (each project's
    /// `.gitignore` leaves it out).
    pub fn cache_dir(&self) -> PathBuf {
        match self.lang {
            Lang::Rust => self.root.join("target/wasmsched-cache"),
            Lang::Python | Lang::Js => self.root.join(".wasmsched-cache"),
        }
    }

    /// What a change to is a reason for a new round: the sources, the
    /// tests, the settings, the cluster and the build's own manifest.
    pub fn sources(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let dirs = ["src", "tests", "wit"].iter().map(|d| self.root.join(d)).filter(|d| d.is_dir()).collect();
        let manifest = match self.lang {
            Lang::Rust => "Cargo.toml",
            Lang::Js => "package.json",
            Lang::Python => "requirements.txt",
        };
        let files = vec![self.cluster(), self.settings(), self.root.join(manifest)];
        (dirs, files)
    }

    /// The round's commands, tests first (`tests`), then the build (none
    /// for a project that runs as source).
    pub fn steps(&self, tests: bool) -> Vec<Step> {
        let as_source = self.source_policy().is_some();
        let step = |label, program: &str, args: &[&str]| Step {
            label,
            program: PathBuf::from(program),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
        };
        let mut steps = Vec::new();
        match self.lang {
            Lang::Rust => {
                // The project's own target/, whatever CARGO_TARGET_DIR says:
                // the round reads the component from there.
                let target = self.root.join("target").display().to_string();
                if tests {
                    steps.push(step("cargo test", "cargo", &["test", "--quiet", "--target-dir", &target]));
                }
                let args =
                    ["build", "--profile", "wasmsched-dev", "--target", "wasm32-wasip2", "--target-dir", &target];
                let mut build = step("cargo build", "cargo", &args);
                build.env = RUST_DEV_PROFILE.to_vec();
                steps.push(build);
            }
            Lang::Js => {
                if tests {
                    steps.push(step("npm test", "npm", &["test", "--silent"]));
                }
                if !as_source {
                    steps.push(step("npm run build", "npm", &["run", "build", "--silent"]));
                }
            }
            Lang::Python => {
                let componentize = self.root.join(".venv/bin/componentize-py").display().to_string();
                let wit = ["-d", "wit", "-w", "scheduler-policy"];
                if !self.root.join("bindings").is_dir() {
                    let args = [&wit[..], &["bindings", "bindings"]].concat();
                    steps.push(step("componentize-py bindings", &componentize, &args));
                }
                if tests {
                    let python = self.root.join(".venv/bin/python").display().to_string();
                    steps.push(step("unittest", &python, &["-m", "unittest", "discover", "-s", "tests"]));
                }
                if !as_source {
                    let out = format!("{}.wasm", self.file_stem());
                    let args = [&wit[..], &["componentize", "-p", "src", "app", "-o", &out]].concat();
                    steps.push(step("componentize-py", &componentize, &args));
                }
            }
        }
        steps
    }
}

fn manifest_name(path: &Path, read: fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let text = wasmsched_runtime::read_text_bounded(path, 1 << 20, "manifest size")
        .with_context(|| format!("reading {}", path.display()))?;
    read(&text).with_context(|| format!("{}: no package name", path.display()))
}

/// `name = "..."` of Cargo.toml's `[package]` table.
fn toml_name(text: &str) -> Option<String> {
    let package = text.split("\n[").find(|t| t.trim_start_matches('[').starts_with("package]"))?;
    package.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        // The quoted string alone: a comment may follow it.
        let quoted = value.trim().strip_prefix('"')?.split('"').next()?;
        (key.trim() == "name").then(|| quoted.to_string())
    })
}

fn json_name(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value["name"].as_str().map(str::to_string)
}

/// A Python project's name is its settings file's, `NAME.yaml`: the one
/// YAML file at its top other than `cluster.yaml`.
fn settings_name(root: &Path) -> anyhow::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .with_context(|| format!("{}", root.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".yaml").map(str::to_string))
        .filter(|n| n != "cluster")
        .collect();
    match names.len() {
        1 => Ok(names.remove(0)),
        _ => bail!(
            "{}: cannot tell the policy's settings file (NAME.yaml beside cluster.yaml): found {}",
            root.display(),
            if names.is_empty() { "none".to_string() } else { names.join(".yaml, ") + ".yaml" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cargo_manifest_names_its_package() {
        let text = "[package]\nname = \"my-policy\"\nversion = \"0.1.0\"\n\n[dependencies]\nname = \"x\"\n";
        assert_eq!(toml_name(text).as_deref(), Some("my-policy"));
        assert_eq!(toml_name("[workspace]\n").as_deref(), None);
        assert_eq!(toml_name("[package]\nname = \"p\" # ours\n").as_deref(), Some("p"));
    }
}
