//! Processes a test starts, ended when the test ends, pass or panic. A
//! failed assertion unwinds through the [`Guarded`] child, whose drop kills
//! its whole process group (what it started in turn: compile workers,
//! builds) and reaps it, so that no scheduler is left holding its port
//! after the suite.

use std::io::{self, Read};
use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};

/// A child in a process group of its own, killed with the group on drop.
#[derive(Debug)]
pub struct Guarded {
    child: Child,
}

/// Starts `command` as a [`Guarded`] child.
pub fn spawn(command: &mut Command) -> io::Result<Guarded> {
    command.process_group(0).spawn().map(|child| Guarded { child })
}

/// Runs `command` to its end as `Command::output` does, then kills what it
/// left running in its group (a browser's helpers, say).
pub fn output(command: &mut Command) -> io::Result<Output> {
    let mut child = spawn(command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()))?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let status = child.wait()?;
    // Helpers that kept the pipes open end with the group.
    child.kill_all();
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    Ok(Output { status, stdout, stderr })
}

impl Guarded {
    /// Kills the child's group now and reaps the child.
    pub fn kill_all(&mut self) {
        // The group is the child's pid (`process_group(0)`). A group whose
        // members all exited is gone: nothing is signalled.
        // SAFETY: sends a signal; no memory is touched.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Deref for Guarded {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for Guarded {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.kill_all();
    }
}
