use clap::Parser;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away (`| head`),
    // rather than panicking on a failed print.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A run cut short by SIGTERM, SIGINT or SIGHUP removes its temporary files and exits 128 +
    // the signal (docs/design/CLI.md); installed before any other thread starts.
    if let Err(e) = collsched::clean_up_on_signals() {
        eprintln!("warning: {e}; a run cut short by a signal may leave temporary files");
    }
    let cli = collsched::Cli::parse();
    // A panic is a bug: it exits with the internal-error code (docs/design/CLI.md), after the
    // default hook has printed where it happened.
    let code = std::panic::catch_unwind(|| collsched::run_cli(cli)).unwrap_or(collsched::ExitCode::Internal);
    std::process::exit(code as i32);
}
