//! `scripts/cluster.sh` run by a test: the cluster on localhost, or the one
//! in network namespaces (`CLUSTER_NETNS=1`).

use std::process::{Command, Output};

/// Which of the script's clusters a test drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cluster {
    /// Three nodes on 127.0.0.1 (`scripts/cluster.sh up`).
    Localhost,
    /// Three nodes, each in a network namespace (`CLUSTER_NETNS=1`).
    Netns,
}

impl Cluster {
    /// The script run with `args`, whatever its exit.
    pub fn script(self, args: &[&str]) -> Output {
        let mut command = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/cluster.sh"
        ));
        command.args(args);
        if self == Cluster::Netns {
            command.env("CLUSTER_NETNS", "1");
        }
        command.output().expect("scripts/cluster.sh runs")
    }

    /// What the script run with `args` printed; fails the test, with all it
    /// printed, when the script fails.
    pub fn sh(self, args: &[&str]) -> String {
        let output = self.script(args);
        assert!(
            output.status.success(),
            "{}scripts/cluster.sh {} failed:\n{}{}",
            if self == Cluster::Netns {
                "CLUSTER_NETNS=1 "
            } else {
                ""
            },
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}
