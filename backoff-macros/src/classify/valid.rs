//! Checks the markers' combinations and values, with `backoff-core`'s rules
//! for the ladders, into the verdict of each case.

use rabbit_backoff_core::Delays;
use syn::{Fields, Member, Type};

use super::ast::{Case, Input, Kind, Marker};
use crate::ctxt::Ctxt;

/// What one case's errors ask for, as the expansion needs it.
pub(crate) enum Verdict {
    Transient,
    Permanent,
    Discard,
    /// The ladder in milliseconds.
    Ladder(Vec<u64>),
    /// The `Duration` field to wait.
    RetryAfter(Member),
}

/// One variant (or the struct) and its verdict.
pub(crate) struct Arm<'a> {
    pub(crate) variant: Option<&'a syn::Variant>,
    pub(crate) fields: &'a Fields,
    pub(crate) verdict: Verdict,
}

/// The validated derive.
pub(crate) struct Model<'a> {
    pub(crate) krate: syn::Path,
    pub(crate) arms: Vec<Arm<'a>>,
}

pub(crate) fn validate<'a>(cx: &mut Ctxt, input: &Input<'a>) -> Option<Model<'a>> {
    let default = single(cx, &input.defaults)
        .and_then(|m| verdict(cx, m))
        .unwrap_or(Verdict::Transient);
    let arms = input
        .cases
        .iter()
        .map(|case| Arm {
            variant: case.variant,
            fields: case.fields,
            verdict: case_verdict(cx, case, &default),
        })
        .collect();
    Some(Model {
        krate: input
            .krate
            .clone()
            .unwrap_or_else(|| syn::parse_quote!(::rabbit_backoff)),
        arms,
    })
}

fn case_verdict(cx: &mut Ctxt, case: &Case<'_>, default: &Verdict) -> Verdict {
    for attr in &case.misplaced {
        cx.error_spanned_by(
            attr,
            "mark the variant (or the struct itself), not one of its fields; a field takes only `#[retry_after]`",
        );
    }
    let marker = single(cx, &case.markers);
    if let Some(extra) = case.retry_after.get(1) {
        let mut error =
            syn::Error::new_spanned(extra.attr, "one `#[retry_after]` field per variant");
        error.combine(syn::Error::new_spanned(
            case.retry_after[0].attr,
            "first marked here",
        ));
        cx.push(error);
    }
    if let Some(field) = case.retry_after.first() {
        if !is_duration(field.ty) {
            cx.error_spanned_by(
                field.ty,
                "`#[retry_after]` goes on a field of type `std::time::Duration`: the delay the error asks for",
            );
        }
        if let Some(marker) = marker
            && !matches!(marker.kind, Kind::Transient)
        {
            let mut error = syn::Error::new_spanned(
                marker.attr,
                "a variant with a `#[retry_after]` field is retried after that delay; remove this marker",
            );
            error.combine(syn::Error::new_spanned(
                field.attr,
                "the delay comes from here",
            ));
            cx.push(error);
        }
        return Verdict::RetryAfter(field.member.clone());
    }
    match marker {
        Some(marker) => verdict(cx, marker).unwrap_or(Verdict::Transient),
        None => match default {
            Verdict::Transient => Verdict::Transient,
            Verdict::Permanent => Verdict::Permanent,
            Verdict::Discard => Verdict::Discard,
            Verdict::Ladder(ladder) => Verdict::Ladder(ladder.clone()),
            Verdict::RetryAfter(member) => Verdict::RetryAfter(member.clone()),
        },
    }
}

/// The one marker of a list; a second one is an error pointing at both.
fn single<'m, 'a>(cx: &mut Ctxt, markers: &'m [Marker<'a>]) -> Option<&'m Marker<'a>> {
    if let [first, second, ..] = markers {
        let mut error = syn::Error::new_spanned(
            second.attr,
            "one marker per variant: `#[permanent]`, `#[transient]`, `#[discard]` or `#[retry(…)]`",
        );
        error.combine(syn::Error::new_spanned(first.attr, "first marked here"));
        cx.push(error);
    }
    markers.first()
}

fn verdict(cx: &mut Ctxt, marker: &Marker<'_>) -> Option<Verdict> {
    Some(match &marker.kind {
        Kind::Permanent => Verdict::Permanent,
        Kind::Transient => Verdict::Transient,
        Kind::Discard => Verdict::Discard,
        Kind::Retry(lit) => match lit.value().parse::<Delays>() {
            Ok(delays) => Verdict::Ladder(delays.as_millis().to_vec()),
            Err(e) => {
                cx.error_spanned_by(lit, format!("invalid `delays`: {e}"));
                return None;
            }
        },
    })
}

/// Whether `ty` is spelled as a `Duration` (`Duration`, `std::time::Duration`,
/// `core::time::Duration`). A type alias is refused: the generated code copies
/// the field as a `Duration`.
fn is_duration(ty: &Type) -> bool {
    matches!(ty, Type::Path(path) if path.qself.is_none()
        && path.path.segments.last().is_some_and(|s| s.ident == "Duration" && s.arguments.is_none()))
}
