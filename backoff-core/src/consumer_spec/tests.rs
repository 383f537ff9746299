use super::*;
use crate::{Dedupe, RetryBackend};

fn spec() -> ConsumerSpec {
    ConsumerSpec::new("orders", "5s,15s".parse().unwrap())
}

#[test]
fn concurrency_follows_prefetch_unless_set() {
    let mut s = spec();
    assert_eq!(s.effective_concurrency(), 50);
    s.prefetch = 20;
    assert_eq!(s.effective_concurrency(), 20);
    s.concurrency = Some(3);
    s.prefetch = 80;
    assert_eq!(s.effective_concurrency(), 3);
    assert_eq!(spec().with_prefetch(7).effective_concurrency(), 7);
    s.concurrency = Some(0);
    assert!(s.problems().contains(&SpecError::ZeroConcurrency));
}

#[test]
fn retry_return_through_a_broadcasting_exchange_is_refused() {
    for (kind, refused) in [
        (ExchangeKind::Direct, false),
        (ExchangeKind::Topic, false),
        (ExchangeKind::Fanout, true),
        (ExchangeKind::Headers, true),
    ] {
        let mut s = spec();
        s.exchange_kind = kind;
        assert!(s.validate().is_ok(), "queue route on {kind}");
        s.retry_return = RetryReturn::Exchange;
        assert_eq!(
            s.problems()
                .contains(&SpecError::RetryReturnBroadcasts { kind }),
            refused,
            "{kind}"
        );
    }
    let message = SpecError::RetryReturnBroadcasts {
        kind: ExchangeKind::Fanout,
    }
    .to_string();
    assert!(
        message.contains("fanout") && message.contains("retry_return = \"queue\""),
        "{message}"
    );
}

#[test]
fn modes_parse_and_print() {
    for mode in [RetryReturn::Queue, RetryReturn::Exchange] {
        assert_eq!(mode.as_str().parse::<RetryReturn>(), Ok(mode));
    }
    for mode in [DeclareMode::Declare, DeclareMode::Passive] {
        assert_eq!(mode.as_str().parse::<DeclareMode>(), Ok(mode));
    }
    assert!("Exchange".parse::<RetryReturn>().is_err());
    assert!(
        "check"
            .parse::<DeclareMode>()
            .unwrap_err()
            .contains("passive")
    );
    assert_eq!(spec().retry_return, RetryReturn::Queue);
    assert_eq!(spec().declare, DeclareMode::Declare);
}

fn delayed(delays: &str) -> ConsumerSpec {
    let mut s = ConsumerSpec::new("orders", delays.parse().unwrap());
    s.retry = RetryBackend::Delayed;
    s.queue_type = Some(QueueType::Quorum);
    s
}

#[test]
fn delayed_retries_need_a_quorum_queue_a_linear_ladder_and_room_under_the_limit() {
    assert_eq!(delayed("1s,2s,3s").validate(), Ok(()));
    let mut s = delayed("1s,2s,3s");
    s.queue_type = Some(QueueType::Classic);
    assert_eq!(s.problems(), [SpecError::DelayedNeedsQuorum]);
    assert!(
        s.validate()
            .unwrap_err()
            .to_string()
            .contains("remove queue_type = \"classic\"")
    );

    let s = delayed("5s,15s,60s");
    let [SpecError::DelayedNotLinear(refused)] = &s.problems()[..] else {
        panic!("{:?}", s.problems());
    };
    assert_eq!(refused.suggestion.to_string(), "5s,10s,15s");

    let mut s = delayed("1s,2s,3s");
    s.delivery_limit = 3;
    let message = s.validate().unwrap_err().to_string();
    assert_eq!(
        s.problems(),
        [SpecError::DelayedDeliveryLimit {
            limit: 3,
            retries: 3,
            need: 4
        }]
    );
    assert!(message.contains("delivery_limit = 4 or more"), "{message}");
    s.delivery_limit = 4;
    assert_eq!(s.validate(), Ok(()));
}

#[test]
fn delayed_retries_refuse_what_only_tiers_can_honour() {
    let mut s = delayed("1s,2s");
    s.jitter = Some("20%".parse().unwrap());
    s.max_age = Some(std::time::Duration::from_secs(60));
    s.ladders = vec![vec![60_000]];
    s.names.retry_queue = Some("orders.wait_{ms}".into());
    s.retry_return = RetryReturn::Exchange;
    let settings: Vec<_> = s
        .problems()
        .into_iter()
        .map(|p| match p {
            SpecError::DelayedExcludes { setting } => setting,
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(settings.len(), 5);
    assert_eq!(
        settings[..4],
        ["jitter", "max_age", "retry_queue", "retry_return"]
    );
    // None of it matters with tiers.
    s.retry = RetryBackend::Tiers;
    s.jitter = None;
    assert_eq!(s.validate(), Ok(()));
    assert_eq!(s.delayed_retry(), None);
}

#[test]
fn a_zero_dedupe_window_is_refused() {
    let mut s = spec();
    s.dedupe = Some(Dedupe::new(std::time::Duration::from_secs(60)));
    assert!(s.validate().is_ok());
    s.dedupe = Some(Dedupe::new(std::time::Duration::ZERO));
    assert_eq!(s.validate(), Err(SpecError::ZeroDedupeWindow));
}
