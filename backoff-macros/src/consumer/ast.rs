//! The handler function as the macro sees it.

use syn::{FnArg, GenericArgument, ItemFn, PathArguments, ReturnType, Type};

use crate::ctxt::Ctxt;

/// What one parameter of the handler receives: the first the decoded
/// message, every other an extractor (`FromContext`), recognised by trait.
pub(crate) enum ParamKind {
    /// The decoded message.
    Payload(Type),
    /// `&Context`, `State<T>` or any other `FromContext` type.
    Extractor(Type),
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
                FnArg::Typed(typed) if params.is_empty() => {
                    params.push(ParamKind::Payload((*typed.ty).clone()))
                }
                FnArg::Typed(typed) => params.push(ParamKind::Extractor((*typed.ty).clone())),
            }
        }
        Handler {
            function,
            params,
            error_type: error_type(&function.sig.output),
        }
    }
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
