//! Checks the arguments and the handler, with the rules of `backoff-core`, so
//! that a bad delay or name is a compile error pointing at it.

use rabbit_backoff_core::{
    BreakerSpec, ConsumerSpec, DeadLetterIndex, DeclareMode, DedupeKey, Delays, ExchangeKind,
    Jitter, NameOverrides, QueueType, RetryBackend, RetryReturn, SpecError, TopologyNames,
    parse_duration, validate_name,
};
use syn::{LitStr, Type};

use super::ast::{Handler, ParamKind};
use super::attr::{Args, example};
use crate::ctxt::Ctxt;

/// The validated configuration the expansion needs.
pub(crate) struct Config {
    pub(crate) queue: String,
    /// The delays as validated, written back in their canonical form.
    pub(crate) delays: String,
    pub(crate) jitter: Option<Jitter>,
    pub(crate) breaker: Option<BreakerSpec>,
    pub(crate) prefetch: Option<u16>,
    pub(crate) concurrency: Option<usize>,
    pub(crate) delivery_limit: Option<u32>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) max_age_ms: Option<u64>,
    pub(crate) immediate: Option<u8>,
    pub(crate) names: NameOverrides,
    pub(crate) exchange_kind: Option<ExchangeKind>,
    pub(crate) queue_type: Option<QueueType>,
    pub(crate) retry_return: Option<RetryReturn>,
    pub(crate) declare: Option<DeclareMode>,
    pub(crate) retry: Option<RetryBackend>,
    pub(crate) dead_letter_index: Option<DeadLetterIndex>,
    /// The dedupe window in milliseconds and the key, written back canonically.
    pub(crate) dedupe: Option<(u64, String)>,
    pub(crate) krate: syn::Path,
    pub(crate) payload: Type,
    pub(crate) error: Type,
}

pub(crate) fn validate(cx: &mut Ctxt, args: &Args, handler: &Handler<'_>) -> Option<Config> {
    let queue = required(cx, args, "queue").and_then(|lit| {
        let value = lit.value();
        validate_name("queue", &value)
            .map_err(|e| cx.error_spanned_by(lit, e))
            .ok()
            .map(|()| value)
    });
    let delays = required(cx, args, "delays").and_then(|lit| match lit.value().parse::<Delays>() {
        Ok(delays) => Some(delays),
        Err(e) => {
            cx.error_spanned_by(lit, format!("invalid `delays`: {e}"));
            None
        }
    });

    let mut names = NameOverrides::default();
    names.exchange = name(cx, args, "exchange", "exchange");
    names.routing_key = routing_key(cx, args, "routing_key");
    names.retry_exchange = name(cx, args, "retry_exchange", "retry exchange");
    names.retry_queue = retry_queue(cx, args);
    names.dead_letter_exchange = name(cx, args, "dead_letter_exchange", "dead-letter exchange");
    names.dead_letter_queue = name(cx, args, "dead_letter_queue", "dead-letter queue");
    names.dead_letter_routing_key = routing_key(cx, args, "dead_letter_routing_key");
    let jitter = parsed::<Jitter>(cx, args, "jitter");
    let breaker = parsed::<BreakerSpec>(cx, args, "breaker");
    if let (Some(queue), Some(delays)) = (&queue, &delays) {
        // Whole-topology checks, such as the longest retry queue name.
        let mut spec = rabbit_backoff_core::ConsumerSpec::new(queue.clone(), delays.clone());
        spec.jitter = jitter;
        let longest = spec.retry_delays().into_iter().max().unwrap_or(0);
        for error in TopologyNames::resolve(queue, &names).validate(longest) {
            let at = args
                .string("retry_queue")
                .or(args.string("queue"))
                .map(|a| &a.value);
            match at {
                Some(lit) => cx.error_spanned_by(lit, error),
                None => cx.push(syn::Error::new(proc_macro2::Span::call_site(), error)),
            }
        }
    }

    let prefetch = int::<u16>(cx, args, "prefetch", "between 1 and 65535");
    let concurrency = int::<usize>(cx, args, "concurrency", "at least 1");
    let delivery_limit = int::<u32>(cx, args, "delivery_limit", "at least 1");
    let timeout_ms = duration_ms(cx, args, "timeout");
    let max_age_ms = duration_ms(cx, args, "max_age");
    let dedupe = dedupe(cx, args);
    // u8: at most 255 immediate retries; more than a few would hold the slot.
    let immediate = int::<u8>(cx, args, "immediate", "between 1 and 255");
    let exchange_kind = parsed::<ExchangeKind>(cx, args, "exchange_type");
    let queue_type = parsed::<QueueType>(cx, args, "queue_type");
    let retry_return = parsed::<RetryReturn>(cx, args, "retry_return");
    let declare = parsed::<DeclareMode>(cx, args, "declare");
    if let (Some(retry_return), Some(kind)) = (retry_return, exchange_kind)
        && let Err(e) = retry_return.check(kind)
        && let (Some(at), Some(kind_at)) =
            (args.string("retry_return"), args.string("exchange_type"))
    {
        let mut error = syn::Error::new_spanned(&at.value, e);
        error.combine(syn::Error::new_spanned(
            &kind_at.value,
            format!("the work exchange is a {kind} exchange here"),
        ));
        cx.push(error);
    }
    if delivery_limit.is_some()
        && queue_type != Some(QueueType::Quorum)
        && let Some(arg) = args.int("delivery_limit")
    {
        cx.error_spanned_by(&arg.key, "`delivery_limit` applies to quorum queues only; add `queue_type = \"quorum\"` or remove it");
    }
    let retry = parsed::<RetryBackend>(cx, args, "retry");
    let dead_letter_index = parsed::<DeadLetterIndex>(cx, args, "dead_letter_index");
    if let Some(backend @ (RetryBackend::Delayed | RetryBackend::Scheduled)) = retry
        && let Some(delays) = &delays
    {
        let mut spec = ConsumerSpec::new(queue.clone().unwrap_or_default(), delays.clone());
        spec.retry = backend;
        spec.queue_type = queue_type;
        if let Some(limit) = delivery_limit {
            spec.delivery_limit = limit;
        }
        spec.jitter = jitter;
        spec.max_age = max_age_ms.map(std::time::Duration::from_millis);
        spec.names.retry_queue = names.retry_queue.clone();
        spec.names.retry_exchange = names.retry_exchange.clone();
        if let Some(route) = retry_return {
            spec.retry_return = route;
        }
        backend_errors(cx, args, &spec);
    }
    let krate = match args.string("crate") {
        None => syn::parse_quote!(::rabbit_backoff),
        Some(arg) => match arg.value.parse::<syn::Path>() {
            Ok(path) => path,
            Err(_) => {
                cx.error_spanned_by(
                    &arg.value,
                    "`crate` takes a path, e.g. crate = \"::rabbit_backoff\"",
                );
                syn::parse_quote!(::rabbit_backoff)
            }
        },
    };

    let (payload, error) = validate_function(cx, handler);
    Some(Config {
        queue: queue?,
        delays: delays?.to_string(),
        jitter,
        breaker,
        prefetch,
        concurrency,
        delivery_limit,
        timeout_ms,
        max_age_ms,
        immediate,
        names,
        exchange_kind,
        queue_type,
        retry_return,
        declare,
        retry,
        dead_letter_index,
        dedupe,
        krate,
        payload: payload?,
        error: error?,
    })
}

/// The problems of `retry = "delayed"` or `"scheduled"` with the rest of
/// the attribute, each pointing at the token to change.
fn backend_errors(cx: &mut Ctxt, args: &Args, spec: &ConsumerSpec) {
    let value = |key: &str| args.string(key).map(|a| a.value.span());
    let key = |key: &str| {
        args.string(key)
            .map(|a| a.key.span())
            .or_else(|| args.int(key).map(|a| a.key.span()))
    };
    let retry = value("retry").unwrap_or_else(proc_macro2::Span::call_site);
    for problem in spec
        .delayed_problems()
        .into_iter()
        .chain(spec.scheduled_problems())
    {
        let at = match &problem {
            SpecError::DelayedNeedsQuorum | SpecError::ScheduledNeedsQuorum => {
                value("queue_type").unwrap_or(retry)
            }
            SpecError::DelayedNotLinear(_) => value("delays").unwrap_or(retry),
            SpecError::DelayedDeliveryLimit { .. } | SpecError::ScheduledDeliveryLimit { .. } => {
                args.int("delivery_limit")
                    .map(|a| a.value.span())
                    .unwrap_or(retry)
            }
            SpecError::DelayedExcludes { setting } | SpecError::ScheduledExcludes { setting } => {
                key(setting).unwrap_or(retry)
            }
            _ => retry,
        };
        cx.push(syn::Error::new(at, problem));
    }
}

fn validate_function(cx: &mut Ctxt, handler: &Handler<'_>) -> (Option<Type>, Option<Type>) {
    let sig = &handler.function.sig;
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            "a consumer handler must be an `async fn`; write `async fn` here",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(
            &sig.generics,
            "a consumer handler cannot be generic; name concrete types",
        );
    }
    if let Some(variadic) = &sig.variadic {
        cx.error_spanned_by(variadic, "a consumer handler takes no variadic arguments");
    }
    let payload = match handler.params.first() {
        Some(ParamKind::Payload(ty)) => {
            if let Type::Reference(reference) = ty {
                cx.error_spanned_by(
                    reference,
                    "the first parameter is the decoded message, an owned type such as `order: Order`; put `&Context` and `State<T>` after it",
                );
            }
            Some(ty.clone())
        }
        _ => {
            cx.error_spanned_by(
                &sig.ident,
                "a consumer handler takes the decoded message as its first parameter, e.g. `order: Order`",
            );
            None
        }
    };
    let error = handler.error_type.cloned();
    if error.is_none() {
        let message = "a consumer handler returns `Result<(), E>` where E derives Classify, e.g. `-> Result<(), OrderError>`";
        match &sig.output {
            syn::ReturnType::Default => {
                cx.push(syn::Error::new(sig.paren_token.span.close(), message))
            }
            syn::ReturnType::Type(_, ty) => cx.error_spanned_by(ty, message),
        }
    }
    (payload, error)
}

fn required<'a>(cx: &mut Ctxt, args: &'a Args, key: &str) -> Option<&'a LitStr> {
    let found = args.string(key).map(|a| &a.value);
    if found.is_none() {
        let span = args.span.unwrap_or_else(proc_macro2::Span::call_site);
        cx.push(syn::Error::new(
            span,
            format!("missing `{key}`; add {}", example(key)),
        ));
    }
    found
}

fn name(cx: &mut Ctxt, args: &Args, key: &str, what: &'static str) -> Option<String> {
    let arg = args.string(key)?;
    let value = arg.value.value();
    match validate_name(what, &value) {
        Ok(()) => Some(value),
        Err(e) => {
            cx.error_spanned_by(&arg.value, e);
            None
        }
    }
}

fn routing_key(cx: &mut Ctxt, args: &Args, key: &str) -> Option<String> {
    let arg = args.string(key)?;
    let value = arg.value.value();
    if value.len() > 255 {
        cx.error_spanned_by(
            &arg.value,
            format!(
                "`{key}` is {} bytes long; AMQP allows at most 255",
                value.len()
            ),
        );
        return None;
    }
    Some(value)
}

fn retry_queue(cx: &mut Ctxt, args: &Args) -> Option<String> {
    let arg = args.string("retry_queue")?;
    let value = arg.value.value();
    if !value.contains("{ms}") {
        cx.error_spanned_by(
            &arg.value,
            format!("`retry_queue` needs a `{{ms}}` placeholder so that each delay gets its own queue, e.g. \"{value}_{{ms}}ms\""),
        );
        return None;
    }
    Some(value)
}

/// A duration key such as `timeout = "30s"`, in milliseconds.
fn duration_ms(cx: &mut Ctxt, args: &Args, key: &str) -> Option<u64> {
    let arg = args.string(key)?;
    match parse_duration(&arg.value.value()) {
        Ok(duration) => Some(duration.as_millis() as u64),
        Err(e) => {
            cx.error_spanned_by(&arg.value, format!("invalid `{key}`: {e}"));
            None
        }
    }
}

/// `dedupe = "24h"` and `dedupe_key = "…"`, which needs `dedupe`.
fn dedupe(cx: &mut Ctxt, args: &Args) -> Option<(u64, String)> {
    let window = duration_ms(cx, args, "dedupe");
    let key = parsed::<DedupeKey>(cx, args, "dedupe_key");
    if window.is_none()
        && args.string("dedupe").is_none()
        && let Some(arg) = args.string("dedupe_key")
    {
        cx.error_spanned_by(
            &arg.key,
            "`dedupe_key` chooses the key of the inbox, which `dedupe` turns on; add dedupe = \"24h\" (how long a handled key is remembered)",
        );
        return None;
    }
    Some((window?, key.unwrap_or_default().to_string()))
}

fn int<T: TryFrom<u64> + PartialEq + Default>(
    cx: &mut Ctxt,
    args: &Args,
    key: &str,
    range: &str,
) -> Option<T> {
    let arg = args.int(key)?;
    let parsed = arg
        .value
        .base10_parse::<u64>()
        .ok()
        .and_then(|n| T::try_from(n).ok());
    match parsed {
        Some(n) if n != T::default() => Some(n),
        _ => {
            cx.error_spanned_by(
                &arg.value,
                format!("`{key}` must be {range}, e.g. {}", example(key)),
            );
            None
        }
    }
}

fn parsed<T: std::str::FromStr<Err = String>>(cx: &mut Ctxt, args: &Args, key: &str) -> Option<T> {
    let arg = args.string(key)?;
    match arg.value.value().parse::<T>() {
        Ok(value) => Some(value),
        Err(e) => {
            cx.error_spanned_by(&arg.value, e);
            None
        }
    }
}
