//! Compiling a policy in a child process that can be stopped. Cranelift
//! cannot be interrupted: a compile abandoned on a thread runs on, holding
//! a core and its memory until it ends. In a child it is stopped once it
//! used its CPU bound (`RLIMIT_CPU`), or, waiting for a core far longer
//! than that, at its wall-clock bound; its address space is capped, so a
//! hostile component (docs/security.md, finding 5) costs the host at most
//! its compile bound.
//!
//! The child is this same executable (`wasmsched` names the hidden
//! subcommand); it reads the component on stdin, compiles it with the
//! tier's settings and writes wasmtime's precompiled artifact on stdout,
//! which the parent deserializes into its own engine.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Engine, OptLevel};

/// How to start a compile: `program args… --opt none|speed [--parallel]`.
#[derive(Debug, Clone)]
pub struct CompileWorker {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The child's address-space cap (RLIMIT_AS).
    pub memory_bytes: u64,
}

/// What a child may map: a compile of the largest policy allowed (4 MiB
/// for tenants, 64 MiB of wasm at most) stays well inside it.
pub const WORKER_MEMORY_BYTES: u64 = 4 << 30;

/// A precompiled artifact is a few times its component (least-allocated's
/// 3.4 times): past this many times, or past a floor for small ones, the
/// child's output is refused rather than read.
const ARTIFACT_PER_WASM_BYTE: u64 = 32;
const MIN_ARTIFACT_BYTES: u64 = 64 << 20;

/// How often the parent looks whether the child is done.
const POLL: Duration = Duration::from_millis(5);

impl CompileWorker {
    pub fn new(program: impl Into<PathBuf>, args: Vec<OsString>) -> Self {
        CompileWorker { program: program.into(), args, memory_bytes: WORKER_MEMORY_BYTES }
    }

    /// Compiles `bytes` in a child for `engine` (made with `parallel` and
    /// `opt`), within `cpu` of CPU time and `wall` of wall-clock time;
    /// past either the child is stopped.
    pub(crate) fn compile(
        &self,
        engine: &Engine,
        (parallel, opt): (bool, OptLevel),
        incremental: Option<&Path>,
        bytes: &[u8],
        (cpu, wall): (Duration, Duration),
    ) -> Result<Component, String> {
        let mut command = Command::new(&self.program);
        command.args(&self.args).args(["--opt", opt_name(opt)]);
        if parallel {
            command.arg("--parallel");
        }
        if let Some(dir) = incremental {
            command.arg("--incremental-dir").arg(dir);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        confine(&mut command, self.memory_bytes, cpu);
        let mut child =
            command.spawn().map_err(|e| format!("starting the compile ({}): {e}", self.program.display()))?;
        let input = child.stdin.take().map(|mut stdin| {
            let bytes = bytes.to_vec();
            // A child that died early closes its stdin: that error is its
            // exit status's to explain.
            std::thread::spawn(move || drop(stdin.write_all(&bytes)))
        });
        let max_artifact = (bytes.len() as u64).saturating_mul(ARTIFACT_PER_WASM_BYTE).max(MIN_ARTIFACT_BYTES);
        let stdout = child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                let mut artifact = Vec::new();
                out.take(max_artifact + 1).read_to_end(&mut artifact).map(|_| artifact)
            })
        });
        let stderr = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = err.take(64 << 10).read_to_string(&mut text);
                text
            })
        });
        let (exited, used) = wait_within(&mut child, wall);
        crate::cpu_time::charge(used);
        drop(input.map(|t| t.join()));
        let artifact =
            stdout.and_then(|t| t.join().ok()).transpose().map_err(|e| format!("reading the compile: {e}"))?;
        let errors = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        match exited {
            None => Err(format!(
                "compiling took longer than {wall:?} (having used {used:.1?} of its {cpu:?} of CPU; is the machine \
                 that busy?): stopped"
            )),
            Some(status) if !status.success() => Err(child_failure(status, &errors, cpu)),
            Some(_) => {
                let artifact = artifact.unwrap_or_default();
                if artifact.len() as u64 > max_artifact {
                    return Err(format!(
                        "the compiled policy is over {max_artifact} bytes ({ARTIFACT_PER_WASM_BYTE} times its component)"
                    ));
                }
                // SAFETY: the artifact is wasmtime's own, made by this very
                // executable's child with this engine's settings (the
                // program is the scheduler's, never a policy's); wasmtime
                // still rejects one from another version or configuration.
                unsafe { Component::deserialize(engine, &artifact) }.map_err(|e| format!("{e:#}"))
            }
        }
    }
}

/// Waits for `child` until `timeout`; past it kills it (and reaps it).
/// Its exit status (None: killed at the bound) and the CPU it used: its
/// own resource usage, which budgets count (`cpu_time`), not the wait.
fn wait_within(child: &mut Child, timeout: Duration) -> (Option<ExitStatus>, Duration) {
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        match reap(child, false) {
            Ok(Some((status, cpu))) => return (Some(status), cpu),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) => {
                let _ = child.kill();
                let cpu = reap(child, true).ok().flatten().map_or(timeout, |(_, cpu)| cpu);
                return (None, cpu);
            }
            // Not ours to reap (never seen): std's own wait, and the CPU
            // unknown, so its wall time counts.
            Err(_) => {
                let status = child.wait().ok();
                return (status, started.elapsed());
            }
        }
    }
}

/// The child's exit status and CPU time once it exited (`block`: wait for
/// it), through `wait4`, which reports the reaped child's own usage.
#[cfg(unix)]
fn reap(child: &mut Child, block: bool) -> std::io::Result<Option<(ExitStatus, Duration)>> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        let mut status = 0;
        // SAFETY: zeroed is a valid rusage (plain integers).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child only, writing two locals.
        match unsafe { libc::wait4(pid, &mut status, flags, &mut usage) } {
            0 => return Ok(None),
            -1 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            _ => return Ok(Some((ExitStatus::from_raw(status), crate::cpu_time::of_rusage(&usage)))),
        }
    }
}

/// Elsewhere no usage is known: it counts as none.
#[cfg(not(unix))]
fn reap(child: &mut Child, block: bool) -> std::io::Result<Option<(ExitStatus, Duration)>> {
    let status = if block { Some(child.wait()?) } else { child.try_wait()? };
    Ok(status.map(|s| (s, Duration::ZERO)))
}

/// Why a child failed: its own words (the compile error), or the signal
/// that ended it (its memory cap, say).
fn child_failure(status: ExitStatus, errors: &str, cpu: Duration) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if matches!(status.signal(), Some(libc::SIGXCPU | libc::SIGKILL)) && errors.trim().is_empty() {
            // SIGXCPU at the soft CPU limit, SIGKILL at the hard one.
            return format!("compiling used more than {cpu:?} of CPU: stopped");
        }
    }
    let said = errors.trim();
    if !said.is_empty() {
        return said.strip_prefix("error: ").unwrap_or(said).to_string();
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("the compile was ended by signal {signal} (past its memory cap?)");
        }
    }
    format!("the compile failed ({status})")
}

/// The child's limits: its address space capped, its CPU time capped at
/// `cpu` (whole seconds, at least one: SIGXCPU, then SIGKILL a second
/// later), and a lower priority than the scheduling threads.
fn confine(command: &mut Command, memory_bytes: u64, cpu: Duration) {
    let seconds = cpu.as_secs().saturating_add(u64::from(cpu.subsec_nanos() > 0)).max(1);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the child between fork and exec, and calls only
        // setrlimit and setpriority, which are async-signal-safe; nothing
        // is allocated and no lock is taken.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: memory_bytes, rlim_max: memory_bytes };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let limit = libc::rlimit { rlim_cur: seconds, rlim_max: seconds + 1 };
                if libc::setrlimit(libc::RLIMIT_CPU, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::setpriority(libc::PRIO_PROCESS, 0, 10);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (command, memory_bytes, seconds);
}

fn opt_name(opt: OptLevel) -> &'static str {
    match opt {
        OptLevel::None => "none",
        _ => "speed",
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_stopped_once_it_used_its_cpu_not_while_it_waits() {
        let mut waiting = Command::new("sleep");
        waiting.arg("2");
        confine(&mut waiting, WORKER_MEMORY_BYTES, Duration::from_secs(1));
        let mut child = waiting.spawn().unwrap();
        let (status, used) = wait_within(&mut child, Duration::from_secs(60));
        assert!(status.is_some_and(|s| s.success()), "two seconds of waiting are not one of CPU: {status:?}");
        assert!(used < Duration::from_millis(500), "{used:?}");

        let mut spinning = Command::new("sh");
        spinning.args(["-c", "while :; do :; done"]);
        confine(&mut spinning, WORKER_MEMORY_BYTES, Duration::from_secs(1));
        let mut child = spinning.spawn().unwrap();
        let (status, used) = wait_within(&mut child, Duration::from_secs(600));
        let status = status.expect("stopped by its CPU limit, long before the wall bound");
        // The kernel stops it on its own sampled account of the CPU; the
        // rusage reaped read 882 ms of a 1 s limit on a busy machine.
        assert!(used >= Duration::from_millis(500), "{used:?}");
        let said = child_failure(status, "", Duration::from_secs(1));
        assert_eq!(said, "compiling used more than 1s of CPU: stopped");
    }
}

/// The child's side: the component on stdin, the precompiled artifact on
/// stdout (`opt`: `none` or `speed`, as the parent's tier).
pub fn serve(opt: &str, parallel: bool, incremental: Option<&Path>) -> Result<(), String> {
    let opt = match opt {
        "none" => OptLevel::None,
        "speed" => OptLevel::Speed,
        other => return Err(format!("--opt {other:?}: none or speed")),
    };
    let config = crate::engine_config::engine_config(parallel, opt, incremental);
    let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).map_err(|e| format!("reading the component: {e}"))?;
    let artifact = engine.precompile_component(&bytes).map_err(|e| format!("{e:#}"))?;
    std::io::stdout().write_all(&artifact).map_err(|e| format!("writing the compiled policy: {e}"))
}
