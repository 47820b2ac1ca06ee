//! A run cut short by a signal, as a batch system's time limit (SIGTERM) or Ctrl-C (SIGINT) cuts
//! it: it exits 128 + the signal, having removed its temporary files and the folders made for
//! them (docs/design/CLI.md, exit codes).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every path under `dir`, recursively.
fn paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(paths(&p));
        }
        out.push(p);
    }
    out
}

fn is_temporary(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().contains(".tmp-"))
}

/// Waits for `child` to exit, at most `limit`.
fn wait(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_signal_mid_write_leaves_nothing_and_exits_128_plus_the_signal() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let dir = std::env::temp_dir().join(format!("collsched-interrupt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Pairs of cables of a 4x4x4 torus: 26 classes at a second each, their files staged as
        // each class is done; the output folders are the run's to make.
        let out = dir.join("out/library");
        let mut command = Command::new(env!("CARGO_BIN_EXE_collsched"));
        command.args(["sweep", "--torus", "4x4x4", "--faults", "pairs", "--time-limit", "1", "--jobs", "2", "-o"]).arg(&out);
        // The run keeps a signal its parent ignores ignored (a background job's SIGINT, as when
        // these tests run in one): the child starts with the default action, as from a terminal.
        // SAFETY: between fork and exec only `signal`, which is async-signal-safe, is called.
        unsafe {
            command.pre_exec(move || {
                libc::signal(signal, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        // A temporary file in the output: the run is mid-write.
        let start = Instant::now();
        loop {
            if paths(&dir).iter().any(|p| is_temporary(p)) {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{name}: the sweep ended ({status}) before any temporary file appeared: give it a bigger job");
            }
            assert!(start.elapsed() < Duration::from_secs(300), "{name}: no temporary file in 300 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: a signal to our own child, which has not been waited for, so its pid is its own.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let Some(status) = wait(&mut child, Duration::from_secs(120)) else {
            child.kill().unwrap();
            panic!("{name}: the sweep did not exit in 120 s after the signal");
        };
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        // Handled, not killed by the default action: an exit code, not a signal.
        assert_eq!(status.signal(), None, "{name}: killed by the signal, not handled; stderr: {stderr}");
        assert_eq!(status.code(), Some(128 + signal), "{name}: stderr: {stderr}");
        assert!(stderr.contains(&format!("interrupted by {name}: removed ")), "{name}: stderr: {stderr}");
        // Nothing partial: no temporary file, and none of the folders the run made.
        let left = paths(&dir);
        assert!(left.is_empty(), "{name}: left behind: {left:?}; stderr: {stderr}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
