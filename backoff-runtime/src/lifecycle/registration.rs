//! [`Registration`]: a consumer with its final spec, its type erased so
//! that one runtime holds many.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rabbit_backoff_core::ConsumerSpec;

use crate::consume::consumer::Consumer;
use crate::consume::state::StateRequirement;
use crate::consume::worker::{Worker, WorkerEnv};
use crate::error::Error;

/// A consumer with its final spec, its type erased so that one runtime holds many.
pub(super) trait Registration: Send + Sync {
    /// Its spec, after overrides.
    fn spec(&self) -> &ConsumerSpec;
    /// The state its handler takes.
    fn required_state(&self) -> Vec<StateRequirement>;
    /// Starts consuming in `env`: once consuming, the loop to run.
    fn start(
        &self,
        env: WorkerEnv,
    ) -> BoxFuture<'static, Result<BoxFuture<'static, Result<(), Error>>, Error>>;
}

/// A consumer of type `C` and its spec.
pub(super) struct Registered<C> {
    pub(super) consumer: Arc<C>,
    pub(super) spec: ConsumerSpec,
}

impl<C: Consumer> Registration for Registered<C> {
    fn spec(&self) -> &ConsumerSpec {
        &self.spec
    }

    fn required_state(&self) -> Vec<StateRequirement> {
        self.consumer.required_state()
    }

    fn start(
        &self,
        env: WorkerEnv,
    ) -> BoxFuture<'static, Result<BoxFuture<'static, Result<(), Error>>, Error>> {
        let consumer = Arc::clone(&self.consumer);
        let spec = self.spec.clone();
        Box::pin(async move {
            let (worker, stream) = Worker::start(consumer, spec, env).await?;
            let run: BoxFuture<'static, Result<(), Error>> = Box::pin(worker.run(stream));
            Ok(run)
        })
    }
}
