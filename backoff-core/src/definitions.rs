//! The topology as a RabbitMQ definitions file, for `rabbitmqctl import_definitions`.

use serde::Serialize;
use std::collections::BTreeMap;

use crate::{Argument, Topology};

/// A definitions document: queues, exchanges and bindings of one vhost.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Definitions {
    /// Queues.
    pub queues: Vec<QueueDefinition>,
    /// Exchanges.
    pub exchanges: Vec<ExchangeDefinition>,
    /// Bindings.
    pub bindings: Vec<BindingDefinition>,
}

/// One queue of a definitions file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QueueDefinition {
    /// Name.
    pub name: String,
    /// Virtual host.
    pub vhost: String,
    /// Always true.
    pub durable: bool,
    /// Always false.
    pub auto_delete: bool,
    /// `x-…` arguments.
    pub arguments: BTreeMap<String, Argument>,
}

/// One exchange of a definitions file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ExchangeDefinition {
    /// Name.
    pub name: String,
    /// Virtual host.
    pub vhost: String,
    /// `direct`, `fanout`, `topic` or `headers`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Always true.
    pub durable: bool,
    /// Always false.
    pub auto_delete: bool,
    /// Always false.
    pub internal: bool,
    /// Always empty.
    pub arguments: BTreeMap<String, Argument>,
}

/// One binding of a definitions file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BindingDefinition {
    /// The exchange.
    pub source: String,
    /// Virtual host.
    pub vhost: String,
    /// The queue.
    pub destination: String,
    /// Always `queue`.
    pub destination_type: String,
    /// The routing key.
    pub routing_key: String,
    /// Always empty.
    pub arguments: BTreeMap<String, Argument>,
}

impl Definitions {
    /// The definitions of one or more topologies in `vhost`.
    ///
    /// ```
    /// use rabbit_backoff::ConsumerSpec;
    /// use rabbit_backoff::topology::{Definitions, Topology};
    ///
    /// let spec = ConsumerSpec::new("orders", "5s,15s".parse()?);
    /// let defs = Definitions::of(&[Topology::of(&spec)], "/");
    /// assert_eq!(defs.queues.len(), 4);
    /// assert_eq!(defs.exchanges.len(), 3);
    /// assert_eq!(defs.bindings.len(), 4);
    /// # Ok::<(), rabbit_backoff::DelayError>(())
    /// ```
    pub fn of(topologies: &[Topology], vhost: &str) -> Self {
        let mut definitions = Definitions {
            queues: Vec::new(),
            exchanges: Vec::new(),
            bindings: Vec::new(),
        };
        for topology in topologies {
            for exchange in topology.exchanges() {
                if definitions
                    .exchanges
                    .iter()
                    .any(|e| e.name == exchange.name)
                {
                    continue;
                }
                definitions.exchanges.push(ExchangeDefinition {
                    name: exchange.name.clone(),
                    vhost: vhost.to_owned(),
                    kind: exchange.kind.as_str().to_owned(),
                    durable: true,
                    auto_delete: false,
                    internal: false,
                    arguments: BTreeMap::new(),
                });
            }
            for queue in topology.queues() {
                definitions.queues.push(QueueDefinition {
                    name: queue.name.clone(),
                    vhost: vhost.to_owned(),
                    durable: true,
                    auto_delete: false,
                    arguments: queue.arguments.iter().cloned().collect(),
                });
            }
            for binding in &topology.bindings {
                definitions.bindings.push(BindingDefinition {
                    source: binding.exchange.clone(),
                    vhost: vhost.to_owned(),
                    destination: binding.queue.clone(),
                    destination_type: "queue".to_owned(),
                    routing_key: binding.routing_key.clone(),
                    arguments: BTreeMap::new(),
                });
            }
        }
        definitions
    }
}
