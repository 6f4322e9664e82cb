//! The virtctl binary: parse, connect, run one command, print its result.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use virtctl::cli::{Cli, Command};
use virtctl::{VirtctlError, commands, connect, console};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("virtctl: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(Some(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("virtctl: error: {}", kubevirt_api::error_report::one_line(&e));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: &Cli) -> Result<Option<String>, VirtctlError> {
    // Bad flags are reported before the cluster is looked for.
    commands::request_for(&cli.command, "")?;
    let (client, namespace) = connect::client(cli).await?;
    if let Command::Console { name, timeout } = &cli.command {
        let socket = console::open(&client, &namespace, name, Duration::from_secs(timeout * 60)).await?;
        console::attach(socket, name).await?;
        return Ok(None);
    }
    let Some(call) = commands::request_for(&cli.command, &namespace)? else {
        return Ok(None);
    };
    commands::send(&client, &call).await.map(Some)
}
