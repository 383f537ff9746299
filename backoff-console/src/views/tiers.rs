//! `GET api/consumers/{queue}/tiers?limit=…`: the messages waiting in each
//! retry tier, with when each is due back in the work queue.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State as Shared};
use rabbit_backoff_core::QueueType;
use rabbit_backoff_dead_letters::TierListing;
use serde::{Deserialize, Serialize};

use super::listed;
use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::state::State;

/// The most messages listed per retry tier.
const MAX_TIER_LISTED: usize = 200;

/// Why a quorum queue's tiers are not listed.
const QUORUM_NOT_LISTED: &str =
    "not listed: reading a quorum queue's messages counts toward its delivery limit";

/// How many messages per tier.
#[derive(Debug, Deserialize)]
pub(crate) struct TierQuery {
    limit: Option<usize>,
}

/// One retry tier as the page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct TierView {
    queue: String,
    delay_ms: u64,
    /// Its head with due times, when it can be listed.
    listing: Option<TierListing>,
    /// Why it is not listed.
    note: Option<String>,
}

/// `GET api/consumers/{queue}/tiers?limit=…`.
pub(crate) async fn tiers(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<TierQuery>,
) -> Result<Json<Vec<TierView>>, ApiError> {
    let limit = listed(query.limit, MAX_TIER_LISTED);
    let consumer = state.consumer(&queue).await?;
    let quorum = consumer.spec.effective_queue_type() == QueueType::Quorum;
    let connection = state.reader().await?;
    let mut views = Vec::new();
    for tier in &consumer.tiers {
        let (listing, note) = if quorum {
            (None, Some(QUORUM_NOT_LISTED.to_owned()))
        } else {
            let listing = rabbit_backoff_dead_letters::list_retry_tier(
                &*connection,
                &tier.depth.name,
                tier.delay_ms,
                limit,
            )
            .await;
            match listing {
                Ok(listing) => (Some(listing), None),
                Err(e) => {
                    state.forget_reader().await;
                    return Err(ApiError::broker(e));
                }
            }
        };
        views.push(TierView {
            queue: tier.depth.name.clone(),
            delay_ms: tier.delay_ms,
            listing,
            note,
        });
    }
    Ok(Json(views))
}
