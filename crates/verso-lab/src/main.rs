//! The `verso` command-line tool: the lab's workloads, measured. `verso --help` lists the
//! subcommands; `docs/lab.md` describes the outputs.

use std::process::ExitCode;

/// mimalloc (v2: mimalloc 0.1.52's default, C mimalloc v3.3.2, segfaulted under threads
/// when we measured the candidate crates), inside
/// Verso's memory spaces, which serve the version storage of a database opened with
/// `--memory-spaces` (Wu et al. §4.4) and pass everything else to mimalloc. Only the binary
/// chooses an allocator; the engine library never does.
#[global_allocator]
static ALLOCATOR: verso::research::MemorySpaces<mimalloc::MiMalloc> =
    verso::research::MemorySpaces::new(mimalloc::MiMalloc);

use clap::Parser;
use verso_lab::cli::{execute, Cli};

fn main() -> ExitCode {
    // Bad options exit with clap's usage status (2) and message.
    let cli = Cli::parse();
    let command_line: Vec<String> = std::env::args().collect();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = execute(&cli, command_line, &mut out);
    // An interrupt may have removed a peer under the run: let its cleanup finish and end
    // the process with its own status rather than report the failure it caused.
    verso_lab::peers::cleanup::wait_if_interrupted();
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("verso: {error}");
            ExitCode::FAILURE
        }
    }
}
