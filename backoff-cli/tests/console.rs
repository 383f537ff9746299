//! `rabbit-backoff console`: what the command adds to the console it
//! serves (the console itself, its page and its API, is tested in
//! backoff-console/tests).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use rabbit_backoff_test_support::broker::url;

#[test]
fn refuses_to_listen_beyond_loopback_without_a_token_set_by_the_operator() {
    let output = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["console", "--listen", "0.0.0.0:0", "--allowed-host", "x:1"])
        .env("AMQP_URL", url())
        .env_remove("RABBIT_BACKOFF_CONSOLE_TOKEN")
        .output()
        .expect("run the console");
    assert!(!output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("without a token set by the operator: set RABBIT_BACKOFF_CONSOLE_TOKEN"),
        "{output:?}"
    );
}

/// The command serves the console on the address it prints, with its flags
/// (`--read-only`, `--audit-log`) and its token from the environment.
#[test]
fn serves_the_console_on_the_address_it_prints_with_its_flags() {
    let audit = std::env::temp_dir().join(format!(
        "rbt-cli-console-audit-{}.jsonl",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["console", "--listen", "127.0.0.1:0", "--read-only"])
        .arg("--audit-log")
        .arg(&audit)
        .env("AMQP_URL", url())
        .env(
            "RABBIT_BACKOFF_CONSOLE_TOKEN",
            "cli-console-token-0123456789",
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rabbit-backoff console");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("read the console's address");
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let host = first
        .trim()
        .strip_prefix("rabbit-backoff console: http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("the console printed {first:?}, not its address"))
        .to_owned();
    let response = rabbit_backoff_test_support::http::get(&host, "/api/config", &host, "");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&audit);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let (_, body) = response.split_once("\r\n\r\n").unwrap();
    let config: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(config["read_only"], true, "{config}");
    assert_eq!(config["audit_log"], audit.display().to_string(), "{config}");
}
