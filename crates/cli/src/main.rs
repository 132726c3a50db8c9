#![forbid(unsafe_code)]

use clap::Parser;

/// jemalloc: the services allocate many small, short-lived buffers from
/// many threads — glibc's malloc spent ~15% of a loaded engine's CPU in its
/// arena locks and consolidation (`ember bench load` under perf) — and its
/// background threads give freed memory back to the system while the
/// process is idle (after a burst, RSS returns to where it was). It also
/// takes `malloc` itself (unprefixed), so SQLite's allocations — a copy of
/// every column of every row read — use it too instead of glibc's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = match ember::commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => ember::commands::exit_on_parse_error(error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(ember::commands::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", ember_runtime::telemetry::fatal_line(error.message()));
            std::process::ExitCode::from(error.exit_code())
        }
    }
}
