//! [`BrokerRelease`]: what a broker node says it is when a connection
//! opens, and what the framework concludes from it.

use std::fmt;

/// The product and version a broker node names in AMQP 0-9-1's
/// `connection.start` (its server properties `product` and `version`).
///
/// ```
/// use rabbit_backoff::{BrokerRelease, HeldRetries};
///
/// let release = BrokerRelease::new("RabbitMQ", "4.3.6");
/// assert_eq!(release.held_retries(), HeldRetries::Held);
/// assert_eq!(BrokerRelease::new("RabbitMQ", "3.10.8").held_retries(), HeldRetries::NotHeld);
/// // A source build says 0.0.0, another broker names another product.
/// assert_eq!(BrokerRelease::new("RabbitMQ", "0.0.0").held_retries(), HeldRetries::Unknown);
/// assert_eq!(BrokerRelease::new("LavinMQ", "2.0.0").held_retries(), HeldRetries::Unknown);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerRelease {
    /// The server's `product`, such as `RabbitMQ`.
    pub product: String,
    /// The server's `version`, such as `4.3.6`.
    pub version: String,
}

/// Whether a broker holds a retry back until the time the consumer asks,
/// as RabbitMQ 4.3 does on quorum queues (its delayed retries, and a
/// `modified` delivery held until its `x-opt-delivery-time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeldRetries {
    /// RabbitMQ 4.3 or later.
    Held,
    /// RabbitMQ before 4.3: it accepts the arguments and ignores them, so a
    /// retry would come back at once.
    NotHeld,
    /// The release says nothing certain (another product, a source build's
    /// `0.0.0`, a version that does not parse): ask the broker itself.
    Unknown,
}

/// The first RabbitMQ release that holds retries back.
const HOLDS_FROM: (u32, u32) = (4, 3);

impl BrokerRelease {
    /// A release of `product` at `version`.
    pub fn new(product: impl Into<String>, version: impl Into<String>) -> Self {
        BrokerRelease {
            product: product.into(),
            version: version.into(),
        }
    }

    /// The major and minor version of a RabbitMQ release; `None` for
    /// another product, or a version that names no release (`0.0.0`, what
    /// a build from source says).
    pub fn rabbitmq_version(&self) -> Option<(u32, u32)> {
        if !self.product.eq_ignore_ascii_case("RabbitMQ") {
            return None;
        }
        let mut parts = self.version.split(['.', '+', '-']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        ((major, minor) != (0, 0)).then_some((major, minor))
    }

    /// Whether this release holds retries back.
    pub fn held_retries(&self) -> HeldRetries {
        match self.rabbitmq_version() {
            Some(version) if version >= HOLDS_FROM => HeldRetries::Held,
            Some(_) => HeldRetries::NotHeld,
            None => HeldRetries::Unknown,
        }
    }
}

impl fmt::Display for BrokerRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.product, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rabbitmq_from_4_3_holds_retries_and_earlier_releases_do_not() {
        for (version, held) in [
            ("3.10.8", HeldRetries::NotHeld),
            ("3.13.7", HeldRetries::NotHeld),
            ("4.0.5", HeldRetries::NotHeld),
            ("4.2.1", HeldRetries::NotHeld),
            ("4.3.0", HeldRetries::Held),
            ("4.3.6", HeldRetries::Held),
            ("4.10.0", HeldRetries::Held),
            ("5.0.0", HeldRetries::Held),
            ("4.3.0-rc.1", HeldRetries::Held),
            ("4.3.0+12.g1234", HeldRetries::Held),
        ] {
            assert_eq!(
                BrokerRelease::new("RabbitMQ", version).held_retries(),
                held,
                "{version}"
            );
        }
    }

    #[test]
    fn what_names_no_release_is_unknown() {
        for (product, version) in [
            ("RabbitMQ", "0.0.0"),
            ("RabbitMQ", ""),
            ("RabbitMQ", "four"),
            ("RabbitMQ", "4"),
            ("LavinMQ", "4.3.0"),
            ("", "4.3.0"),
        ] {
            assert_eq!(
                BrokerRelease::new(product, version).held_retries(),
                HeldRetries::Unknown,
                "{product} {version}"
            );
        }
    }
}
