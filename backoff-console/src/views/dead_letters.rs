//! `GET api/consumers/{queue}/dead-letters?text=…&failed_after=…&failed_before=…&group=…&offset=…&limit=…`:
//! everything the page shows of a dead-letter queue (groups, chart, the
//! number of matches and one page of them) from one pass over it.

use std::sync::Arc;

use axum::extract::{Path, State as Shared};
use rabbit_backoff_dead_letters::{
    Chart, DeadLetterFilter, DeadLetterGroup, DeadLetterMessage, GroupSource, GroupTally, Timeline,
};
use serde::{Deserialize, Serialize};

use super::{MAX_LISTED, listed};
use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::selection::Search;
use crate::shared_json::SharedJson;
use crate::state::State;

/// The query of the dead-letters view: a search and a page.
#[derive(Debug, Deserialize, Serialize)]
pub(crate) struct ViewQuery {
    #[serde(flatten)]
    search: Search,
    offset: Option<usize>,
    limit: Option<usize>,
}

/// Everything the page shows of a dead-letter queue, from one pass.
#[derive(Debug, Serialize)]
pub(crate) struct DeadLetterView {
    /// Which pass of this console read it: equal reads in flight share one.
    pass: u64,
    /// Messages in the queue.
    depth: usize,
    /// The groups of the messages the search (without its group) matches.
    groups: Vec<DeadLetterGroup>,
    /// Where the groups were read from: `index` or `pass`.
    groups_source: GroupSource,
    /// Why, in a few words ([`rabbit_backoff_dead_letters::GroupReport::reason`], or why a search is
    /// grouped by the pass that reads its messages).
    groups_source_reason: String,
    /// Those messages per group over time.
    chart: Chart,
    /// Messages the whole search (group included) matches.
    total: usize,
    /// Where the page starts among them.
    offset: usize,
    /// The page: at most `limit` of them, in queue order.
    messages: Vec<DeadLetterMessage>,
}

/// Why the groups of a search come from the view's own pass.
const SEARCH_GROUPED_BY_ITS_PASS: &str =
    "a search is grouped by the pass that reads its messages for the page and the chart";

/// `GET api/consumers/{queue}/dead-letters?text=…&failed_after=…&failed_before=…&group=…&offset=…&limit=…`:
/// groups, chart, the number of matches and one page of them, from one pass
/// over the queue; equal reads in flight share it. Without a search (text
/// or times), the groups are read through [`Dlq::group_report`](rabbit_backoff_dead_letters::Dlq::group_report) first: from
/// the dead-letter index when it is in step, else with a pass that leaves
/// it a checkpoint; with a search, from the view's own pass.
pub(crate) async fn dead_letters(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    ApiQuery(query): ApiQuery<ViewQuery>,
) -> Result<SharedJson<DeadLetterView>, ApiError> {
    let key = super::read_key(&queue, &query);
    let wide = query
        .search
        .without_group()
        .filter()
        .map_err(ApiError::bad_request)?;
    let searching = query.search.without_group() != Search::default();
    let group = query.search.group.clone().filter(|g| !g.is_empty());
    let offset = query.offset.unwrap_or(0);
    let limit = listed(query.limit, MAX_LISTED);
    let passes = Arc::clone(&state);
    state
        .shared_read(key, queue, |dlq| {
            Box::pin(async move {
                let pass = passes
                    .passes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                let report = if searching {
                    None
                } else {
                    let report = dlq.group_report(&DeadLetterFilter::default()).await;
                    Some(report.map_err(ApiError::broker)?)
                };
                let mut tally = GroupTally::default();
                let mut timeline = Timeline::default();
                let mut total = 0;
                let mut page = Vec::new();
                let mut visit = |_: &_, message: &DeadLetterMessage| {
                    tally.add(message);
                    timeline.add(&message.group, message.failed_at.as_deref());
                    if group.as_ref().is_none_or(|g| *g == message.group) {
                        if total >= offset && page.len() < limit {
                            page.push(message.clone());
                        }
                        total += 1;
                    }
                    Ok(())
                };
                let visited = dlq.visit(&wide, &mut visit).await;
                let visited = visited.map_err(ApiError::broker)?;
                let depth = visited.kept;
                let (groups, groups_source, groups_source_reason) = match report {
                    Some(report) => {
                        let reason = report.reason();
                        (report.groups, report.source, reason)
                    }
                    None => (
                        tally.into_groups(),
                        GroupSource::Pass,
                        SEARCH_GROUPED_BY_ITS_PASS.to_owned(),
                    ),
                };
                Ok(DeadLetterView {
                    pass,
                    depth,
                    groups,
                    groups_source,
                    groups_source_reason,
                    chart: timeline.chart(),
                    total,
                    offset,
                    messages: page,
                })
            })
        })
        .await
}
