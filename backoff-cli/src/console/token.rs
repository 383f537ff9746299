//! The secret that write actions carry: `Authorization: Bearer <token>`.

use std::fmt;

/// The environment variable that sets the token.
pub const TOKEN_VARIABLE: &str = "RABBIT_BACKOFF_CONSOLE_TOKEN";

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
pub struct Token {
    secret: String,
    source: TokenSource,
}

impl Token {
    /// The token of [`TOKEN_VARIABLE`], or a random one when it is unset.
    pub fn from_env_or_random() -> Result<Token, String> {
        match std::env::var(TOKEN_VARIABLE) {
            Ok(secret) => Token::given(secret),
            Err(std::env::VarError::NotPresent) => Token::random(),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(format!("{TOKEN_VARIABLE} is not valid UTF-8"))
            }
        }
    }

    /// A token the operator chose: at least 16 printable ASCII characters.
    pub fn given(secret: String) -> Result<Token, String> {
        if secret.chars().count() < MIN_LEN || !secret.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "{TOKEN_VARIABLE} must be at least {MIN_LEN} printable ASCII characters without spaces (e.g. `openssl rand -hex 16`)"
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
    fn refuses_short_or_blank_tokens() {
        assert!(Token::given("short".into()).is_err());
        assert!(Token::given("sixteen chars xx".into()).is_err());
        assert!(Token::given("0123456789abcdef".into()).is_ok());
    }
}
