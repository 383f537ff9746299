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
            let stub = stub(&function, &args);
            quote! { #errors #stub }
        }
        (Ok(()), None) => stub(&function, &args),
    }
}

/// What the attribute emits next to its errors: the value `process_order`
/// with a `Consumer` impl that never runs, so that `.consumer(process_order)`
/// raises no second error, and the user's function inside `const _`, so that
/// its body is still type-checked and the IDE stays useful.
fn stub(function: &syn::ItemFn, args: &attr::Args) -> TokenStream {
    let name = &function.sig.ident;
    let vis = &function.vis;
    let krate: syn::Path = args
        .string("crate")
        .and_then(|arg| arg.value.parse().ok())
        .unwrap_or_else(|| syn::parse_quote!(::rabbit_backoff));
    let private = quote!(#krate::__private);
    let mut inner = function.clone();
    inner.vis = syn::Visibility::Inherited;
    quote! {
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        const _: () = {
            #[allow(dead_code)]
            #inner

            impl #private::Consumer for #name {
                type Message = ();
                type Error = ::std::convert::Infallible;

                fn spec(&self) -> #private::ConsumerSpec {
                    ::core::unreachable!("#[backoff_consumer] on `{}` did not compile", ::core::stringify!(#name))
                }

                async fn handle(&self, _message: (), _ctx: &#private::Context) -> ::core::result::Result<(), Self::Error> {
                    ::core::unreachable!("#[backoff_consumer] on `{}` did not compile", ::core::stringify!(#name))
                }
            }
        };
    }
}
