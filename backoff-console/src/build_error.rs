//! Why a console could not be built from its configuration.

/// What [`ConsoleBuilder::build`](crate::ConsoleBuilder::build) refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No management API address was given and none follows from the AMQP
    /// address.
    #[error("no management API address: set one with management_url")]
    NoManagementUrl,
    /// No host was allowed: every request would be refused.
    #[error(
        "no allowed host: name the Host the console is reached by (e.g. 127.0.0.1:8080) with allowed_host"
    )]
    NoAllowedHost,
    /// Writes, or reads that need the token, were allowed without any token.
    #[error("no token: a console that writes, or whose reads need the token, needs tokens")]
    NoToken,
}
