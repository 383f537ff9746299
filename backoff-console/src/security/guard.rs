//! Who may do what. Every request must name one of the console's own hosts,
//! so that a web site whose name is rebound to this address cannot read it
//! (DNS rebinding). A read of the API from another site (`Sec-Fetch-Site:
//! cross-site` or `same-site`, or a foreign `Origin`) is refused, so that no
//! web page can make the console run passes over a dead-letter queue with
//! `<img>` tags. A write (any method but GET and HEAD) must come from the
//! console's own page (`Origin` naming one of those hosts, or `Sec-Fetch-Site: same-origin` where a
//! browser sends no origin), be JSON (which a cross-site form cannot send
//! without asking first), and carry the token; the token is compared in
//! constant time. In read-only mode every write is refused.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;
use crate::security::token::Tokens;

/// Whether the console changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Replay and discard are offered, each with the token.
    ReadWrite,
    /// Nothing is changed: the page shows no write button and every write is
    /// refused with 403.
    ReadOnly,
}

/// Whether reading the JSON API needs the token too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAccess {
    /// On a loopback address: whoever reaches it may look.
    Open,
    /// On another address: dead letters may hold personal data, so reading
    /// needs the token as well.
    Token,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The `Host` header names none of the console's addresses.
    UnknownHost,
    /// A write to a read-only console.
    ReadOnly,
    /// A write from another site, or without `Origin` and `Sec-Fetch-Site`.
    CrossSite,
    /// A write whose body is not declared as JSON.
    NotJson,
    /// No `Authorization: Bearer` header.
    MissingToken,
    /// A token that is not the console's.
    WrongToken,
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Refusal::UnknownHost => StatusCode::MISDIRECTED_REQUEST,
            Refusal::ReadOnly | Refusal::CrossSite => StatusCode::FORBIDDEN,
            Refusal::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Refusal::MissingToken | Refusal::WrongToken => StatusCode::UNAUTHORIZED,
        }
    }

    /// What the page shows.
    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::UnknownHost => {
                "this console answers only to its own address (see --allowed-host)"
            }
            Refusal::ReadOnly => "the console runs with --read-only: nothing can be changed",
            Refusal::CrossSite => "refused: the request does not come from the console's own page",
            Refusal::NotJson => "refused: a write must send Content-Type: application/json",
            Refusal::MissingToken => {
                "enter the console's token (printed by `rabbit-backoff console`, or the value of RABBIT_BACKOFF_CONSOLE_TOKEN)"
            }
            Refusal::WrongToken => "wrong token",
        }
    }
}

/// Who made a write: the name of the token it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operator(pub(crate) String);

/// The rules of one console.
#[derive(Debug)]
pub(crate) struct Guard {
    tokens: Tokens,
    /// `host:port` values a request may name; origins are `http://` + one.
    hosts: Vec<String>,
    access: Access,
    reads: ReadAccess,
}

impl Guard {
    /// Rules for a console reachable as `hosts`.
    pub(crate) fn new(
        tokens: Tokens,
        hosts: Vec<String>,
        access: Access,
        reads: ReadAccess,
    ) -> Self {
        Guard {
            tokens,
            hosts,
            access,
            reads,
        }
    }

    /// Whether a request with this method, path and headers may go on, and
    /// who sent it when it carries a token.
    pub(crate) fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Option<Operator>, Refusal> {
        let host = header(headers, HOST.as_str());
        if !host.is_some_and(|host| self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))) {
            return Err(Refusal::UnknownHost);
        }
        let write = !matches!(*method, Method::GET | Method::HEAD);
        if !write {
            if !path.starts_with("/api/") {
                return Ok(None);
            }
            if self.foreign_origin(headers)
                || matches!(
                    header(headers, "sec-fetch-site"),
                    Some("cross-site" | "same-site")
                )
            {
                return Err(Refusal::CrossSite);
            }
            if self.reads == ReadAccess::Token {
                return self.check_token(headers).map(Some);
            }
            return Ok(None);
        }
        if self.access == Access::ReadOnly {
            return Err(Refusal::ReadOnly);
        }
        let same_origin = match header(headers, ORIGIN.as_str()) {
            Some(_) => !self.foreign_origin(headers),
            None => header(headers, "sec-fetch-site") == Some("same-origin"),
        };
        if !same_origin {
            return Err(Refusal::CrossSite);
        }
        let json = header(headers, CONTENT_TYPE.as_str()).is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json {
            return Err(Refusal::NotJson);
        }
        self.check_token(headers).map(Some)
    }

    /// Whether the request names an `Origin` other than the console's own
    /// (https too: behind a TLS proxy that keeps the Host header).
    fn foreign_origin(&self, headers: &HeaderMap) -> bool {
        header(headers, ORIGIN.as_str()).is_some_and(|origin| {
            !self.hosts.iter().any(|h| {
                origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"))
                    .is_some_and(|o| o.eq_ignore_ascii_case(h))
            })
        })
    }

    fn check_token(&self, headers: &HeaderMap) -> Result<Operator, Refusal> {
        let bearer = header(headers, AUTHORIZATION.as_str())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::MissingToken)?;
        self.tokens
            .operator(bearer)
            .map(|name| Operator(name.to_owned()))
            .ok_or(Refusal::WrongToken)
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The middleware: refuses what [`Guard::check`] refuses, as JSON.
/// The operator, when known, goes along with the request for the handlers.
pub(crate) async fn enforce(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    match guard.check(request.method(), request.uri().path(), request.headers()) {
        Ok(operator) => {
            if let Some(operator) = operator {
                request.extensions_mut().insert(operator);
            }
            next.run(request).await
        }
        Err(refusal) => ApiError::new(refusal.status(), refusal.message()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use crate::security::token::Token;

    fn guard(access: Access, reads: ReadAccess) -> Guard {
        Guard::new(
            Tokens::new(vec![
                (
                    "alice".into(),
                    Token::given("0123456789abcdef".into()).unwrap(),
                ),
                (
                    "bob".into(),
                    Token::given("bbbbbbbbbbbbbbbb".into()).unwrap(),
                ),
            ]),
            vec!["127.0.0.1:8080".into(), "localhost:8080".into()],
            access,
            reads,
        )
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    const GOOD: [(&str, &str); 4] = [
        ("host", "127.0.0.1:8080"),
        ("origin", "http://127.0.0.1:8080"),
        ("content-type", "application/json"),
        ("authorization", "Bearer 0123456789abcdef"),
    ];

    fn without(name: &str) -> Vec<(&'static str, &'static str)> {
        GOOD.iter().copied().filter(|(k, _)| *k != name).collect()
    }

    fn with(name: &'static str, value: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut pairs = without(name);
        pairs.push((name, value));
        pairs
    }

    #[test]
    fn a_write_needs_host_origin_json_and_token() {
        let g = guard(Access::ReadWrite, ReadAccess::Open);
        let post = |pairs: &[(&'static str, &'static str)]| {
            g.check(&Method::POST, "/api/x", &headers(pairs))
        };
        assert_eq!(post(&GOOD), Ok(Some(alice())));
        assert_eq!(post(&with("host", "localhost:8080")), Ok(Some(alice())));
        assert_eq!(
            post(&with("host", "evil.example:8080")),
            Err(Refusal::UnknownHost)
        );
        assert_eq!(
            post(&with("origin", "http://evil.example")),
            Err(Refusal::CrossSite)
        );
        assert_eq!(
            post(&with("origin", "http://127.0.0.1:8080.evil.example")),
            Err(Refusal::CrossSite)
        );
        assert_eq!(post(&without("origin")), Err(Refusal::CrossSite));
        let mut same_site = without("origin");
        same_site.push(("sec-fetch-site", "same-origin"));
        assert_eq!(post(&same_site), Ok(Some(alice())));
        assert_eq!(
            post(&with("content-type", "text/plain")),
            Err(Refusal::NotJson)
        );
        assert_eq!(
            post(&with("content-type", "application/json; charset=utf-8")),
            Ok(Some(alice()))
        );
        assert_eq!(post(&without("authorization")), Err(Refusal::MissingToken));
        assert_eq!(
            post(&with("authorization", "Bearer 0123456789abcdeX")),
            Err(Refusal::WrongToken)
        );
    }

    fn alice() -> Operator {
        Operator("alice".into())
    }

    #[test]
    fn names_the_operator_of_the_token() {
        let g = guard(Access::ReadWrite, ReadAccess::Open);
        assert_eq!(
            g.check(
                &Method::POST,
                "/api/x",
                &headers(&with("authorization", "Bearer bbbbbbbbbbbbbbbb"))
            ),
            Ok(Some(Operator("bob".into())))
        );
    }

    #[test]
    fn refuses_reads_of_the_api_from_other_sites() {
        let g = guard(Access::ReadWrite, ReadAccess::Open);
        let get = |path: &str, pairs: &[(&'static str, &'static str)]| {
            let mut all = vec![("host", "127.0.0.1:8080")];
            all.extend_from_slice(pairs);
            g.check(&Method::GET, path, &headers(&all))
        };
        assert_eq!(get("/api/x", &[]), Ok(None), "curl sends neither header");
        assert_eq!(
            get("/api/x", &[("sec-fetch-site", "same-origin")]),
            Ok(None)
        );
        assert_eq!(
            get("/api/x", &[("sec-fetch-site", "none")]),
            Ok(None),
            "typed in"
        );
        assert_eq!(
            get("/api/x", &[("origin", "http://localhost:8080")]),
            Ok(None)
        );
        for pairs in [
            &[("sec-fetch-site", "cross-site")][..],
            &[("sec-fetch-site", "same-site")],
            &[("origin", "http://evil.example")],
            &[("origin", "null")],
        ] {
            assert_eq!(get("/api/x", pairs), Err(Refusal::CrossSite), "{pairs:?}");
        }
        // The page itself may be opened from a link elsewhere.
        assert_eq!(get("/", &[("sec-fetch-site", "cross-site")]), Ok(None));
    }

    #[test]
    fn read_only_refuses_every_write_and_reads_need_the_token_off_loopback() {
        let g = guard(Access::ReadOnly, ReadAccess::Open);
        assert_eq!(
            g.check(&Method::POST, "/api/x", &headers(&GOOD)),
            Err(Refusal::ReadOnly)
        );
        assert_eq!(
            g.check(&Method::DELETE, "/api/x", &headers(&GOOD)),
            Err(Refusal::ReadOnly)
        );
        let host = [("host", "127.0.0.1:8080")];
        assert_eq!(g.check(&Method::GET, "/api/x", &headers(&host)), Ok(None));

        let g = guard(Access::ReadWrite, ReadAccess::Token);
        assert_eq!(
            g.check(&Method::GET, "/api/x", &headers(&host)),
            Err(Refusal::MissingToken)
        );
        assert_eq!(g.check(&Method::GET, "/", &headers(&host)), Ok(None));
        assert_eq!(
            g.check(&Method::GET, "/api/x", &headers(&GOOD)),
            Ok(Some(alice()))
        );
    }
}
