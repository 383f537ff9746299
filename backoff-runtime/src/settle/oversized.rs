//! A copy that cannot fit in a frame with its own headers: an `oversized`
//! dead letter with every header, the delivery rejected as it is, or a
//! dead letter without its largest headers.

use lapin::BasicProperties;
use rabbit_backoff_core::{DeadLetterReason, broker_headroom, header_limit, truncate_error};

use crate::settle::copy_properties::{dead_letter_properties, now_rfc3339};
use crate::settle::encoded_size::content_header_len;
use crate::settle::executor::{Executor, Original};
use crate::settle::settlement::Target;
use crate::settle::shrink_copy::{TooLarge, without_largest_headers};
use crate::transport::Acker;

impl Executor {
    /// No copy of this delivery with its own headers fits where it was
    /// going. In order:
    ///
    /// 1. a dead letter with every header of its own and the article's
    ///    (reason `oversized`), when the dead-letter queue has room for it:
    ///    a retry copy needs more, room for the `x-death` its tier adds;
    /// 2. the delivery rejected into the dead-letter queue as it is, when the
    ///    broker can still dead-letter it (adding `x-death`) within the
    ///    frame: its own headers leave no room for the framework's, and
    ///    `x-death` says when and why (`rejected`);
    /// 3. a dead letter without its largest headers, which
    ///    `x-dropped-headers` names.
    pub(super) async fn settle_oversized(
        &self,
        acker: Acker,
        original: &Original<'_>,
        too_large: TooLarge,
    ) {
        let frame_max = self.settler.frame_max();
        let size = content_header_len(original.properties);
        let why = format!(
            "a copy would need {} bytes of properties and headers, more than the {} allowed \
             in a frame of {frame_max}, even with the framework's own headers shrunk",
            too_large.size, too_large.limit
        );
        let target = self.dead_letter_target();
        let failed_at = now_rfc3339();
        // The properties of an `oversized` dead letter saying `error`.
        let oversized = |error: &str| {
            let dead_letter =
                self.dead_letter(original, DeadLetterReason::Oversized, error, &failed_at);
            dead_letter_properties(original.properties, &dead_letter.headers(), &self.tiers)
        };
        let whole = oversized(&truncate_error(&format!(
            "{why}; dead-lettered instead. Its failure: {}",
            original.error
        )));
        if let Ok(properties) = self.settler.fit(whole, &target) {
            return self
                .oversized_copy(acker, original, &target, properties, &why, &[])
                .await;
        }
        let headroom = broker_headroom(&self.spec.queue, original.exchange, original.routing_key);
        if size + headroom <= header_limit(frame_max) {
            return self.reject(&acker, &why).await;
        }
        let properties = oversized(&truncate_error(&format!(
            "{why}; the message itself takes {size} bytes, too close to the frame for the \
             broker to dead-letter it either. Its failure: {}",
            original.error
        )));
        match without_largest_headers(properties, self.settler.copy_limit(&target)) {
            Some((properties, dropped)) => {
                self.oversized_copy(acker, original, &target, properties, &why, &dropped)
                    .await
            }
            None => self.reject(&acker, &why).await,
        }
    }

    /// Publishes an `oversized` dead letter of `original`, without the
    /// headers `dropped` names, and acks the original once confirmed.
    async fn oversized_copy(
        &self,
        acker: Acker,
        original: &Original<'_>,
        target: &Target<'_>,
        properties: BasicProperties,
        why: &str,
        dropped: &[String],
    ) {
        let published = self
            .publish_copy(target, original.body, properties, true)
            .await;
        if self
            .acked_or_requeued(acker, original, target, published)
            .await
        {
            self.meters.dead_lettered(
                DeadLetterReason::Oversized,
                *original.properties.timestamp(),
            );
            if dropped.is_empty() {
                tracing::error!("{why}; dead-lettered to {}", target.queue);
            } else {
                tracing::error!(
                    "{why}; dead-lettered to {} without the headers {}",
                    target.queue,
                    dropped.join(", ")
                );
            }
        }
    }
}
