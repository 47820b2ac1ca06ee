//! A run cut short by a signal (SIGTERM from a batch system at its time limit, SIGINT from
//! Ctrl-C, SIGHUP from a closed terminal) leaves nothing partial, as a failure does
//! (docs/design/CLI.md): the temporary files and the folders made for outputs are removed, and
//! the process exits with 128 + the signal's number.

use crate::io::scratch;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signals handled, with their names for the message.
const SIGNALS: [(i32, &str); 3] = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGHUP, "SIGHUP")];

/// Starts a thread that waits for SIGTERM, SIGINT or SIGHUP; on the first, it removes every
/// registered temporary file and then the folders made for outputs, says so on stderr and exits
/// with 128 + the signal's number. The signal handler itself only wakes the thread (signal-hook's
/// self-pipe): the cleanup does its file I/O and takes its lock on an ordinary thread. A signal
/// the process was started ignoring (`nohup`, a background job's SIGINT) stays ignored.
///
/// Errors: the handlers or the thread cannot be set up (a message to print; the run goes on
/// without the cleanup).
pub fn clean_up_on_signals() -> Result<(), String> {
    let wanted: Vec<i32> = SIGNALS.iter().map(|&(s, _)| s).filter(|&s| !ignored(s)).collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let mut signals = Signals::new(&wanted).map_err(|e| format!("cannot handle signals: {e}"))?;
    let wait = move || {
        let Some(signal) = signals.forever().next() else { return };
        // The lock stays held until the process exits: no file is staged or renamed after the
        // cleanup, and a rename under way finishes (the file in its place) before it starts.
        let mut held = scratch();
        let removed = held.remove_all();
        let name = SIGNALS.iter().find(|&&(s, _)| s == signal).map_or("a signal", |&(_, n)| n);
        eprintln!(
            "interrupted by {name}: removed {} temporary file{} and {} folder{} made for the outputs",
            removed.files,
            crate::units::plural(removed.files as u64),
            removed.folders,
            crate::units::plural(removed.folders as u64)
        );
        std::process::exit(128 + signal);
    };
    std::thread::Builder::new().name("signals".into()).spawn(wait).map_err(|e| format!("cannot start the thread that handles signals: {e}"))?;
    Ok(())
}

/// Whether `signal` is ignored (inherited so from the parent, as `nohup` leaves SIGHUP).
fn ignored(signal: i32) -> bool {
    // SAFETY: a query only (no new action); `old` is a valid, zeroed sigaction to fill.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}
