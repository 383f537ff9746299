//! A claimed key in a store without transactions (memory, Redis, the
//! PostgreSQL lease batch): nothing is rolled back, so completing the key is
//! the same write whether its handler succeeded or not, and a release frees
//! it. Such a store writes those two and [`Plain`] makes them a [`HeldKey`].

use futures_util::future::BoxFuture;

use crate::dedupe::StoreError;
use crate::dedupe::store::{Completed, HeldKey};

/// The two writes of a key held without a transaction.
pub(crate) trait PlainHeld: Send + Sync + 'static {
    /// Completes the key: remembered for its window.
    fn done(self) -> BoxFuture<'static, Result<(), StoreError>>;

    /// Frees the key, for a retry.
    fn free(self) -> BoxFuture<'static, Result<(), StoreError>>;
}

/// A [`PlainHeld`] key as a [`HeldKey`]: it completes with no outbox.
pub(crate) struct Plain<K>(pub(crate) K);

impl<K: PlainHeld> HeldKey for Plain<K> {
    fn complete(self: Box<Self>) -> BoxFuture<'static, Result<Completed, StoreError>> {
        let done = self.0.done();
        Box::pin(async move { done.await.map(|()| Completed::default()) })
    }

    fn complete_failed(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.0.done()
    }

    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        self.0.free()
    }
}
