//! The history checker of the partition tests (tests/common/history.rs):
//! pure logic, no broker.

#[path = "common/history.rs"]
mod history;

use history::{Expect, History};

/// Ten confirmed messages, 0-7 handled once each, 8 and 9 dead-lettered.
fn clean() -> History {
    let mut h = History::default();
    for id in 0..10 {
        let expect = if id < 8 {
            Expect::Handled
        } else {
            Expect::DeadLettered
        };
        h.confirmed(id, expect);
        h.call(id, 0);
        if id < 8 {
            h.effect(id);
        } else {
            h.dead_letter(id, Some("permanent".into()));
        }
    }
    h
}

#[test]
fn a_run_where_every_confirmed_message_ended_once_is_clean() {
    let report = clean().check();
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        (report.confirmed, report.handled, report.dead_lettered),
        (10, 8, 2)
    );
    assert_eq!(report.duplicate_deliveries, 0);
}

#[test]
fn a_confirmed_message_with_neither_effect_nor_dead_letter_is_lost() {
    let mut h = clean();
    h.confirmed(10, Expect::Handled);
    h.call(10, 0);
    let report = h.check();
    assert_eq!(report.lost, vec![10]);
    assert!(!report.is_clean());
    assert!(report.to_string().contains("lost: [10]"), "{report}");
}

#[test]
fn a_second_effect_row_is_a_duplicate_effect_even_of_an_unconfirmed_message() {
    let mut h = clean();
    h.effect(3);
    // Published, its confirm lost, handled twice.
    h.effect(50);
    h.effect(50);
    let report = h.check();
    assert_eq!(report.duplicate_effects, vec![(3, 2), (50, 2)]);
    assert_eq!(report.unconfirmed_taken, 1);
    assert!(!report.is_clean());
}

#[test]
fn a_redelivery_counts_as_a_duplicate_delivery_but_is_clean_with_one_effect() {
    let mut h = clean();
    h.call(4, 0);
    h.call(4, 0);
    // A retry is a new attempt, not a duplicate.
    h.call(5, 1);
    let report = h.check();
    assert_eq!(report.duplicate_deliveries, 2);
    assert!(report.is_clean(), "{report}");
}

#[test]
fn dead_letters_need_a_reason_and_one_copy_and_the_outcome_the_job_says() {
    let mut h = clean();
    h.dead_letter(8, Some("permanent".into()));
    h.dead_letter(9, None);
    h.confirmed(11, Expect::Handled);
    h.dead_letter(11, Some("exhausted".into()));
    h.confirmed(12, Expect::DeadLettered);
    h.effect(12);
    h.confirmed(13, Expect::Handled);
    h.effect(13);
    h.dead_letter(13, Some("permanent".into()));
    let report = h.check();
    assert_eq!(report.duplicate_dead_letters, vec![(8, 2), (9, 2)]);
    assert_eq!(report.dead_without_reason, vec![9]);
    assert_eq!(report.wrong_outcome, vec![11, 12]);
    assert_eq!(report.both, vec![13]);
    assert!(!report.is_clean());
}

#[test]
fn a_dead_letter_sent_twice_is_counted_but_clean() {
    let mut h = clean();
    h.dead_letter(8, Some("permanent".into()));
    let report = h.check();
    assert_eq!(report.duplicate_dead_letters, vec![(8, 2)]);
    assert_eq!(report.dead_lettered, 2);
    assert!(report.is_clean(), "{report}");
    assert!(
        report
            .to_string()
            .contains("duplicate dead letters (id, copies): [(8, 2)]"),
        "{report}"
    );
}
