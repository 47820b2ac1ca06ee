use clap::Parser;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away (`| head`),
    // rather than panicking on a failed print.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = collsched::cli::Cli::parse();
    let code = collsched::cli::run(cli);
    std::process::exit(code as i32);
}
