//! The dead-letter index after a fault: it describes the queue again.

use std::time::Duration;

use rabbit_backoff::dead_letters::{DeadLetterFilter, Dlq, GroupSource};
use rabbit_backoff::prelude::*;
use tokio::time::Instant;

use crate::common::depth;
use crate::fault::Fault;
use crate::nodes::{Node, cluster_url, connect_from};

/// After a fault, `dlq groups` counts what the dead-letter queue holds,
/// and within a minute answers from the index (after a pass, when entries
/// were lost with the fault); how many reads and how long, printed.
pub(crate) async fn index_heals(nodes: &[Node], spec: &ConsumerSpec, fault: &Fault) {
    let dlq = Dlq::connect(&cluster_url(nodes, 1), spec)
        .await
        .expect("the operator tools connect");
    let connection = connect_from(nodes, 1).await;
    let started = Instant::now();
    let mut sources = Vec::new();
    loop {
        let report = dlq
            .group_report(&DeadLetterFilter::default())
            .await
            .expect("dlq groups answers");
        let channel = connection.create_channel().await.expect("a channel");
        let held = depth(&channel, &spec.names().dead_letter_queue).await as usize;
        let total: usize = report.groups.iter().map(|g| g.count).sum();
        assert_eq!(
            total, held,
            "{fault:?}: dlq groups counts every dead letter"
        );
        sources.push(format!("{:?}", report.source));
        if report.source == GroupSource::Index {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{fault:?}: the index did not heal within a minute: {sources:?}, last: {}",
            report.reason()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "{fault:?}: the dead-letter index describes the queue again after {} read(s) in {:.1} s \
         ({sources:?})",
        sources.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = connection.close(200, "".into()).await;
    dlq.close().await;
}
