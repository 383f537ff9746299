//! Operating failures: the dead letters (passes, the index, groups, replay,
//! export, purge), the retry tiers' listing, and status.

pub(crate) mod dead_letters;
pub(crate) mod retry_tier;
pub(crate) mod status;
