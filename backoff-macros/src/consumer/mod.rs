//! `#[backoff_consumer(...)]`: parse the arguments and the function, validate
//! both, expand into a unit struct implementing `Consumer`.

mod ast;
mod attr;
mod expand;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let function: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new_spanned(
                &item,
                "#[backoff_consumer] goes on an `async fn` handler, e.g. `async fn process_order(order: Order) -> Result<(), OrderError>`",
            )
            .to_compile_error();
            return quote! { #error #item };
        }
    };
    let mut cx = Ctxt::default();
    let args = attr::parse(&mut cx, args);
    let handler = ast::Handler::parse(&mut cx, &function);
    let config = valid::validate(&mut cx, &args, &handler);
    match (cx.check(), config) {
        (Ok(()), Some(config)) => expand::expand(&handler, &config),
        (Err(errors), _) => {
            // Keep the user's function so the rest of the crate still type-checks.
            quote! { #errors #function }
        }
        (Ok(()), None) => quote! { #function },
    }
}
