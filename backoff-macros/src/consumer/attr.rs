//! Parsing of `queue = "orders", delays = "5s,15s,60s", prefetch = 20, …`.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitInt, LitStr, MetaNameValue, Token};

use rabbit_backoff_core::ATTRIBUTE_KEYS as KEYS;

use crate::ctxt::Ctxt;

/// The keys whose value is an integer literal; every other key takes a string.
const INT_KEYS: &[&str] = &["prefetch", "concurrency", "delivery_limit", "immediate"];

/// One `key = value`, the key kept for its span.
pub(crate) struct Arg<L> {
    pub(crate) key: Ident,
    pub(crate) value: L,
}

/// The attribute's arguments as written; not yet validated.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) strings: Vec<Arg<LitStr>>,
    pub(crate) ints: Vec<Arg<LitInt>>,
    /// The span of the whole argument list, for "missing key" errors.
    pub(crate) span: Option<proc_macro2::Span>,
}

impl Args {
    pub(crate) fn string(&self, key: &str) -> Option<&Arg<LitStr>> {
        self.strings.iter().find(|a| a.key == key)
    }

    pub(crate) fn int(&self, key: &str) -> Option<&Arg<LitInt>> {
        self.ints.iter().find(|a| a.key == key)
    }
}

pub(crate) fn parse(cx: &mut Ctxt, tokens: TokenStream) -> Args {
    let mut args = Args {
        span: Some(proc_macro2::Span::call_site()),
        ..Args::default()
    };
    let pairs = match Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(pairs) => pairs,
        Err(e) => {
            cx.push(syn::Error::new(
                e.span(),
                format!("{e}; write `key = value` pairs separated by commas, e.g. #[backoff_consumer(queue = \"orders\", delays = \"5s,15s,60s\")]"),
            ));
            return args;
        }
    };
    let mut seen: Vec<Ident> = Vec::new();
    for pair in pairs {
        let Some(key) = pair.path.get_ident().cloned().or_else(|| {
            // `crate` is a keyword, so it does not parse as an identifier.
            pair.path
                .segments
                .first()
                .filter(|s| s.ident == "crate")
                .map(|s| s.ident.clone())
        }) else {
            cx.error_spanned_by(&pair.path, unknown_key_message(&pair.path));
            continue;
        };
        let name = key.to_string();
        if !KEYS.contains(&name.as_str()) {
            cx.error_spanned_by(&key, unknown_key_message(&key));
            continue;
        }
        if let Some(first) = seen.iter().find(|k| **k == key) {
            let mut error = syn::Error::new_spanned(
                &key,
                format!("duplicate key `{name}`; give each key once"),
            );
            error.combine(syn::Error::new_spanned(
                first,
                format!("`{name}` is first given here"),
            ));
            cx.push(error);
            continue;
        }
        seen.push(key.clone());
        let literal = match &pair.value {
            Expr::Lit(ExprLit { lit, .. }) => Some(lit),
            _ => None,
        };
        if !INT_KEYS.contains(&name.as_str()) {
            match literal {
                Some(Lit::Str(value)) => args.strings.push(Arg {
                    key,
                    value: value.clone(),
                }),
                _ => cx.error_spanned_by(
                    &pair.value,
                    format!("`{name}` takes a string literal, e.g. {}", example(&name)),
                ),
            }
        } else {
            match literal {
                Some(Lit::Int(value)) => args.ints.push(Arg {
                    key,
                    value: value.clone(),
                }),
                _ => cx.error_spanned_by(
                    &pair.value,
                    format!("`{name}` takes an integer literal, e.g. {}", example(&name)),
                ),
            }
        }
    }
    args
}

fn unknown_key_message(key: &impl quote::ToTokens) -> String {
    let written = quote::quote!(#key).to_string().replace(' ', "");
    format!("unknown key `{written}`; the keys are: {}", KEYS.join(", "))
}

pub(crate) fn example(key: &str) -> &'static str {
    match key {
        "queue" => "queue = \"orders\"",
        "delays" => "delays = \"5s,15s,60s\" or delays = \"exponential(100ms, x2, 4)\"",
        "prefetch" => "prefetch = 20",
        "concurrency" => "concurrency = 10",
        "delivery_limit" => "delivery_limit = 20",
        "timeout" => "timeout = \"30s\"",
        "exchange_type" => "exchange_type = \"fanout\"",
        "queue_type" => "queue_type = \"quorum\"",
        "retry_queue" => "retry_queue = \"orders.retry_{ms}ms\"",
        "retry_return" => "retry_return = \"exchange\"",
        "declare" => "declare = \"passive\"",
        "jitter" => "jitter = \"20%\"",
        "max_age" => "max_age = \"1h\"",
        "immediate" => "immediate = 2",
        "breaker" => "breaker = \"50% of 20, pause 30s\"",
        "dedupe" => "dedupe = \"24h\"",
        "dedupe_key" => "dedupe_key = \"header:x-idempotency-key\"",
        "retry" => "retry = \"delayed\"",
        "dead_letter_index" => "dead_letter_index = \"off\"",
        "crate" => "crate = \"::rabbit_backoff\"",
        _ => "exchange = \"orders\"",
    }
}
