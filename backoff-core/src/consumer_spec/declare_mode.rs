//! [`DeclareMode`]: whether a consumer declares its topology or only checks
//! that it exists.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Whether a consumer declares its topology or only checks that it exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DeclareMode {
    /// Declare every exchange, queue and binding at start-up (idempotent;
    /// the default).
    #[default]
    Declare,
    /// Declare nothing: check passively that every exchange and queue exists,
    /// for topologies that operators own (imported definitions, policies).
    /// A passive check sees that an object exists, not its arguments or
    /// bindings.
    Passive,
}

impl DeclareMode {
    /// The attribute value: `declare` or `passive`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeclareMode::Declare => "declare",
            DeclareMode::Passive => "passive",
        }
    }
}

impl fmt::Display for DeclareMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeclareMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "declare" => Ok(DeclareMode::Declare),
            "passive" => Ok(DeclareMode::Passive),
            other => Err(format!(
                "`{other}` is not a declare mode; write \"declare\" (the consumer declares its topology, the default) or \"passive\" (it only checks that the topology exists)"
            )),
        }
    }
}
