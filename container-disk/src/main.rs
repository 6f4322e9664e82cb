//! The container-disk binary: arguments, then [`container_disk::serve`] until SIGTERM.

use std::process::ExitCode;

fn main() -> ExitCode {
    match container_disk::Command::parse(std::env::args_os().skip(1)) {
        Ok(container_disk::Command::NoOp) => ExitCode::SUCCESS,
        Ok(container_disk::Command::Serve { copy_path }) => match container_disk::serve(&copy_path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("container-disk: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) => {
            eprintln!("container-disk: {error}\n{}", container_disk::USAGE);
            ExitCode::from(2)
        }
    }
}
