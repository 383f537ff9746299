//! A purge of a dead-letter queue and a rebuild of its index, through the
//! API: refused without the token or from another site, audited, and the
//! groups read from the index after.

mod common;

use rabbit_backoff_test_support::dead_letter_fixture::Fixture;
use serde_json::json;

use common::*;

/// Purge and rebuild of the index: refused without the token or from
/// another site; with it, the queue purged (or the index rebuilt), each
/// audited, and the next groups read from the index.
#[tokio::test]
async fn a_purge_and_a_rebuild_of_the_index_need_the_token_and_are_audited() {
    let f = Fixture::new("console.purge", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start();
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let json = ("Content-Type", "application/json");
    for action in ["purge", "rebuild-index"] {
        let (status, body) =
            post_json(&console, action, &queue, &[("Origin", &origin), json], "{}");
        assert_eq!(status, 401, "{action} without the token: {body}");
        let (status, body) = post_json(
            &console,
            action,
            &queue,
            &[
                ("Origin", "http://evil.example"),
                json,
                ("Authorization", &bearer),
            ],
            "{}",
        );
        assert_eq!(status, 403, "{action} from another site: {body}");
    }
    let authorized = [
        ("Origin", origin.as_str()),
        json,
        ("Authorization", bearer.as_str()),
    ];
    let (status, body) = post_json(&console, "purge", &queue, &authorized, r#"{"all":1}"#);
    assert_eq!(status, 400, "an unknown field: {body}");
    assert_eq!(f.depths().await, (0, 6), "a refused purge changed nothing");
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit, json!([]), "nothing done, nothing audited");

    // The purge.
    let (status, body) = post_json(&console, "purge", &queue, &authorized, "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["purged"], 6);
    assert_eq!(body["checkpoint"]["kind"], "written", "{body}");
    assert_eq!(body["by"], "operator");
    assert_eq!(f.depths().await, (0, 0));
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit[0]["action"], "purge", "{audit}");
    assert_eq!(audit[0]["who"], "operator");
    assert_eq!(audit[0]["count"], 6);
    assert_eq!(audit[0]["queue"], queue);
    assert_eq!(
        audit[0]["selection"]["dead_letter_queue"],
        f.spec.names().dead_letter_queue
    );
    assert!(
        audit[0]["note"]
            .as_str()
            .unwrap()
            .starts_with("checkpoint written at offset"),
        "{audit}"
    );
    let view = format!("api/consumers/{queue}/dead-letters");
    let (status, after) = get(&console, &view, &[]);
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["groups_source"], "index", "{after}");
    assert_eq!(after["groups"], json!([]));

    // Two dead letters past the index, then a rebuild: a pass that leaves a
    // checkpoint, after which the groups are read from the index.
    f.bypass_the_index("stray-1", "order 1 not found").await;
    f.bypass_the_index("stray-2", "order 2 not found").await;
    let (status, body) = post_json(&console, "rebuild-index", &queue, &authorized, "{}");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["source"], "pass");
    assert_eq!(body["fallback"]["kind"], "rebuild", "{body}");
    assert_eq!(body["checkpoint"]["kind"], "written", "{body}");
    assert_eq!(body["groups"][0]["count"], 2, "{body}");
    assert!(
        body["source_reason"]
            .as_str()
            .unwrap()
            .starts_with("a rebuild of the index was asked for; checkpoint written at offset"),
        "{body}"
    );
    let (_, audit) = get(&console, "api/audit", &[]);
    assert_eq!(audit[0]["action"], "rebuild-index", "{audit}");
    assert_eq!(audit[0]["who"], "operator");
    assert_eq!(audit[0]["count"], 2);
    let (_, after) = get(&console, &view, &[]);
    assert_eq!(after["groups_source"], "index", "{after}");
    assert_eq!(after["groups"][0]["count"], 2, "{after}");
    assert_eq!(after["total"], 2);
    assert_eq!(f.depths().await, (0, 2), "a rebuild moves nothing");

    // A search is grouped by its own pass, and says so.
    let (_, searched) = get(&console, &format!("{view}?text=order"), &[]);
    assert_eq!(searched["groups_source"], "pass", "{searched}");
    assert!(
        searched["groups_source_reason"]
            .as_str()
            .unwrap()
            .contains("search"),
        "{searched}"
    );
}
