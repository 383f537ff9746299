use rabbit_backoff::prelude::*;

#[derive(Classify)]
enum OrderError {
    #[permanent(always)]
    Invalid,
    #[permanent]
    #[transient]
    Both,
}

#[derive(Classify)]
union Bits {
    a: u32,
}

#[derive(Classify)]
#[classify(krate = "::rabbit_backoff")]
enum PolicyError {
    #[retry]
    NoLadder,
    #[retry(delays = "1m,1m")]
    BadLadder,
    RateLimited {
        #[retry_after]
        wait_ms: u64,
    },
    #[permanent]
    Limited(#[retry_after] std::time::Duration),
    Twice(
        #[retry_after] std::time::Duration,
        #[retry_after] std::time::Duration,
    ),
    Misplaced(#[discard] u32),
}

fn main() {}
