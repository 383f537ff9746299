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

fn main() {}
