//! Procedural macros of [rabbit-backoff](https://docs.rs/rabbit-backoff).
//! Use them through the `rabbit_backoff` crate, which documents them.
//!
//! Each macro parses (`ast`, `attr`), then validates (`valid`), then expands
//! (`expand`); every error keeps the span of the syntax it is about, and all of
//! them are reported at once.

#![forbid(unsafe_code)]

use proc_macro::TokenStream;

mod classify;
mod consumer;
mod ctxt;

/// Turns an `async fn` handler into a consumer value of the same name.
/// Documented on `rabbit_backoff::backoff_consumer`.
#[proc_macro_attribute]
pub fn backoff_consumer(args: TokenStream, item: TokenStream) -> TokenStream {
    consumer::expand(args.into(), item.into()).into()
}

/// Implements `Classify`: every variant is transient unless marked
/// `#[permanent]`, `#[discard]`, `#[retry(delays = "…")]`, or has a
/// `#[retry_after]` field. Documented on `rabbit_backoff::Classify`.
#[proc_macro_derive(
    Classify,
    attributes(permanent, transient, discard, retry, retry_after, classify)
)]
pub fn derive_classify(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    classify::expand(&input).into()
}
