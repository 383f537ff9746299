//! The transactional outbox on PostgreSQL: a handler's messages are rows
//! written in its delivery's transaction, published with confirms after the
//! commit (by the process that committed them, or by the relay of any
//! process when that one died first), and deleted once confirmed.

use std::time::Duration;

use lapin::types::FieldTable;
use lapin::types::generation::gen_field_table;
use lapin::types::parsing::parse_field_table;
use sqlx::{PgConnection, PgPool};

use crate::publish::outgoing::Outgoing;
use crate::transport::{Channel, Confirm, Publication};

/// The outbox table.
pub(crate) const TABLE: &str = "rabbit_backoff_outbox";
/// How old an outbox row must be before a relay publishes it: younger ones
/// are being published by the process that committed them.
pub(crate) const RELAY_AFTER: Duration = Duration::from_secs(2);
/// How many rows one relay round takes at most.
const RELAY_BATCH: i64 = 100;

/// One stored message.
type Row = (
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<Vec<u8>>,
    Vec<u8>,
);

const COLUMNS: &str = "id, message_id, exchange, routing_key, correlation_id, headers, body";

/// Stores `message` in the transaction of `conn`; its row id.
pub(crate) async fn insert(
    conn: &mut PgConnection,
    exchange: &str,
    routing_key: &str,
    message_id: &str,
    message: &Outgoing,
) -> Result<i64, sqlx::Error> {
    // Refuses now what could never be published (a message id over 255 bytes).
    message
        .properties(message_id)
        .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let headers = encode_headers(&message.headers)?;
    let sql = format!(
        "INSERT INTO {TABLE} (message_id, exchange, routing_key, correlation_id, headers, body) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id"
    );
    let (id,): (i64,) = sqlx::query_as(&sql)
        .bind(message_id)
        .bind(exchange)
        .bind(routing_key)
        .bind(message.correlation_id.as_deref())
        .bind(headers)
        .bind(&message.body)
        .fetch_one(conn)
        .await?;
    Ok(id)
}

/// Publishes the rows `ids` that nobody else is publishing now, and
/// deletes those the broker confirmed; how many.
pub(crate) async fn dispatch(
    pool: &PgPool,
    ids: &[i64],
    channel: &dyn Channel,
    confirm_timeout: Duration,
) -> Result<usize, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM {TABLE} WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED"
    );
    let mut tx = pool.begin().await?;
    let rows: Vec<Row> = sqlx::query_as(&sql).bind(ids).fetch_all(&mut *tx).await?;
    let published = publish(&mut tx, rows, channel, confirm_timeout).await?;
    tx.commit().await?;
    Ok(published)
}

/// Publishes rows older than [`RELAY_AFTER`] that nobody is publishing now,
/// a batch at a time; how many.
pub(crate) async fn relay(
    pool: &PgPool,
    channel: &dyn Channel,
    confirm_timeout: Duration,
) -> Result<usize, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM {TABLE} WHERE created_at < now() - make_interval(secs => $1) \
         ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
    );
    let mut total = 0;
    loop {
        let mut tx = pool.begin().await?;
        let rows: Vec<Row> = sqlx::query_as(&sql)
            .bind(RELAY_AFTER.as_secs_f64())
            .bind(RELAY_BATCH)
            .fetch_all(&mut *tx)
            .await?;
        let full = rows.len() as i64 == RELAY_BATCH;
        let published = publish(&mut tx, rows, channel, confirm_timeout).await?;
        tx.commit().await?;
        total += published;
        if !full || published == 0 {
            return Ok(total);
        }
    }
}

/// Publishes the locked `rows` in order, all in flight at once, and deletes
/// those confirmed; the others stay for the relay's next round.
async fn publish(
    conn: &mut PgConnection,
    rows: Vec<Row>,
    channel: &dyn Channel,
    confirm_timeout: Duration,
) -> Result<usize, sqlx::Error> {
    let mut pending = Vec::with_capacity(rows.len());
    for (id, message_id, exchange, routing_key, correlation_id, headers, body) in rows {
        let message = Outgoing {
            body,
            message_id: None,
            correlation_id,
            headers: decode_headers(headers.as_deref()),
        };
        let properties = match message.properties(&message_id) {
            Ok(properties) => properties,
            Err(e) => {
                tracing::error!("outbox message {message_id} cannot be published: {e}");
                continue;
            }
        };
        match channel
            .send(Publication::new(
                &exchange,
                &routing_key,
                &message.body,
                properties,
            ))
            .await
        {
            Ok(confirm) => pending.push((id, message_id, exchange, confirm)),
            Err(e) => {
                tracing::warn!(
                    "outbox message {message_id} to {exchange}: {e}; the relay tries again"
                );
                break;
            }
        }
    }
    let mut confirmed = Vec::with_capacity(pending.len());
    for (id, message_id, exchange, confirm) in pending {
        match tokio::time::timeout(confirm_timeout, confirm).await {
            Ok(Ok(Confirm::Ack)) => confirmed.push(id),
            Ok(Ok(other)) => tracing::warn!(
                "outbox message {message_id} to exchange `{exchange}`: {other:?}; the relay tries again"
            ),
            Ok(Err(e)) => tracing::warn!(
                "outbox message {message_id} to exchange `{exchange}`: {e}; the relay tries again"
            ),
            Err(_) => tracing::warn!(
                "outbox message {message_id} to exchange `{exchange}`: no confirm within {confirm_timeout:?}; the relay tries again"
            ),
        }
    }
    if !confirmed.is_empty() {
        sqlx::query(&format!("DELETE FROM {TABLE} WHERE id = ANY($1)"))
            .bind(&confirmed)
            .execute(conn)
            .await?;
    }
    Ok(confirmed.len())
}

/// The headers in AMQP's own encoding, so that every value type survives.
fn encode_headers(headers: &FieldTable) -> Result<Option<Vec<u8>>, sqlx::Error> {
    if headers.inner().is_empty() {
        return Ok(None);
    }
    cookie_factory::r#gen(gen_field_table(headers), Vec::new())
        .map(|(bytes, _)| Some(bytes))
        .map_err(|e| sqlx::Error::Encode(format!("encoding the headers: {e:?}").into()))
}

fn decode_headers(bytes: Option<&[u8]>) -> FieldTable {
    match bytes.map(parse_field_table) {
        Some(Ok((_, table))) => table,
        Some(Err(e)) => {
            tracing::error!(
                "an outbox message's headers cannot be read ({e:?}); sent without them"
            );
            FieldTable::default()
        }
        None => FieldTable::default(),
    }
}

#[cfg(test)]
mod tests {
    use lapin::types::{AMQPValue, ShortString};

    use super::*;

    #[test]
    fn headers_survive_the_table() {
        let mut headers = FieldTable::default();
        headers.insert(
            ShortString::from("tenant"),
            AMQPValue::LongString("acme".into()),
        );
        headers.insert(ShortString::from("n"), AMQPValue::LongLongInt(-7));
        let bytes = encode_headers(&headers).unwrap();
        assert_eq!(decode_headers(bytes.as_deref()), headers);
        assert_eq!(encode_headers(&FieldTable::default()).unwrap(), None);
    }
}
