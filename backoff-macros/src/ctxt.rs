//! Collects every error of one macro invocation, to report them all at once.

use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

#[derive(Default)]
pub(crate) struct Ctxt {
    errors: Option<syn::Error>,
}

impl Ctxt {
    /// An error at the span of `tokens`.
    pub(crate) fn error_spanned_by<T: ToTokens, M: Display>(&mut self, tokens: T, message: M) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// An error as it stands.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.errors {
            Some(errors) => errors.combine(error),
            None => self.errors = Some(error),
        }
    }

    /// Every error as `compile_error!` invocations, or `Ok` when there were none.
    pub(crate) fn check(self) -> Result<(), TokenStream> {
        match self.errors {
            Some(errors) => Err(errors.to_compile_error()),
            None => Ok(()),
        }
    }
}
