//! [`QueueDecl`]: a queue a consumer declares, and how one found on the
//! broker differs from it ([`ArgumentDifference`]).

use serde::{Deserialize, Serialize};

use super::argument::Argument;
use super::arguments as arg;

/// A queue the consumer declares (always durable, never exclusive or
/// auto-deleted), with its arguments in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueDecl {
    /// Its name.
    pub name: String,
    /// Its `x-…` arguments.
    pub arguments: Vec<(String, Argument)>,
}

impl QueueDecl {
    /// The queue `name`, without arguments until
    /// [`with_argument`](Self::with_argument) adds them.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, QueueDecl};
    ///
    /// let retry = QueueDecl::new("orders.retry_5000ms")
    ///     .with_argument("x-message-ttl", Argument::Int(5_000))
    ///     .with_argument("x-dead-letter-exchange", Argument::Str("".into()));
    /// assert_eq!(retry.argument("x-message-ttl"), Some(&Argument::Int(5_000)));
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        QueueDecl {
            name: name.into(),
            arguments: Vec::new(),
        }
    }

    /// The same queue, with the argument `key` set to `value` after the
    /// arguments it has.
    pub fn with_argument(mut self, key: impl Into<String>, value: Argument) -> Self {
        self.arguments.push((key.into(), value));
        self
    }

    /// The same queue, with `arguments` after the arguments it has.
    ///
    /// ```
    /// use rabbit_backoff::topology::{Argument, QueueDecl};
    ///
    /// let listed = vec![("x-queue-type".to_owned(), Argument::Str("quorum".into()))];
    /// let queue = QueueDecl::new("orders").with_arguments(listed);
    /// assert_eq!(queue.arguments.len(), 1);
    /// ```
    pub fn with_arguments(
        mut self,
        arguments: impl IntoIterator<Item = (String, Argument)>,
    ) -> Self {
        self.arguments.extend(arguments);
        self
    }

    /// The value of one argument.
    pub fn argument(&self, key: &str) -> Option<&Argument> {
        self.arguments
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// An argument of an existing queue that is not what the consumer declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ArgumentDifference {
    /// The queue.
    pub queue: String,
    /// The argument, such as `x-dead-letter-exchange`.
    pub argument: String,
    /// What the consumer declares (`None`: it does not set it).
    pub expected: Option<Argument>,
    /// What the queue has (`None`: it is not set).
    pub actual: Option<Argument>,
}

impl QueueDecl {
    /// How the arguments of an existing queue differ from this declaration:
    /// each argument set on one side and missing or different on the other.
    /// A declaration with these differences fails with PRECONDITION_FAILED.
    /// A missing `x-queue-type` and `classic` are the same: RabbitMQ (3.10
    /// and 4.x alike) declares either on a queue of the other, and 4.x lists
    /// `x-queue-type: classic` on every classic queue.
    ///
    /// ```
    /// use rabbit_backoff::{ConsumerSpec, QueueType};
    /// use rabbit_backoff::topology::{Argument, Topology};
    ///
    /// let mut spec = ConsumerSpec::new("work_queue", "1s".parse()?);
    /// spec.queue_type = Some(QueueType::Classic);
    /// let retry = &Topology::of(&spec).retry_queues[0];
    /// let existing = [
    ///     ("x-message-ttl".to_owned(), Argument::Int(1000)),
    ///     ("x-dead-letter-exchange".to_owned(), Argument::Str("work_exchange".into())),
    ///     ("x-dead-letter-routing-key".to_owned(), Argument::Str("work".into())),
    /// ];
    /// let differences = retry.differences(&existing);
    /// assert_eq!(differences.len(), 2);
    /// assert_eq!(differences[0].argument, "x-dead-letter-exchange");
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn differences(&self, actual: &[(String, Argument)]) -> Vec<ArgumentDifference> {
        let find = |list: &[(String, Argument)], key: &str| {
            list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        };
        let mut keys: Vec<&str> = self.arguments.iter().map(|(k, _)| k.as_str()).collect();
        for (k, _) in actual {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
        keys.into_iter()
            .filter_map(|key| {
                let expected = find(&self.arguments, key);
                let actual = find(actual, key);
                let same = expected == actual
                    || (key == arg::QUEUE_TYPE
                        && classic_or_unset(expected.as_ref())
                        && classic_or_unset(actual.as_ref()));
                (!same).then(|| ArgumentDifference {
                    queue: self.name.clone(),
                    argument: key.to_owned(),
                    expected,
                    actual,
                })
            })
            .collect()
    }
}

/// Whether an `x-queue-type` is the default: unset, or `classic`.
fn classic_or_unset(queue_type: Option<&Argument>) -> bool {
    match queue_type {
        None => true,
        Some(Argument::Str(name)) => name == "classic",
        Some(_) => false,
    }
}
