//! [`TopologyNames`]: the names of a consumer's exchanges and queues, with
//! the [`NameOverrides`] of its attribute, and their validation.

use serde::{Deserialize, Serialize};

/// Optional replacements for the default names derived from the queue name.
///
/// Every `None` keeps the default of the [naming scheme](TopologyNames::resolve).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct NameOverrides {
    /// The work exchange (default: the queue name).
    pub exchange: Option<String>,
    /// The routing key binding the work queue to the work exchange (default:
    /// the queue name).
    pub routing_key: Option<String>,
    /// The retry exchange (default: `<queue>.retry`).
    pub retry_exchange: Option<String>,
    /// The retry queue pattern, with a `{ms}` placeholder for the delay
    /// (default: `<queue>.retry_{ms}ms`).
    pub retry_queue: Option<String>,
    /// The dead-letter exchange (default: `<queue>.dlx`).
    pub dead_letter_exchange: Option<String>,
    /// The dead-letter queue (default: `<queue>.dlq`).
    pub dead_letter_queue: Option<String>,
    /// The routing key binding the dead-letter queue (default: `<queue>.dlq`).
    pub dead_letter_routing_key: Option<String>,
}

/// Every name a consumer's topology uses, after defaults and overrides.
///
/// ```
/// use rabbit_backoff::topology::{NameOverrides, TopologyNames};
///
/// let names = TopologyNames::resolve("orders", &NameOverrides::default());
/// assert_eq!(names.retry_queue(5_000), "orders.retry_5000ms");
/// assert_eq!(names.dead_letter_queue, "orders.dlq");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TopologyNames {
    /// The work queue.
    pub queue: String,
    /// The work exchange.
    pub exchange: String,
    /// The routing key binding the work queue to the work exchange.
    pub routing_key: String,
    /// The retry exchange.
    pub retry_exchange: String,
    /// The retry queue pattern, containing `{ms}`.
    pub retry_queue_pattern: String,
    /// The dead-letter exchange.
    pub dead_letter_exchange: String,
    /// The dead-letter queue.
    pub dead_letter_queue: String,
    /// The routing key binding the dead-letter queue.
    pub dead_letter_routing_key: String,
}

/// What the dead-letter index's name adds to the dead-letter queue's.
const INDEX_SUFFIX: &str = ".index";
const REPLAYS_SUFFIX: &str = ".replays";

/// What the index's tombstone stream adds to the index's name.
const REMOVALS_SUFFIX: &str = ".removed";

/// The placeholder a retry queue pattern must contain.
pub(crate) const MS_PLACEHOLDER: &str = "{ms}";

impl TopologyNames {
    /// Applies the default naming scheme to `queue`, then the overrides.
    pub fn resolve(queue: &str, overrides: &NameOverrides) -> Self {
        let pick = |o: &Option<String>, default: String| o.clone().unwrap_or(default);
        TopologyNames {
            queue: queue.to_owned(),
            exchange: pick(&overrides.exchange, queue.to_owned()),
            routing_key: pick(&overrides.routing_key, queue.to_owned()),
            retry_exchange: pick(&overrides.retry_exchange, format!("{queue}.retry")),
            retry_queue_pattern: pick(&overrides.retry_queue, format!("{queue}.retry_{{ms}}ms")),
            dead_letter_exchange: pick(&overrides.dead_letter_exchange, format!("{queue}.dlx")),
            dead_letter_queue: pick(&overrides.dead_letter_queue, format!("{queue}.dlq")),
            dead_letter_routing_key: pick(
                &overrides.dead_letter_routing_key,
                format!("{queue}.dlq"),
            ),
        }
    }

    /// The dead-letter index: a stream beside the dead-letter queue, bound to
    /// nothing, to which the consumer writes a summary entry of each dead
    /// letter it confirmed (`<dead-letter queue>.index`).
    ///
    /// ```
    /// # use rabbit_backoff::topology::{NameOverrides, TopologyNames};
    /// let names = TopologyNames::resolve("orders", &NameOverrides::default());
    /// assert_eq!(names.dead_letter_index(), "orders.dlq.index");
    /// assert_eq!(names.dead_letter_index_removals(), "orders.dlq.index.removed");
    /// ```
    pub fn dead_letter_index(&self) -> String {
        format!("{}{INDEX_SUFFIX}", self.dead_letter_queue)
    }

    /// The stream of the index's tombstones: what the operator tools removed
    /// from the dead-letter queue (`<dead-letter queue>.index.removed`).
    pub fn dead_letter_index_removals(&self) -> String {
        format!("{}{INDEX_SUFFIX}{REMOVALS_SUFFIX}", self.dead_letter_queue)
    }

    /// The replay log: a stream beside the dead-letter queue that holds the
    /// replay jobs' records (what each sent, who paused or stopped it) and
    /// the fates the consumers recorded of the copies
    /// (`<dead-letter queue>.replays`). Declared by the first replay job.
    ///
    /// ```
    /// # use rabbit_backoff::topology::{NameOverrides, TopologyNames};
    /// let names = TopologyNames::resolve("orders", &NameOverrides::default());
    /// assert_eq!(names.replay_log(), "orders.dlq.replays");
    /// ```
    pub fn replay_log(&self) -> String {
        format!("{}{REPLAYS_SUFFIX}", self.dead_letter_queue)
    }

    /// The exclusive queue the driver of a replay job holds while it runs
    /// (one job at a time on the dead-letter queue): the replay log's name
    /// and `.lock`.
    ///
    /// ```
    /// # use rabbit_backoff::topology::{NameOverrides, TopologyNames};
    /// let names = TopologyNames::resolve("orders", &NameOverrides::default());
    /// assert_eq!(names.replay_lock(), "orders.dlq.replays.lock");
    /// ```
    pub fn replay_lock(&self) -> String {
        format!("{}.lock", self.replay_log())
    }

    /// The name of the retry queue for a delay of `ms` milliseconds.
    pub fn retry_queue(&self, ms: u64) -> String {
        self.retry_queue_pattern
            .replace(MS_PLACEHOLDER, &ms.to_string())
    }

    /// If `queue` is a retry queue of this pattern, the delay it holds messages for.
    ///
    /// Finds tiers of an older schedule that may still hold messages.
    ///
    /// ```
    /// # use rabbit_backoff::topology::{NameOverrides, TopologyNames};
    /// let names = TopologyNames::resolve("orders", &NameOverrides::default());
    /// assert_eq!(names.retry_delay_of("orders.retry_250ms"), Some(250));
    /// assert_eq!(names.retry_delay_of("orders.dlq"), None);
    /// ```
    pub fn retry_delay_of(&self, queue: &str) -> Option<u64> {
        let (prefix, suffix) = self.retry_queue_pattern.split_once(MS_PLACEHOLDER)?;
        let digits = queue.strip_prefix(prefix)?.strip_suffix(suffix)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// An empty name.
    #[error("the {what} name is empty; write a name such as \"orders\"")]
    Empty {
        /// Which name.
        what: &'static str,
    },
    /// A name in the broker's reserved `amq.` namespace.
    #[error(
        "the {what} name `{name}` starts with `amq.`, which RabbitMQ reserves; choose another name"
    )]
    Reserved {
        /// Which name.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A name longer than AMQP allows.
    #[error("the {what} name is {len} bytes long; AMQP names are at most 255 bytes")]
    TooLong {
        /// Which name.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A retry queue pattern without `{ms}`.
    #[error(
        "the retry queue pattern `{pattern}` has no `{{ms}}` placeholder; write e.g. \"{pattern}_{{ms}}ms\" so that each delay gets its own queue"
    )]
    MissingPlaceholder {
        /// The pattern.
        pattern: String,
    },
}

/// Checks one queue, exchange or routing-key name.
///
/// `what` names it in the error ("queue", "dead-letter exchange", …). Routing
/// keys may use the `amq.` prefix and may be empty only where `allow_empty`.
///
/// ```
/// use rabbit_backoff::topology::validate_name;
/// assert!(validate_name("queue", "orders").is_ok());
/// assert!(validate_name("queue", "amq.orders").is_err());
/// ```
pub fn validate_name(what: &'static str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { what });
    }
    if name.starts_with("amq.") {
        return Err(NameError::Reserved {
            what,
            name: name.to_owned(),
        });
    }
    if name.len() > 255 {
        return Err(NameError::TooLong {
            what,
            len: name.len(),
        });
    }
    Ok(())
}

impl TopologyNames {
    /// Checks every name; `longest_delay_ms` sizes the longest retry queue name.
    pub fn validate(&self, longest_delay_ms: u64) -> Vec<NameError> {
        let mut errors = Vec::new();
        let checks = [
            ("queue", &self.queue),
            ("exchange", &self.exchange),
            ("retry exchange", &self.retry_exchange),
            ("dead-letter exchange", &self.dead_letter_exchange),
            ("dead-letter queue", &self.dead_letter_queue),
        ];
        for (what, name) in checks {
            if let Err(e) = validate_name(what, name) {
                errors.push(e);
            }
        }
        for (what, key) in [
            ("routing key", &self.routing_key),
            ("dead-letter routing key", &self.dead_letter_routing_key),
        ] {
            if key.len() > 255 {
                errors.push(NameError::TooLong {
                    what,
                    len: key.len(),
                });
            }
        }
        if !self.retry_queue_pattern.contains(MS_PLACEHOLDER) {
            errors.push(NameError::MissingPlaceholder {
                pattern: self.retry_queue_pattern.clone(),
            });
        } else if let Err(e) = validate_name("retry queue", &self.retry_queue(longest_delay_ms)) {
            errors.push(e);
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scheme_matches_the_design() {
        let n = TopologyNames::resolve("orders", &NameOverrides::default());
        assert_eq!(n.exchange, "orders");
        assert_eq!(n.routing_key, "orders");
        assert_eq!(n.retry_exchange, "orders.retry");
        assert_eq!(n.retry_queue(15_000), "orders.retry_15000ms");
        assert_eq!(n.dead_letter_exchange, "orders.dlx");
        assert_eq!(n.dead_letter_queue, "orders.dlq");
        assert_eq!(n.dead_letter_routing_key, "orders.dlq");
        assert!(n.validate(60_000).is_empty());
    }

    #[test]
    fn every_override_applies() {
        let o = NameOverrides {
            exchange: Some("work_exchange".into()),
            routing_key: Some("work".into()),
            retry_exchange: Some("retry_exchange".into()),
            retry_queue: Some("retry_{ms}ms".into()),
            dead_letter_exchange: Some("dlx_exchange".into()),
            dead_letter_queue: Some("dead_letter_queue".into()),
            dead_letter_routing_key: Some("dead".into()),
        };
        let n = TopologyNames::resolve("work_queue", &o);
        assert_eq!(n.exchange, "work_exchange");
        assert_eq!(n.routing_key, "work");
        assert_eq!(n.retry_exchange, "retry_exchange");
        assert_eq!(n.retry_queue(5000), "retry_5000ms");
        assert_eq!(n.retry_delay_of("retry_5000ms"), Some(5000));
        assert_eq!(n.retry_delay_of("retry_ms"), None);
        assert_eq!(n.dead_letter_exchange, "dlx_exchange");
        assert_eq!(n.dead_letter_queue, "dead_letter_queue");
        assert_eq!(n.dead_letter_routing_key, "dead");
    }

    #[test]
    fn validation_reports_every_bad_name() {
        let o = NameOverrides {
            exchange: Some("amq.direct".into()),
            retry_queue: Some("retries".into()),
            dead_letter_queue: Some("q".repeat(256)),
            ..NameOverrides::default()
        };
        let errors = TopologyNames::resolve("", &o).validate(1000);
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors.contains(&NameError::Empty { what: "queue" }));
        assert!(errors.contains(&NameError::Reserved {
            what: "exchange",
            name: "amq.direct".into()
        }));
        assert!(errors.contains(&NameError::TooLong {
            what: "dead-letter queue",
            len: 256
        }));
        assert!(errors.contains(&NameError::MissingPlaceholder {
            pattern: "retries".into()
        }));
    }
}
