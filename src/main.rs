use clap::Parser;

fn main() {
    let cli = collsched::cli::Cli::parse();
    let code = collsched::cli::run(cli);
    std::process::exit(code as i32);
}
