use rabbit_backoff::prelude::*;

#[backoff_consumer(queue = "orders", delays = "5s")]
struct Orders;

fn main() {}
