//! The handler function as the macro sees it.

use syn::{FnArg, GenericArgument, ItemFn, PathArguments, ReturnType, Type};

use crate::ctxt::Ctxt;

/// What one parameter of the handler receives.
pub(crate) enum ParamKind {
    /// The decoded message.
    Payload(Type),
    /// `&Context`.
    Context,
    /// `State<T>`, with `T`.
    State(Type),
}

pub(crate) struct Handler<'a> {
    pub(crate) function: &'a ItemFn,
    pub(crate) params: Vec<ParamKind>,
    /// `E` of `Result<(), E>`, when the return type has that shape.
    pub(crate) error_type: Option<&'a Type>,
}

impl<'a> Handler<'a> {
    pub(crate) fn parse(cx: &mut Ctxt, function: &'a ItemFn) -> Self {
        let mut params = Vec::new();
        for input in &function.sig.inputs {
            match input {
                FnArg::Receiver(receiver) => cx.error_spanned_by(
                    receiver,
                    "a consumer handler is a free function and takes no `self`; move it out of the `impl` block",
                ),
                FnArg::Typed(typed) => params.push(classify_param(&typed.ty)),
            }
        }
        Handler {
            function,
            params,
            error_type: error_type(&function.sig.output),
        }
    }
}

fn classify_param(ty: &Type) -> ParamKind {
    if let Type::Reference(reference) = ty
        && last_segment_is(&reference.elem, "Context")
    {
        return ParamKind::Context;
    }
    if let Type::Path(path) = ty
        && let Some(segment) = path.path.segments.last()
        && segment.ident == "State"
        && let PathArguments::AngleBracketed(args) = &segment.arguments
        && let [GenericArgument::Type(inner)] = args.args.iter().collect::<Vec<_>>()[..]
    {
        return ParamKind::State(inner.clone());
    }
    ParamKind::Payload(ty.clone())
}

fn last_segment_is(ty: &Type, name: &str) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == name))
}

/// `E` in `Result<(), E>`.
fn error_type(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let Type::Path(path) = ty.as_ref() else {
        return None;
    };
    let segment = path.path.segments.last()?;
    if segment.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>()[..] {
        [
            GenericArgument::Type(Type::Tuple(unit)),
            GenericArgument::Type(error),
        ] if unit.elems.is_empty() => Some(error),
        _ => None,
    }
}
