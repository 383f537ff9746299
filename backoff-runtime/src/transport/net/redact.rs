//! An address without its password, for messages and logs: the broker's
//! here, and the dedupe stores' above.

/// The address without its password, for messages and logs.
pub(crate) fn redact(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => uri.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_the_password() {
        assert_eq!(
            super::redact("amqp://guest:secret@h:5672/%2f"),
            "amqp://guest:***@h:5672/%2f"
        );
        assert_eq!(super::redact("amqp://h:5672"), "amqp://h:5672");
    }
}
