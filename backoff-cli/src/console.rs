//! `rabbit-backoff console`: the web console (`rabbit_backoff::console`,
//! the router a service can mount too), served
//! on an address of its own. It lists the consumers found on the broker
//! with the depth of every tier and the messages waiting in each retry
//! tier, groups each dead-letter queue by what went wrong with a chart over time, searches
//! and pages through it, shows one message, exports what matches, and
//! replays, edits or discards one message, a selection, a group or every
//! match after one confirmation; purges a dead-letter queue or rebuilds its
//! index. Every write is recorded in an audit log.
//!
//! Safe by default: it listens on 127.0.0.1; writes need a token (from
//! RABBIT_BACKOFF_CONSOLE_TOKENS or RABBIT_BACKOFF_CONSOLE_TOKEN, or drawn at
//! random and printed once), must come from the console's own page and be
//! JSON; reads of the API from other sites are refused; data is shown as text
//! only, under a content security policy that allows no inline script.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use rabbit_backoff::console::{
    AuditLog, Console, TOKEN_VARIABLE, TOKENS_VARIABLE, TokenSource, Tokens, default_audit_path,
};
use rabbit_backoff::dead_letters::management;

use crate::stream_port_args::StreamPortArgs;

/// Flags of `rabbit-backoff console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The address to listen on (port 0: any free port). An address other
    /// than loopback needs RABBIT_BACKOFF_CONSOLE_TOKEN, and reading needs the
    /// token there too.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Show only: no replay, discard, purge or rebuild button, and each is
    /// refused (403).
    #[arg(long)]
    read_only: bool,
    /// The management API, to find consumers and queue depths
    /// [default: http://<broker host>:15672].
    #[arg(
        long,
        alias = "management-url",
        env = "RABBITMQ_MANAGEMENT_URL",
        value_name = "URL"
    )]
    management: Option<String>,
    /// Another name the console is reached by (the `Host` header, e.g.
    /// console.internal:8080); requests naming any other host are refused.
    /// Needed when listening on 0.0.0.0 or ::.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    allowed_hosts: Vec<String>,
    /// The audit log: every replay, discard, edit, purge and rebuild of the
    /// dead-letter index, who (the token's name),
    /// when, what and how many, one JSON object per line, only ever appended
    /// to [default: $XDG_STATE_HOME/rabbit-backoff/console-audit.jsonl, or
    /// ~/.local/state/rabbit-backoff/console-audit.jsonl].
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    #[command(flatten)]
    stream: StreamPortArgs,
}

/// Runs the console until Ctrl-C.
pub async fn run(amqp_url: &str, args: ConsoleArgs) -> Result<ExitCode, String> {
    let tokens = Tokens::from_env_or_random()?;
    let loopback = args.listen.ip().is_loopback();
    if !loopback && tokens.source() != TokenSource::Environment {
        return Err(format!(
            "refusing to listen on {} (not a loopback address) without a token set by the operator: set {TOKEN_VARIABLE} (e.g. to the output of `openssl rand -hex 16`) or {TOKENS_VARIABLE} (name:token,…), or listen on 127.0.0.1",
            args.listen
        ));
    }
    if args.listen.ip().is_unspecified() && args.allowed_hosts.is_empty() {
        return Err(format!(
            "listening on {} answers to any name: say which with --allowed-host NAME:PORT",
            args.listen
        ));
    }
    let management_url = args
        .management
        .clone()
        .or_else(|| management::default_url(amqp_url))
        .ok_or("no management API address: pass --management URL")?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot read the address listened on: {e}"))?;
    let mut hosts = own_hosts(address);
    hosts.extend(args.allowed_hosts.iter().cloned());

    let audit_path = args.audit_log.clone().unwrap_or_else(default_audit_path);
    let audit = match AuditLog::open(audit_path) {
        Ok(log) => Some(log),
        Err(e) if !args.read_only => {
            return Err(format!("{e} (choose another with --audit-log FILE)"));
        }
        // Nothing to record; past entries are not shown.
        Err(_) => None,
    };
    let url = format!("http://{}/", hosts[0]);
    println!("rabbit-backoff console: {url}");
    match (args.read_only, tokens.generated()) {
        (true, _) => println!("read-only: replay, edit, discard and purge are refused"),
        (false, None) => println!(
            "tokens: {} (from {TOKENS_VARIABLE} / {TOKEN_VARIABLE})",
            tokens.names().collect::<Vec<_>>().join(", ")
        ),
        (false, Some(token)) => println!(
            "token: {token} (or open {url}#token={token}; the part after # never leaves the browser)"
        ),
    }
    if let Some(log) = &audit {
        println!("audit log: {}", log.path().display());
    }
    if !loopback {
        eprintln!(
            "warning: listening on {address}, beyond this machine, over plain HTTP: reading needs the token too, but put TLS in front of it"
        );
    }

    let mut console = Console::builder(amqp_url)
        .management_url(management_url)
        .tokens(tokens)
        .read_only(args.read_only)
        .reads_need_token(!loopback)
        .allowed_hosts(hosts)
        .stream_port(args.stream.stream_port);
    if let Some(log) = audit {
        console = console.audit_log(log);
    }
    let console = console.build().map_err(|e| e.to_string())?;
    axum::serve(listener, console.router())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| format!("the console stopped: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// The `Host` values that name the address listened on: the address itself,
/// and `localhost` for a loopback address.
fn own_hosts(address: SocketAddr) -> Vec<String> {
    let port = address.port();
    let mut hosts = vec![address.to_string()];
    if let IpAddr::V4(ip) = address.ip()
        && ip.is_loopback()
    {
        hosts.push(format!("localhost:{port}"));
    }
    if let IpAddr::V6(ip) = address.ip()
        && ip.is_loopback()
    {
        hosts.push(format!("localhost:{port}"));
    }
    hosts
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_address_and_localhost() {
        assert_eq!(
            super::own_hosts("127.0.0.1:8080".parse().unwrap()),
            ["127.0.0.1:8080", "localhost:8080"]
        );
        assert_eq!(
            super::own_hosts("[::1]:9".parse().unwrap()),
            ["[::1]:9", "localhost:9"]
        );
        assert_eq!(
            super::own_hosts("10.1.2.3:80".parse().unwrap()),
            ["10.1.2.3:80"]
        );
    }
}
