//! The keys `#[backoff_consumer]` accepts and the book's key table
//! (docs/attributes.md, which is also the attribute's rustdoc) list the same
//! keys: a key added to the macro and forgotten in the table (or the
//! reverse) fails here.

use std::collections::BTreeSet;

use rabbit_backoff::ATTRIBUTE_KEYS;

/// The keys named in the first column of the markdown table whose header row
/// is `| key | meaning | default |`, each line stripped of `prefix` first.
fn table_keys(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut lines = text
        .lines()
        .map(|line| line.trim_start().trim_start_matches(prefix).trim());
    assert!(
        lines.any(|line| line == "| key | meaning | default |"),
        "no `| key | meaning | default |` table found"
    );
    let mut keys = BTreeSet::new();
    for line in lines.skip(1).take_while(|line| line.starts_with('|')) {
        let first = line.split('|').nth(1).unwrap_or_default();
        // `exchange`, `exchange_type` / `a` / `b`: every backticked word.
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 1 {
                keys.insert(part.to_owned());
            }
        }
    }
    keys
}

fn accepted() -> BTreeSet<String> {
    ATTRIBUTE_KEYS.iter().map(|key| (*key).to_owned()).collect()
}

fn differences(table: &BTreeSet<String>) -> String {
    let accepted = accepted();
    format!(
        "accepted by the macro but missing from the table: {:?}; in the table but not accepted: {:?}",
        accepted.difference(table).collect::<Vec<_>>(),
        table.difference(&accepted).collect::<Vec<_>>()
    )
}

#[test]
fn the_book_key_table_lists_exactly_the_accepted_keys() {
    let page = include_str!("../docs/attributes.md");
    let table = table_keys(page, "");
    assert_eq!(
        table,
        accepted(),
        "docs/attributes.md: {}",
        differences(&table)
    );
}

#[test]
fn the_attribute_documentation_is_the_book_page() {
    // The attribute's rustdoc includes docs/attributes.md rather than a copy
    // of its table, so the table the test above checks is the one both show.
    let lib = include_str!("../src/lib.rs");
    assert!(
        lib.contains("#[doc = include_str!(\"../docs/attributes.md\")]\npub use rabbit_backoff_macros::backoff_consumer;"),
        "src/lib.rs: the attribute's documentation no longer includes docs/attributes.md"
    );
}

#[test]
fn an_unknown_key_is_refused_by_the_macro_with_the_accepted_list() {
    // The compile-fail test `tests/ui/unknown_key.rs` shows the macro's
    // message; here the list it prints is held to the same constant.
    let stderr = include_str!("ui/unknown_key.stderr");
    let listed = stderr
        .split("the keys are: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("the unknown-key error lists the keys");
    let listed: BTreeSet<String> = listed.split(", ").map(str::to_owned).collect();
    assert_eq!(listed, accepted(), "{}", differences(&listed));
}
