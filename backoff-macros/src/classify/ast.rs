//! The markers of `#[derive(Classify)]` as written, each kept with the
//! attribute it came from for its span.

use syn::{Attribute, Data, DeriveInput, Fields, LitStr, Member, Type};

use crate::ctxt::Ctxt;

/// What a marker asks for.
pub(crate) enum Kind {
    /// `#[permanent]`
    Permanent,
    /// `#[transient]`
    Transient,
    /// `#[discard]`
    Discard,
    /// `#[retry(delays = "1m,5m,30m")]`
    Retry(LitStr),
}

/// One marker on the type or a variant.
pub(crate) struct Marker<'a> {
    pub(crate) kind: Kind,
    pub(crate) attr: &'a Attribute,
}

/// A field marked `#[retry_after]`.
pub(crate) struct RetryAfter<'a> {
    pub(crate) member: Member,
    pub(crate) ty: &'a Type,
    pub(crate) attr: &'a Attribute,
}

/// A variant, or the struct itself, with its markers.
pub(crate) struct Case<'a> {
    /// `None` for a struct.
    pub(crate) variant: Option<&'a syn::Variant>,
    pub(crate) fields: &'a Fields,
    pub(crate) markers: Vec<Marker<'a>>,
    pub(crate) retry_after: Vec<RetryAfter<'a>>,
    /// Markers written on fields, where they do not belong.
    pub(crate) misplaced: Vec<&'a Attribute>,
}

/// The derive's input.
pub(crate) struct Input<'a> {
    /// Markers on an enum: the default of its variants.
    pub(crate) defaults: Vec<Marker<'a>>,
    /// `#[classify(crate = "…")]`.
    pub(crate) krate: Option<syn::Path>,
    /// The variants, or the struct as one case; empty for a union.
    pub(crate) cases: Vec<Case<'a>>,
}

const MARKERS: &str =
    "`#[permanent]`, `#[transient]`, `#[discard]` or `#[retry(delays = \"1m,5m\")]`";

impl<'a> Input<'a> {
    pub(crate) fn parse(cx: &mut Ctxt, input: &'a DeriveInput) -> Self {
        let krate = crate_path(cx, &input.attrs);
        let (defaults, cases) = match &input.data {
            Data::Enum(data) => (
                markers(cx, &input.attrs),
                data.variants
                    .iter()
                    .map(|v| case(cx, Some(v), &v.fields, &v.attrs))
                    .collect(),
            ),
            Data::Struct(data) => (Vec::new(), vec![case(cx, None, &data.fields, &input.attrs)]),
            Data::Union(data) => {
                cx.error_spanned_by(
                    data.union_token,
                    "Classify can be derived for enums and structs, not unions",
                );
                (Vec::new(), Vec::new())
            }
        };
        Input {
            defaults,
            krate,
            cases,
        }
    }
}

fn case<'a>(
    cx: &mut Ctxt,
    variant: Option<&'a syn::Variant>,
    fields: &'a Fields,
    attrs: &'a [Attribute],
) -> Case<'a> {
    let mut retry_after = Vec::new();
    let mut misplaced = Vec::new();
    for (index, field) in fields.iter().enumerate() {
        for attr in &field.attrs {
            if attr.path().is_ident("retry_after") {
                if !matches!(attr.meta, syn::Meta::Path(_)) {
                    cx.error_spanned_by(attr, "write `#[retry_after]` alone, without arguments");
                }
                let member = match &field.ident {
                    Some(ident) => Member::Named(ident.clone()),
                    None => Member::Unnamed(index.into()),
                };
                retry_after.push(RetryAfter {
                    member,
                    ty: &field.ty,
                    attr,
                });
            } else if is_marker(attr) {
                misplaced.push(attr);
            }
        }
    }
    Case {
        variant,
        fields,
        markers: markers(cx, attrs),
        retry_after,
        misplaced,
    }
}

fn is_marker(attr: &Attribute) -> bool {
    ["permanent", "transient", "discard", "retry"]
        .iter()
        .any(|name| attr.path().is_ident(name))
}

/// The markers among `attrs`; a malformed one is reported and skipped.
fn markers<'a>(cx: &mut Ctxt, attrs: &'a [Attribute]) -> Vec<Marker<'a>> {
    let mut found = Vec::new();
    for attr in attrs {
        let path = attr.path();
        let kind = if path.is_ident("retry") {
            match retry_delays(attr) {
                Ok(delays) => Kind::Retry(delays),
                Err(e) => {
                    cx.push(e);
                    continue;
                }
            }
        } else {
            let kind = if path.is_ident("permanent") {
                Kind::Permanent
            } else if path.is_ident("transient") {
                Kind::Transient
            } else if path.is_ident("discard") {
                Kind::Discard
            } else {
                continue;
            };
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                cx.error_spanned_by(
                    attr,
                    format!("write the marker alone, as {MARKERS}, without other arguments"),
                );
            }
            kind
        };
        found.push(Marker { kind, attr });
    }
    found
}

/// The `"…"` of `#[retry(delays = "…")]`.
fn retry_delays(attr: &Attribute) -> syn::Result<LitStr> {
    let needs_ladder = || {
        syn::Error::new_spanned(
            attr,
            "`#[retry]` needs the variant's own ladder: #[retry(delays = \"1m,5m,30m\")]",
        )
    };
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return Err(needs_ladder());
    }
    let mut delays = None;
    let parsed = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("delays") {
            delays = Some(meta.value()?.parse::<LitStr>()?);
            Ok(())
        } else {
            Err(meta.error("`#[retry]` takes `delays`, e.g. #[retry(delays = \"1m,5m,30m\")]"))
        }
    });
    match (parsed, delays) {
        (Err(e), _) => Err(e),
        (Ok(()), Some(delays)) => Ok(delays),
        (Ok(()), None) => Err(needs_ladder()),
    }
}

/// `#[classify(crate = "::path")]`, for generated code in a crate that
/// renames `rabbit_backoff`.
fn crate_path(cx: &mut Ctxt, attrs: &[Attribute]) -> Option<syn::Path> {
    let mut krate = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("classify")) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: LitStr = meta.value()?.parse()?;
                krate = Some(lit.parse::<syn::Path>().map_err(|_| {
                    syn::Error::new_spanned(
                        &lit,
                        "`crate` takes a path, e.g. crate = \"::rabbit_backoff\"",
                    )
                })?);
                Ok(())
            } else {
                Err(meta.error(
                    "`#[classify]` takes `crate`, e.g. #[classify(crate = \"::rabbit_backoff\")]",
                ))
            }
        });
        if let Err(e) = parsed {
            cx.push(e);
        }
    }
    krate
}
