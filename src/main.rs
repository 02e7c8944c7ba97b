//! The `scarsim` binary: parse arguments, dispatch, report errors.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = scarsim::cli::Cli::parse();
    match scarsim::commands::dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Output piped into `head` and closed early is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
