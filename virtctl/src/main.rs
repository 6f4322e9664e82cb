//! The virtctl binary: parse, connect, run one command, print its result.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use virtctl::cli::{Cli, Command, Create};
use virtctl::{VirtctlError, commands, connect, console, create_vm, expand, image_upload, migrate_cancel};

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

/// Five random lowercase letters and digits, as upstream's generated names end.
fn random_suffix() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut bits = hasher.finish();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..5)
        .map(|_| {
            let index = usize::try_from(bits % 36).unwrap_or(0);
            bits /= 36;
            char::from(alphabet[index])
        })
        .collect()
}

async fn run(cli: &Cli) -> Result<Option<String>, VirtctlError> {
    if let Command::Create { what: Create::Vm(args) } = &cli.command {
        for warning in create_vm::deprecation_warnings(args) {
            eprintln!("{warning}");
        }
        let vm = create_vm::create_vm(
            args,
            &format!("vm-{}", random_suffix()),
            cli.namespace.as_deref(),
            &mut random_suffix,
        )?;
        return create_vm::to_yaml(&vm).map(|yaml| Some(yaml.trim_end().to_owned()));
    }
    // Bad flags are reported before the cluster is looked for.
    commands::request_for(&cli.command, "")?;
    let upload = match &cli.command {
        Command::ImageUpload(args) => {
            for warning in image_upload::deprecation_warnings(args) {
                eprintln!("{warning}");
            }
            Some(image_upload::validate(args).map_err(VirtctlError::Usage)?)
        }
        _ => None,
    };
    let (client, namespace) = connect::client(cli).await?;
    if let (Command::ImageUpload(args), Some(upload)) = (&cli.command, &upload) {
        image_upload::flow::run(&client, &namespace, args, upload)
            .await
            .map_err(VirtctlError::Usage)?;
        return Ok(None);
    }
    if let Command::Expand(args) = &cli.command {
        return expand::run(&client, args, &namespace)
            .await
            .map(|out| Some(out.trim_end().to_owned()));
    }
    if let Command::MigrateCancel { name, dry_run } = &cli.command {
        return migrate_cancel::run(&client, &namespace, name, dry_run.dry_run)
            .await
            .map(Some);
    }
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
