//! The secrets that write actions carry: `Authorization: Bearer <token>`,
//! each with the name of the operator it belongs to, for the audit.

use std::fmt;

/// The environment variable that sets one token, for an operator named
/// [`DEFAULT_OPERATOR`].
pub const TOKEN_VARIABLE: &str = "RABBIT_BACKOFF_CONSOLE_TOKEN";

/// The environment variable that sets named tokens: `alice:<token>,bob:<token>`.
pub const TOKENS_VARIABLE: &str = "RABBIT_BACKOFF_CONSOLE_TOKENS";

/// The name the audit gives to the holder of the single token.
pub const DEFAULT_OPERATOR: &str = "operator";

/// The fewest characters a token set by the operator may have.
const MIN_LEN: usize = 16;

/// Where the token came from, which decides whether it is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// [`TOKEN_VARIABLE`]: the operator knows it; it is never printed.
    Environment,
    /// Drawn at start from the operating system's random source; printed once.
    Generated,
}

/// The console's token. Its `Debug` does not show it.
#[derive(Clone)]
pub(crate) struct Token {
    secret: String,
    source: TokenSource,
}

impl Token {
    /// A token the operator chose: at least 16 printable ASCII characters.
    pub fn given(secret: String) -> Result<Token, String> {
        if secret.chars().count() < MIN_LEN || !secret.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "a token must be at least {MIN_LEN} printable ASCII characters without spaces (e.g. `openssl rand -hex 16`)"
            ));
        }
        Ok(Token {
            secret,
            source: TokenSource::Environment,
        })
    }

    /// 128 random bits from the operating system, as 32 hex digits.
    pub fn random() -> Result<Token, String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| format!("no random source for a token: {e}"))?;
        Ok(Token {
            secret: bytes.iter().map(|b| format!("{b:02x}")).collect(),
            source: TokenSource::Generated,
        })
    }

    /// Where it came from.
    pub fn source(&self) -> TokenSource {
        self.source
    }

    /// The secret itself, to print once when it was generated.
    pub fn reveal(&self) -> &str {
        &self.secret
    }

    /// Whether `candidate` is the token, in a time that depends on the
    /// lengths only, not on how many leading characters match.
    pub fn matches(&self, candidate: &str) -> bool {
        constant_time_eq(self.secret.as_bytes(), candidate.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// The console's tokens, each with its operator's name, for the audit.
/// Their `Debug` does not show them.
#[derive(Debug, Clone)]
pub struct Tokens {
    named: Vec<(String, Token)>,
}

impl Tokens {
    /// The tokens of [`TOKENS_VARIABLE`] and [`TOKEN_VARIABLE`], or one
    /// random token when neither is set.
    pub fn from_env_or_random() -> Result<Tokens, String> {
        let mut named = match std::env::var(TOKENS_VARIABLE) {
            Ok(list) => parse_named(&list)?,
            Err(std::env::VarError::NotPresent) => Vec::new(),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{TOKENS_VARIABLE} is not valid UTF-8"));
            }
        };
        match std::env::var(TOKEN_VARIABLE) {
            Ok(secret) => named.push((
                DEFAULT_OPERATOR.to_owned(),
                Token::given(secret).map_err(|e| format!("{TOKEN_VARIABLE}: {e}"))?,
            )),
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{TOKEN_VARIABLE} is not valid UTF-8"));
            }
        }
        if named.is_empty() {
            named.push((DEFAULT_OPERATOR.to_owned(), Token::random()?));
        }
        Ok(Tokens { named })
    }

    /// Named tokens written as [`TOKENS_VARIABLE`] holds them:
    /// `alice:<token>,bob:<token>`, each token at least 16 printable ASCII
    /// characters, each name 1 to 64 letters, digits, or `. _ @ -`.
    ///
    /// ```
    /// use rabbit_backoff_console::Tokens;
    ///
    /// let tokens = Tokens::parse("alice:0123456789abcdef0,bob:fedcba98765432100").unwrap();
    /// assert_eq!(tokens.names().collect::<Vec<_>>(), ["alice", "bob"]);
    /// assert!(Tokens::parse("alice:short").is_err());
    /// ```
    pub fn parse(list: &str) -> Result<Tokens, String> {
        parse_named(list).map(|named| Tokens { named })
    }

    /// No token at all: only for a read-only console whose reads are open.
    pub(crate) fn none() -> Tokens {
        Tokens { named: Vec::new() }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    /// These tokens.
    #[cfg(test)]
    pub(crate) fn new(named: Vec<(String, Token)>) -> Tokens {
        Tokens { named }
    }

    /// Where they came from: [`TokenSource::Generated`] only for the random
    /// token drawn when none was set.
    pub fn source(&self) -> TokenSource {
        self.named
            .first()
            .map_or(TokenSource::Environment, |(_, token)| token.source())
    }

    /// The generated token, to print once.
    pub fn generated(&self) -> Option<&str> {
        (self.source() == TokenSource::Generated).then(|| self.named[0].1.reveal())
    }

    /// The operators' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(|(name, _)| name.as_str())
    }

    /// The name of the operator whose token `candidate` is. Every token is
    /// compared, in constant time each, whichever matches.
    pub fn operator(&self, candidate: &str) -> Option<&str> {
        let mut found = None;
        for (name, token) in &self.named {
            if token.matches(candidate) && found.is_none() {
                found = Some(name.as_str());
            }
        }
        found
    }
}

/// `alice:<token>,bob:<token>`.
fn parse_named(list: &str) -> Result<Vec<(String, Token)>, String> {
    let mut named: Vec<(String, Token)> = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, secret) = entry.split_once(':').ok_or_else(|| {
            format!(
                "{TOKENS_VARIABLE}: write NAME:TOKEN entries separated by commas (alice:…,bob:…)"
            )
        })?;
        let name = name.trim();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c))
        {
            return Err(format!(
                "{TOKENS_VARIABLE}: `{name}` is not a name (1 to 64 letters, digits, or . _ @ -)"
            ));
        }
        if named.iter().any(|(n, _)| n == name) {
            return Err(format!("{TOKENS_VARIABLE}: `{name}` is named twice"));
        }
        let token = Token::given(secret.trim().to_owned())
            .map_err(|e| format!("{TOKENS_VARIABLE}, token of `{name}`: {e}"))?;
        if named.iter().any(|(_, t)| t.matches(token.reveal())) {
            return Err(format!(
                "{TOKENS_VARIABLE}: `{name}` has the token of another operator"
            ));
        }
        named.push((name.to_owned(), token));
    }
    if named.is_empty() {
        return Err(format!("{TOKENS_VARIABLE} is set but names no token"));
    }
    Ok(named)
}

/// Compares every byte whatever the differences found so far.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_long_distinct_and_match_only_themselves() {
        let a = Token::random().unwrap();
        let b = Token::random().unwrap();
        assert_eq!(a.reveal().len(), 32);
        assert_ne!(a.reveal(), b.reveal());
        assert!(a.matches(a.reveal()));
        assert!(!a.matches(b.reveal()));
        assert!(!a.matches(""));
        assert!(!a.matches(&a.reveal()[..31]));
        assert!(!format!("{a:?}").contains(a.reveal()));
    }

    #[test]
    fn names_the_operator_of_each_token() {
        let tokens =
            Tokens::new(parse_named("alice:aaaaaaaaaaaaaaaa1, bob:bbbbbbbbbbbbbbbb2").unwrap());
        assert_eq!(tokens.operator("aaaaaaaaaaaaaaaa1"), Some("alice"));
        assert_eq!(tokens.operator("bbbbbbbbbbbbbbbb2"), Some("bob"));
        assert_eq!(tokens.operator("bbbbbbbbbbbbbbbb3"), None);
        assert_eq!(tokens.names().collect::<Vec<_>>(), ["alice", "bob"]);
        assert!(tokens.generated().is_none());
        for bad in [
            "alice",
            "alice:short",
            ":aaaaaaaaaaaaaaaa1",
            "a b:aaaaaaaaaaaaaaaa1",
            "alice:aaaaaaaaaaaaaaaa1,alice:bbbbbbbbbbbbbbbb2",
            "alice:aaaaaaaaaaaaaaaa1,bob:aaaaaaaaaaaaaaaa1",
            " , ",
        ] {
            assert!(parse_named(bad).is_err(), "{bad}");
        }
        let error = parse_named("alice:short").unwrap_err();
        assert!(!error.contains("short\""), "{error}");
    }

    #[test]
    fn refuses_short_or_blank_tokens() {
        assert!(Token::given("short".into()).is_err());
        assert!(Token::given("sixteen chars xx".into()).is_err());
        assert!(Token::given("0123456789abcdef".into()).is_ok());
    }
}
