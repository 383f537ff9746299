//! `#[derive(Classify)]`: parse the `#[permanent]` / `#[transient]` markers,
//! validate their placement, expand into a `match`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Data, DeriveInput, Fields};

use crate::ctxt::Ctxt;

#[derive(Clone, Copy)]
enum Class {
    Transient,
    Permanent,
}

/// The marker on an item or a variant, if any; reports misuse.
fn marker(cx: &mut Ctxt, attrs: &[Attribute]) -> Option<Class> {
    let mut found: Option<(Class, &Attribute)> = None;
    for attr in attrs {
        let class = if attr.path().is_ident("permanent") {
            Class::Permanent
        } else if attr.path().is_ident("transient") {
            Class::Transient
        } else {
            continue;
        };
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            cx.error_spanned_by(
                attr,
                "write the marker alone, as `#[permanent]` or `#[transient]`, without arguments",
            );
        }
        if let Some((_, first)) = found {
            let mut error = syn::Error::new_spanned(
                attr,
                "a variant is either `#[permanent]` or `#[transient]`, once",
            );
            error.combine(syn::Error::new_spanned(first, "first marked here"));
            cx.push(error);
        }
        found = Some((class, attr));
    }
    found.map(|(class, _)| class)
}

fn class_tokens(class: Class) -> TokenStream {
    match class {
        Class::Transient => quote!(::rabbit_backoff::__private::ErrorClass::Transient),
        Class::Permanent => quote!(::rabbit_backoff::__private::ErrorClass::Permanent),
    }
}

pub(crate) fn expand(input: &DeriveInput) -> TokenStream {
    let mut cx = Ctxt::default();
    let default = marker(&mut cx, &input.attrs).unwrap_or(Class::Transient);
    let body = match &input.data {
        Data::Enum(data) => {
            let arms: Vec<_> = data
                .variants
                .iter()
                .map(|variant| {
                    let ident = &variant.ident;
                    let class = class_tokens(marker(&mut cx, &variant.attrs).unwrap_or(default));
                    let pattern = match variant.fields {
                        Fields::Named(_) => quote!(Self::#ident { .. }),
                        Fields::Unnamed(_) => quote!(Self::#ident(..)),
                        Fields::Unit => quote!(Self::#ident),
                    };
                    quote!(#pattern => #class,)
                })
                .collect();
            if arms.is_empty() {
                quote!(match *self {})
            } else {
                quote!(match self { #(#arms)* })
            }
        }
        Data::Struct(data) => {
            for field in &data.fields {
                if marker(&mut cx, &field.attrs).is_some() {
                    cx.error_spanned_by(
                        field,
                        "mark the struct itself `#[permanent]`, not one of its fields",
                    );
                }
            }
            class_tokens(default)
        }
        Data::Union(data) => {
            cx.error_spanned_by(
                data.union_token,
                "Classify can be derived for enums and structs, not unions",
            );
            class_tokens(default)
        }
    };
    if let Err(errors) = cx.check() {
        return errors;
    }
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            impl #impl_generics ::rabbit_backoff::__private::Classify for #name #ty_generics #where_clause {
                fn classify(&self) -> ::rabbit_backoff::__private::ErrorClass {
                    #body
                }
            }
        };
    }
}
