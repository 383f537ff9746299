//! The console's configuration, set one piece at a time, from
//! [`Console::builder`] to [`ConsoleBuilder::build`].

use std::sync::Arc;

use crate::build_error::BuildError;
use crate::console::Console;
use crate::security::audit::AuditLog;
use crate::security::guard::{Access, Guard, ReadAccess};
use crate::security::token::Tokens;
use crate::state::State;
use rabbit_backoff_dead_letters::management;

/// Builds a [`Console`]: where the broker and its management API are, who
/// may write, which hosts it answers to, where writes are recorded.
///
/// ```
/// use rabbit_backoff_console::{Console, Tokens};
///
/// let console = Console::builder("amqp://guest:guest@rabbit.internal:5672/%2f")
///     .tokens(Tokens::parse("alice:0123456789abcdef0123").unwrap())
///     .allowed_host("ops.internal")
///     .reads_need_token(true)
///     .build()
///     .unwrap();
/// let _router: axum::Router = console.router();
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until build is called"]
pub struct ConsoleBuilder {
    amqp_url: String,
    management_url: Option<String>,
    tokens: Option<Tokens>,
    read_only: bool,
    reads_need_token: bool,
    allowed_hosts: Vec<String>,
    audit: Option<AuditLog>,
    stream_port: u16,
}

impl Console {
    /// A builder of a console over the broker at `amqp_url`.
    pub fn builder(amqp_url: impl Into<String>) -> ConsoleBuilder {
        ConsoleBuilder::new(amqp_url)
    }
}

impl ConsoleBuilder {
    fn new(amqp_url: impl Into<String>) -> Self {
        ConsoleBuilder {
            amqp_url: amqp_url.into(),
            management_url: None,
            tokens: None,
            read_only: false,
            reads_need_token: false,
            allowed_hosts: Vec::new(),
            audit: None,
            stream_port: rabbit_backoff_dead_letters::DEFAULT_STREAM_PORT,
        }
    }

    /// The management API, to find consumers and the depth of their queues
    /// (default: `http://<the AMQP address's host>:15672`).
    pub fn management_url(mut self, url: impl Into<String>) -> Self {
        self.management_url = Some(url.into());
        self
    }

    /// The tokens writes must carry (`Authorization: Bearer …`), each with
    /// the name the audit log records. Needed unless the console is
    /// read-only with open reads.
    pub fn tokens(mut self, tokens: Tokens) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Show only: no replay, edit, discard, purge or rebuild button, and
    /// each is refused (403) [default: false].
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Whether reading the JSON API needs a token too: dead letters may
    /// hold personal data, so say yes wherever more than the operators can
    /// reach the console [default: false].
    pub fn reads_need_token(mut self, reads_need_token: bool) -> Self {
        self.reads_need_token = reads_need_token;
        self
    }

    /// A name the console is reached by, as the `Host` header says it
    /// (`host` or `host:port`); requests naming any other host are refused
    /// (421), so that a site whose name is rebound to this address cannot
    /// read it. Writes must come from an `Origin` of one of these hosts
    /// (`http://` or `https://`). At least one is needed.
    pub fn allowed_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Several of [`allowed_host`](Self::allowed_host) at once.
    pub fn allowed_hosts<I, H>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = H>,
        H: Into<String>,
    {
        self.allowed_hosts.extend(hosts.into_iter().map(Into::into));
        self
    }

    /// Where every write is recorded: who, when, what and how many, one
    /// JSON object per line [default: none, nothing is recorded].
    pub fn audit_log(mut self, log: AuditLog) -> Self {
        self.audit = Some(log);
        self
    }

    /// The broker's stream port (plugin `rabbitmq_stream`), where the
    /// dead-letter index is read; 0 reads it over AMQP only
    /// [default: [`DEFAULT_STREAM_PORT`](rabbit_backoff_dead_letters::DEFAULT_STREAM_PORT)].
    pub fn stream_port(mut self, port: u16) -> Self {
        self.stream_port = port;
        self
    }

    /// The console, or why not: a management API address, an allowed host,
    /// and tokens unless it is read-only with open reads, are needed.
    pub fn build(self) -> Result<Console, BuildError> {
        let management_url = self
            .management_url
            .or_else(|| management::default_url(&self.amqp_url))
            .ok_or(BuildError::NoManagementUrl)?;
        if self.allowed_hosts.is_empty() {
            return Err(BuildError::NoAllowedHost);
        }
        let access = if self.read_only {
            Access::ReadOnly
        } else {
            Access::ReadWrite
        };
        let reads = if self.reads_need_token {
            ReadAccess::Token
        } else {
            ReadAccess::Open
        };
        let tokens = self.tokens.unwrap_or_else(Tokens::none);
        if tokens.is_empty() && (access == Access::ReadWrite || reads == ReadAccess::Token) {
            return Err(BuildError::NoToken);
        }
        let state = State::new(
            self.amqp_url,
            management_url,
            access,
            self.audit,
            self.stream_port,
        );
        let guard = Guard::new(tokens, self.allowed_hosts, access, reads);
        Ok(Console {
            state: Arc::new(state),
            guard: Arc::new(guard),
        })
    }
}
