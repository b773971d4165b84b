//! `wasmsched new NAME`: writes a policy project that builds, tests and
//! simulates with no edit (`wasmsched::scaffold`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use wasmsched::scaffold::{self, Phases};

#[derive(Args)]
pub struct NewArgs {
    /// The policy's name: its crate, its `.wasm` and what the scheduler
    /// reports (lower-case letters, digits, '-').
    pub name: String,
    /// The language of the project.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// The phases the example policy takes part in: filter, score or
    /// filter,score.
    #[arg(long, default_value = "filter,score", value_parser = Phases::parse)]
    pub phases: Phases,
    /// Where to write it [default: ./NAME]. Must not exist, or be empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    scaffold::check_name(&args.name).map_err(anyhow::Error::msg)?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let files = match args.lang {
        Lang::Rust => scaffold::rust_project(&args.name, args.phases),
        Lang::Python => scaffold::python_project(&args.name, args.phases),
        Lang::Js => scaffold::js_project(&args.name, args.phases),
    };
    scaffold::write(&dir, &files).map_err(anyhow::Error::msg)?;
    println!("Wrote policy {} in {}: {} files. Next, as its README says:", args.name, dir.display(), files.len());
    println!("  cd {}", dir.display());
    match args.lang {
        Lang::Rust => println!("  cargo test && cargo build --release --target wasm32-wasip2"),
        Lang::Python => println!("  python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"),
        Lang::Js => println!("  npm install && npm test"),
    }
    Ok(ExitCode::SUCCESS)
}
