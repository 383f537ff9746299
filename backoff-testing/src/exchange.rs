//! Exchanges and routing: which queues a routing key (and headers) reach.

use lapin::types::{AMQPValue, FieldTable};
use rabbit_backoff_core::ExchangeKind;

/// One exchange: its type and its bindings, in the order they were made.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub(crate) kind: ExchangeKind,
    pub(crate) bindings: Vec<Binding>,
}

/// A queue bound to an exchange.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Binding {
    pub(crate) queue: String,
    pub(crate) routing_key: String,
    /// Binding arguments (headers exchanges); [`Channel::bind_queue`] binds
    /// with none.
    ///
    /// [`Channel::bind_queue`]: rabbit_backoff_runtime::transport::Channel::bind_queue
    pub(crate) arguments: FieldTable,
}

impl Exchange {
    pub(crate) fn new(kind: ExchangeKind) -> Self {
        Exchange {
            kind,
            bindings: Vec::new(),
        }
    }

    /// Adds a binding; binding the same queue with the same key twice is a
    /// no-op, as in RabbitMQ.
    pub(crate) fn bind(&mut self, queue: &str, routing_key: &str) {
        let binding = Binding {
            queue: queue.to_owned(),
            routing_key: routing_key.to_owned(),
            arguments: FieldTable::default(),
        };
        if !self.bindings.contains(&binding) {
            self.bindings.push(binding);
        }
    }

    /// The queues a message reaches, each once, in binding order.
    pub(crate) fn route<'a>(
        &'a self,
        routing_key: &str,
        headers: Option<&FieldTable>,
        out: &mut Vec<&'a str>,
    ) {
        for binding in &self.bindings {
            let matches = match self.kind {
                ExchangeKind::Direct => binding.routing_key == routing_key,
                ExchangeKind::Fanout => true,
                ExchangeKind::Topic => topic_matches(&binding.routing_key, routing_key),
                ExchangeKind::Headers => headers_match(&binding.arguments, headers),
                // A type the in-memory broker does not model routes nothing.
                _ => false,
            };
            if matches && !out.contains(&binding.queue.as_str()) {
                out.push(&binding.queue);
            }
        }
    }
}

/// A topic binding pattern against a routing key: words are separated by
/// dots, `*` stands for exactly one word and `#` for zero or more.
pub(crate) fn topic_matches(pattern: &str, routing_key: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('.').collect();
    let key: Vec<&str> = routing_key.split('.').collect();
    words_match(&pattern, &key)
}

fn words_match(pattern: &[&str], key: &[&str]) -> bool {
    match pattern.split_first() {
        None => key.is_empty(),
        Some((&"#", rest)) => (0..=key.len()).any(|skip| words_match(rest, &key[skip..])),
        Some((&word, rest)) => match key.split_first() {
            Some((first, key_rest)) => {
                (word == "*" || word == *first) && words_match(rest, key_rest)
            }
            None => false,
        },
    }
}

/// A headers binding against a message's headers, as RabbitMQ's headers
/// exchange: `x-match` is `all` (the default) or `any`; other `x-` arguments
/// are ignored; a binding argument of type void matches on presence only.
/// With no arguments, `all` matches every message and `any` none.
pub(crate) fn headers_match(binding: &FieldTable, headers: Option<&FieldTable>) -> bool {
    let any = matches!(
        binding.inner().get("x-match"),
        Some(AMQPValue::LongString(s)) if s.as_bytes() == b"any"
    ) || matches!(
        binding.inner().get("x-match"),
        Some(AMQPValue::ShortString(s)) if s.as_str() == "any"
    );
    let mut conditions = binding
        .inner()
        .iter()
        .filter(|(k, _)| !k.as_str().starts_with("x-"))
        .peekable();
    if conditions.peek().is_none() {
        return !any;
    }
    let mut results = conditions.map(|(key, expected)| {
        let actual = headers.and_then(|h| h.inner().get(key.as_str()));
        match (expected, actual) {
            (AMQPValue::Void, Some(_)) => true,
            (expected, Some(actual)) => expected == actual,
            (_, None) => false,
        }
    });
    if any {
        results.any(|m| m)
    } else {
        results.all(|m| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::LongString;

    #[test]
    fn topic_words() {
        assert!(topic_matches("orders.*", "orders.created"));
        assert!(!topic_matches("orders.*", "orders.created.eu"));
        assert!(!topic_matches("orders.*", "orders"));
        assert!(topic_matches("orders.#", "orders"));
        assert!(topic_matches("orders.#", "orders.created.eu"));
        assert!(topic_matches("#", "anything.at.all"));
        assert!(topic_matches("#.eu", "orders.created.eu"));
        assert!(topic_matches("*.created.#", "orders.created"));
        assert!(!topic_matches("*.created.#", "created"));
        assert!(topic_matches("a.#.z", "a.z"));
        assert!(topic_matches("a.#.z", "a.b.c.z"));
        assert!(!topic_matches("a.#.z", "a.b.c"));
        assert!(!topic_matches("orders.created", "orders.updated"));
    }

    #[test]
    fn headers_all_and_any() {
        let mut headers = FieldTable::default();
        headers.insert(
            "region".into(),
            AMQPValue::LongString(LongString::from("eu")),
        );
        headers.insert(
            "tier".into(),
            AMQPValue::LongString(LongString::from("gold")),
        );

        let empty = FieldTable::default();
        assert!(headers_match(&empty, Some(&headers)));
        assert!(headers_match(&empty, None));

        let mut all = FieldTable::default();
        all.insert(
            "region".into(),
            AMQPValue::LongString(LongString::from("eu")),
        );
        all.insert(
            "tier".into(),
            AMQPValue::LongString(LongString::from("silver")),
        );
        assert!(!headers_match(&all, Some(&headers)));

        let mut any = all.clone();
        any.insert(
            "x-match".into(),
            AMQPValue::LongString(LongString::from("any")),
        );
        assert!(headers_match(&any, Some(&headers)));
        assert!(!headers_match(&any, None));
    }
}
