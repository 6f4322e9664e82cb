//! `spec.certificateRotateStrategy.selfSigned` of the KubeVirt CR on the real cluster: with
//! certificates of 6 minutes renewed 4 minutes before they expire, virt-api's serving certificate
//! and virt-handler's are made again every 2 minutes, while a `virtctl console` session opened
//! before keeps answering, and a new session (made with the new certificates) works; once the CR
//! leaves the strategy out again, the certificates go back to 24 hours.

use std::io::{Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use virt_api::tls::CertFacts;

use super::support::{
    Cleanup, console_until, example, kubeconfig, kubectl_ok, patch_kubevirt, virtctl_binary, wait_for, wait_for_phase,
};
use super::virt_operator::deployed;

const API_SECRET: &str = "kubevirt-virt-api-certs";
const HANDLER_SECRET: &str = "kubevirt-virt-handler-server-certs";
/// Valid from this long before it is made (virt-api's clock skew allowance).
const SKEW: i64 = virt_api::certificates::plan::CLOCK_SKEW_SECONDS;

fn certificate(secret: &str) -> (String, CertFacts) {
    let pem = kubectl_ok(&[
        "-n",
        "kubevirt",
        "get",
        "secret",
        secret,
        "--template={{index .data \"tls.crt\" | base64decode}}",
    ]);
    let facts = CertFacts::from_pem(&pem)
        .unwrap_or_else(|| panic!("{secret}: no certificate in {pem}"))
        .remove(0);
    (pem, facts)
}

fn lifetime(facts: &CertFacts) -> i64 {
    facts.not_after - facts.not_before - SKEW
}

/// Puts the CR's strategy back however the test ends.
struct StrategyReset;

impl Drop for StrategyReset {
    fn drop(&mut self) {
        let _ = patch_kubevirt(&serde_json::json!({"spec": {"certificateRotateStrategy": null}}));
    }
}

/// A `virtctl console` session held open, its output gathered as it comes.
struct Console {
    child: Child,
    stdin: std::process::ChildStdin,
    output: Arc<Mutex<String>>,
}

impl Console {
    fn open(name: &str) -> Self {
        let mut child = Command::new(virtctl_binary())
            .env("KUBECONFIG", kubeconfig())
            .args(["console", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("virtctl console");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let output = Arc::new(Mutex::new(String::new()));
        let gathered = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buffer = [0_u8; 4096];
            while let Ok(read) = stdout.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                gathered
                    .lock()
                    .expect("output")
                    .push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
        Self { child, stdin, output }
    }

    /// Types `echo` of a marker until the marker comes back, within `timeout`.
    fn answers(&mut self, marker: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            assert!(
                self.child.try_wait().expect("virtctl console").is_none(),
                "the console session ended: {}",
                self.output.lock().expect("output")
            );
            self.stdin
                .write_all(format!("echo {marker}-$((6*7))\n").as_bytes())
                .expect("typing on the console");
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(3) {
                if self.output.lock().expect("output").contains(&format!("{marker}-42")) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!(
            "{marker}-42 did not come back on the console within {timeout:?}: {}",
            self.output.lock().expect("output")
        );
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn short_lived_certificates_rotate_under_an_open_console() {
    deployed();
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "vmi",
        "e2e-cert-rotation",
        &example("vmi-testguest.yaml", "e2e-cert-rotation"),
    );
    wait_for_phase("e2e-cert-rotation", "Running", Duration::from_secs(120));
    let mut console = Console::open("e2e-cert-rotation");
    console.answers("BEFORE", Duration::from_secs(90));

    let reset = StrategyReset;
    let short = patch_kubevirt(
        &serde_json::json!({"spec": {"certificateRotateStrategy": {"selfSigned": {
            "server": {"duration": "6m", "renewBefore": "4m"},
        }}}}),
    );
    assert!(short.status.success(), "{}", String::from_utf8_lossy(&short.stderr));

    // Made again for 6 minutes once the CA's bundle had time to spread (at most 10 minutes after
    // the CA was made), then every 2 minutes: three certificates of each in a row.
    let mut seen: Vec<Vec<(String, CertFacts)>> = vec![Vec::new(), Vec::new()];
    wait_for(
        "three certificates of 6 minutes in a row for virt-api and virt-handler",
        Duration::from_secs(20 * 60),
        || {
            for (secret, made) in [API_SECRET, HANDLER_SECRET].into_iter().zip(seen.iter_mut()) {
                let (pem, facts) = certificate(secret);
                let new = made.last().is_none_or(|(last, _)| *last != pem);
                if new && lifetime(&facts) == 6 * 60 {
                    made.push((pem, facts));
                }
            }
            seen.iter().all(|made| made.len() >= 3).then_some(())
        },
    );
    for (secret, made) in [API_SECRET, HANDLER_SECRET].into_iter().zip(&seen) {
        for pair in made.windows(2) {
            // Renewed when 4 of its 6 minutes are left (give or take the time to look again).
            let renewed_after = pair[1].1.not_before - pair[0].1.not_before;
            assert!(
                (100..=200).contains(&renewed_after),
                "{secret}: renewed after {renewed_after} s"
            );
        }
    }
    // The session opened under the first certificates still answers; once it is closed (the
    // serial console takes one session at a time), a new one, made with the new certificates,
    // works.
    console.answers("DURING", Duration::from_secs(60));
    drop(console);
    console_until(
        "e2e-cert-rotation",
        "\necho NEW-$((6*7))",
        "NEW-42",
        Duration::from_secs(60),
    );

    drop(reset);
    for secret in [API_SECRET, HANDLER_SECRET] {
        wait_for(
            &format!("{secret} back to 24 hours"),
            Duration::from_secs(5 * 60),
            || (lifetime(&certificate(secret).1) == 24 * 3600).then_some(()),
        );
    }
    console_until(
        "e2e-cert-rotation",
        "\necho AFTER-$((6*7))",
        "AFTER-42",
        Duration::from_secs(60),
    );
}
