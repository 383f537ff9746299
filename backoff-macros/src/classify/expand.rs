//! The `Classify` impl: `classify`, `verdict` and `ladders`, inside
//! `const _`, naming only the `__private` paths of the facade.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{DeriveInput, Fields, Member};

use super::valid::{Model, Verdict};

pub(crate) fn expand(input: &DeriveInput, model: &Model<'_>) -> TokenStream {
    let private = {
        let krate = &model.krate;
        quote!(#krate::__private)
    };
    let mut class_arms = Vec::new();
    let mut verdict_arms = Vec::new();
    let mut ladders: Vec<&Vec<u64>> = Vec::new();
    for arm in &model.arms {
        let pattern = pattern(arm.variant, arm.fields, &arm.verdict);
        let (class, verdict) = match &arm.verdict {
            Verdict::Transient => (quote!(Transient), quote!(#private::Verdict::Retry)),
            Verdict::Permanent => (quote!(Permanent), quote!(#private::Verdict::DeadLetter)),
            Verdict::Discard => (quote!(Permanent), quote!(#private::Verdict::Discard)),
            Verdict::Ladder(ladder) => {
                if !ladders.contains(&ladder) {
                    ladders.push(ladder);
                }
                (
                    quote!(Transient),
                    quote!(#private::Verdict::Ladder(&[#(#ladder),*])),
                )
            }
            Verdict::RetryAfter(_) => (
                quote!(Transient),
                quote!(#private::Verdict::RetryAfter(*__retry_after)),
            ),
        };
        class_arms.push(quote!(#pattern => #private::ErrorClass::#class,));
        verdict_arms.push(quote!(#pattern => #verdict,));
    }
    let (class_body, verdict_body) = if model.arms.is_empty() {
        (quote!(match *self {}), quote!(match *self {}))
    } else {
        (
            quote!(match self { #(#class_arms)* }),
            quote!(match self { #(#verdict_arms)* }),
        )
    };
    let ladders = ladders.iter().map(|ladder| quote!(&[#(#ladder),*]));
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            impl #impl_generics #private::Classify for #name #ty_generics #where_clause {
                #[allow(unused_variables)]
                fn classify(&self) -> #private::ErrorClass {
                    #class_body
                }

                #[allow(unused_variables)]
                fn verdict(&self) -> #private::Verdict {
                    #verdict_body
                }

                fn ladders() -> &'static [&'static [u64]] {
                    &[#(#ladders),*]
                }
            }
        };
    }
}

/// The pattern of one arm, binding the `#[retry_after]` field as
/// `__retry_after`.
fn pattern(variant: Option<&syn::Variant>, fields: &Fields, verdict: &Verdict) -> TokenStream {
    let path = match variant {
        Some(variant) => {
            let ident = &variant.ident;
            quote!(Self::#ident)
        }
        None => quote!(Self),
    };
    let bound = match verdict {
        Verdict::RetryAfter(member) => Some(member),
        _ => None,
    };
    match (fields, bound) {
        (Fields::Named(_), Some(Member::Named(field))) => {
            quote!(#path { #field: __retry_after, .. })
        }
        (Fields::Named(_), _) => quote!(#path { .. }),
        (Fields::Unnamed(unnamed), Some(Member::Unnamed(index))) => {
            let slots = (0..unnamed.unnamed.len() as u32).map(|i| {
                if i == index.index {
                    quote!(__retry_after)
                } else {
                    quote!(_)
                }
            });
            quote!(#path(#(#slots),*))
        }
        (Fields::Unnamed(_), _) => quote!(#path(..)),
        (Fields::Unit, _) => quote!(#path),
    }
}

/// An impl that keeps the rest of the crate compiling when the derive has
/// errors: every error transient.
pub(crate) fn fallback(input: &DeriveInput) -> TokenStream {
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            impl #impl_generics ::rabbit_backoff::__private::Classify for #name #ty_generics #where_clause {
                fn classify(&self) -> ::rabbit_backoff::__private::ErrorClass {
                    ::rabbit_backoff::__private::ErrorClass::Transient
                }
            }
        };
    }
}
