//! The expansion: `fn process_order` becomes a unit struct `process_order`
//! implementing `Consumer`, with the user's function kept inside `handle`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::ast::{Handler, ParamKind};
use super::valid::Config;

pub(crate) fn expand(handler: &Handler<'_>, config: &Config) -> TokenStream {
    let function = handler.function;
    let name = &function.sig.ident;
    let vis = &function.vis;
    let krate = &config.krate;
    let private = quote!(#krate::__private);
    let payload = &config.payload;
    let error = &config.error;

    let docs = function.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let queue = &config.queue;
    let delays = &config.delays;

    let mut settings = Vec::new();
    if let Some(prefetch) = config.prefetch {
        // `concurrency` stays unset, so that it follows prefetch, also when
        // an operator changes prefetch at start-up.
        settings.push(quote! { spec.prefetch = #prefetch; });
    }
    if let Some(concurrency) = config.concurrency {
        settings.push(quote! { spec.concurrency = ::core::option::Option::Some(#concurrency); });
    }
    if let Some(limit) = config.delivery_limit {
        settings.push(quote! { spec.delivery_limit = #limit; });
    }
    if let Some(ms) = config.timeout_ms {
        settings.push(quote! {
            spec.handler_timeout = ::core::option::Option::Some(::core::time::Duration::from_millis(#ms));
        });
    }
    if let Some(ms) = config.max_age_ms {
        settings.push(quote! {
            spec.max_age = ::core::option::Option::Some(::core::time::Duration::from_millis(#ms));
        });
    }
    if let Some(immediate) = config.immediate {
        let immediate = u32::from(immediate);
        settings.push(quote! { spec.immediate = #immediate; });
    }
    // The error type's own ladders are declared with the consumer's.
    settings.push(quote! {
        spec.ladders = <Self as #private::Consumer>::error_ladders();
    });
    if let Some(kind) = config.exchange_kind {
        let kind = kind.as_str();
        settings.push(quote! { spec.exchange_kind = #private::exchange_kind(#kind); });
    }
    // Classic named is kept apart from none named: only the latter is
    // warned about on a cluster.
    if let Some(queue_type) = config.queue_type {
        let queue_type = queue_type.as_str();
        settings.push(quote! { spec.queue_type = #private::queue_type(#queue_type); });
    }
    if let Some(rabbit_backoff_core::RetryReturn::Exchange) = config.retry_return {
        settings.push(quote! { spec.retry_return = #private::RetryReturn::Exchange; });
    }
    if let Some(jitter) = config.jitter {
        let jitter = jitter.percent();
        settings
            .push(quote! { spec.jitter = ::std::option::Option::Some(#private::jitter(#jitter)); });
    }
    if let Some(breaker) = config.breaker {
        let breaker = breaker.to_string();
        settings.push(
            quote! { spec.breaker = ::std::option::Option::Some(#private::breaker(#breaker)); },
        );
    }
    if let Some((window_ms, key)) = &config.dedupe {
        settings.push(quote! {
            spec.dedupe = ::core::option::Option::Some(#private::dedupe(#window_ms, #key));
        });
    }
    match config.retry {
        Some(rabbit_backoff_core::RetryBackend::Delayed) => {
            settings.push(quote! { spec.retry = #private::RetryBackend::Delayed; });
        }
        Some(rabbit_backoff_core::RetryBackend::Scheduled) => {
            settings.push(quote! { spec.retry = #private::RetryBackend::Scheduled; });
        }
        _ => {}
    }
    if let Some(rabbit_backoff_core::DeadLetterIndex::Off) = config.dead_letter_index {
        settings.push(quote! { spec.dead_letter_index = #private::DeadLetterIndex::Off; });
    }
    if let Some(rabbit_backoff_core::DeclareMode::Passive) = config.declare {
        settings.push(quote! { spec.declare = #private::DeclareMode::Passive; });
    }
    let n = &config.names;
    for (field, value) in [
        ("exchange", &n.exchange),
        ("routing_key", &n.routing_key),
        ("retry_exchange", &n.retry_exchange),
        ("retry_queue", &n.retry_queue),
        ("dead_letter_exchange", &n.dead_letter_exchange),
        ("dead_letter_queue", &n.dead_letter_queue),
        ("dead_letter_routing_key", &n.dead_letter_routing_key),
    ] {
        if let Some(value) = value {
            let field = syn::Ident::new(field, proc_macro2::Span::call_site());
            settings.push(quote! { spec.names.#field = ::core::option::Option::Some(::std::string::String::from(#value)); });
        }
    }

    let mut extractors = Vec::new();
    let args = handler.params.iter().map(|param| match param {
        ParamKind::Payload(_) => quote!(message),
        ParamKind::Extractor(ty) => {
            extractors.push(ty);
            // The bound error (not an extractor) points at the parameter's type.
            quote_spanned!(ty.span()=> <#ty as #private::FromContext<'_>>::from_context(ctx))
        }
    });
    let args: Vec<_> = args.collect();
    let count = extractors.len();

    // The bound errors (payload not Deserialize, error not Classify) point at the user's types.
    let message_type = quote_spanned!(payload.span()=> type Message = #payload;);
    let error_type = quote_spanned!(error.span()=> type Error = #error;);

    let mut inner = function.clone();
    inner.attrs.retain(|a| !a.path().is_ident("doc"));
    inner.vis = syn::Visibility::Inherited;

    quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        const _: () = {
            impl #private::Consumer for #name {
                #message_type
                #error_type

                fn spec(&self) -> #private::ConsumerSpec {
                    #[allow(unused_mut)]
                    let mut spec = #private::ConsumerSpec::new(#queue, #private::delays(#delays));
                    #(#settings)*
                    spec
                }

                fn required_state(&self) -> ::std::vec::Vec<#private::StateRequirement> {
                    let requirements: [::core::option::Option<#private::StateRequirement>; #count] =
                        [#(<#extractors as #private::FromContext<'_>>::requirement()),*];
                    requirements.into_iter().flatten().collect()
                }

                fn handle(
                    &self,
                    message: #payload,
                    ctx: &#private::Context,
                ) -> impl ::core::future::Future<Output = ::core::result::Result<(), #error>> + ::core::marker::Send {
                    #inner
                    #name(#(#args),*)
                }
            }
        };
    }
}
