//! `#[derive(Classify)]`: parse the markers on the type, its variants and
//! fields (`ast`), check their combinations (`valid`), expand into the
//! `Classify` impl (`expand`).

mod ast;
mod expand;
mod valid;

use proc_macro2::TokenStream;
use syn::DeriveInput;

use crate::ctxt::Ctxt;

pub(crate) fn expand(input: &DeriveInput) -> TokenStream {
    let mut cx = Ctxt::default();
    let parsed = ast::Input::parse(&mut cx, input);
    let validated = valid::validate(&mut cx, &parsed);
    match (cx.check(), validated) {
        (Ok(()), Some(model)) => expand::expand(input, &model),
        // The errors, and an impl so that the handler using the type raises
        // no second error.
        (Err(errors), _) => {
            let fallback = expand::fallback(input);
            quote::quote!(#errors #fallback)
        }
        (Ok(()), None) => expand::fallback(input),
    }
}
