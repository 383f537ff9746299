//! `rabbit-backoff --help` and its commands' help.

mod common;

use common::*;

#[test]
fn help_explains_every_command() {
    let help = cli(&["--help"]);
    let text = stdout(&help);
    for command in ["status", "dlq", "topology"] {
        assert!(text.contains(command), "{text}");
    }
    let peek = stdout(&cli(&["dlq", "peek", "--help"]));
    assert!(
        peek.contains("redelivered"),
        "peek's help says the flag is set: {peek}"
    );
    let bad = cli(&["topology", "--queue", "orders", "--delays", "5x"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown unit"));
}
