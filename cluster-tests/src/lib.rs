//! rabbit-backoff's fault tests on a three-node RabbitMQ cluster, in a crate
//! of their own so that the published facade carries no feature for them:
//! `cluster-tests/tests/cluster.rs` (nodes killed under load, on `scripts/cluster.sh up`)
//! and `tests/partitions/` (network faults, on `CLUSTER_NETNS=1
//! scripts/cluster.sh up`, as root). The library holds what both drive: the
//! script that starts, cuts and heals the cluster ([`cluster_script`]).
//!
//! Not published, and not a default member of the workspace: `cargo test` at
//! the root does not run these without their cluster. scripts/test.sh runs
//! them: `cargo test --workspace --test cluster`, and `--test partitions` on
//! the namespaced cluster.
#![forbid(unsafe_code)]

pub mod cluster_script;
