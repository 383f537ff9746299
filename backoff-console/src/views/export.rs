//! `GET api/consumers/{queue}/export?text=…&…`: what the search matches,
//! as `rabbit-backoff dlq export --jsonl` writes it, as a file to save.

use std::sync::Arc;

use axum::extract::{Path, State as Shared};
use axum::http::HeaderName;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;

use crate::api_error::ApiError;
use crate::api_query::ApiQuery;
use crate::selection::Search;
use crate::state::State;

/// `GET api/consumers/{queue}/export`: JSON lines, with the number of
/// messages in `x-exported`.
pub(crate) async fn export(
    Shared(state): Shared<Arc<State>>,
    Path(queue): Path<String>,
    ApiQuery(search): ApiQuery<Search>,
) -> Result<impl IntoResponse, ApiError> {
    let filter = search.filter().map_err(ApiError::bad_request)?;
    let (_, exported) = state
        .with_dlq(&queue, |dlq| {
            Box::pin(async move {
                let mut out = Vec::new();
                dlq.export(&filter, &mut out)
                    .await
                    .map(|report| (report, out))
            })
        })
        .await?;
    let (report, out) = exported.map_err(ApiError::broker)?;
    Ok((
        [
            (CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}.dlq.jsonl\"", file_name(&queue)),
            ),
            (
                HeaderName::from_static("x-exported"),
                report.exported.to_string(),
            ),
        ],
        out,
    ))
}

/// `queue` with every character but letters, digits and `._-` as `_`.
fn file_name(queue: &str) -> String {
    queue
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_name_keeps_only_safe_characters() {
        assert_eq!(super::file_name("orders.v2_x-y"), "orders.v2_x-y");
        assert_eq!(super::file_name("a/b\"c d"), "a_b_c_d");
    }
}
