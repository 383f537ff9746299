//! [`State`]: shared values a handler takes by type, registered on the
//! builder, and [`StateRequirement`], what a consumer's handler needs of them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Shared state registered on the builder with
/// [`RuntimeBuilder::state`](crate::RuntimeBuilder::state) and taken by a
/// handler as a `State<T>` parameter.
///
/// Cloning is cheap (an [`Arc`]); it dereferences to `T`.
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> State<T> {
    /// Wraps a shared value.
    pub fn new(value: Arc<T>) -> Self {
        State(value)
    }

    /// The shared value.
    pub fn into_inner(self) -> Arc<T> {
        self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A type of state a consumer needs; checked when the runtime starts, so that
/// a missing `.state(…)` fails start-up instead of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRequirement {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
}

impl StateRequirement {
    /// The requirement of a `State<T>` parameter.
    pub fn of<T: Any + Send + Sync>() -> Self {
        StateRequirement {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The Rust name of the required type.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }
}

/// Values registered on the builder, one per type.
#[derive(Default, Clone)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    pub(crate) fn insert<T: Any + Send + Sync>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn contains(&self, requirement: &StateRequirement) -> bool {
        self.values.contains_key(&requirement.type_id)
    }

    pub(crate) fn get<T: Any + Send + Sync>(&self) -> Option<State<T>> {
        let value = self.values.get(&TypeId::of::<T>())?;
        Arc::clone(value).downcast::<T>().ok().map(State)
    }
}
