//! Reading a range of offsets of the dead-letter index's entries over
//! RabbitMQ's stream protocol (plugin `rabbitmq_stream`, port 5552 by
//! default) rather than AMQP 0-9-1: the broker sends the stream's chunks as
//! they are stored, without turning each message into a delivery, which is
//! what an index read over AMQP spends most of its time on.
//!
//! The commands and their framing are the official `rabbitmq-stream-protocol`
//! crate's; this module opens the connection (peer properties, PLAIN
//! authentication, tune, open), subscribes at the range's first offset,
//! grants credit chunk by chunk and reads each delivered chunk's entries
//! itself ([`Chunk`]), so that each message's AMQP 1.0 bytes are decoded by
//! an AMQP 1.0 library rather than by the protocol crate's message model. (The
//! `rabbitmq-stream-client` crate built on it asks every broker for its
//! command versions as it connects, which RabbitMQ 3.10 does not know and
//! answers by closing the connection.) Each message is turned back into the
//! AMQP 0-9-1 delivery the broker would have sent
//! ([`stream_message`](super::stream_message)), so that the index reads both
//! the same way.
//!
//! TLS is left out: an `amqps://` URL reads the index over AMQP.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

use futures_util::future::BoxFuture;
use lapin::uri::{AMQPScheme, AMQPUri};
use rabbitmq_stream_protocol::codec::{Decoder, Encoder};
use rabbitmq_stream_protocol::commands::close::CloseRequest;
use rabbitmq_stream_protocol::commands::credit::CreditCommand;
use rabbitmq_stream_protocol::commands::open::OpenCommand;
use rabbitmq_stream_protocol::commands::peer_properties::PeerPropertiesCommand;
use rabbitmq_stream_protocol::commands::sasl_authenticate::SaslAuthenticateCommand;
use rabbitmq_stream_protocol::commands::sasl_handshake::SaslHandshakeCommand;
use rabbitmq_stream_protocol::commands::subscribe::{OffsetSpecification, SubscribeCommand};
use rabbitmq_stream_protocol::commands::tune::TunesCommand;
use rabbitmq_stream_protocol::{Request, Response, ResponseCode, ResponseKind};

/// The key of the `deliver` command.
const DELIVER: u16 = 8;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::index::index_stream::marker_of;
use crate::index::stream_message::{BinaryHeaders, Unconvertible, amqp_091_of};
use rabbit_backoff_runtime::transport::{Acker, Delivery, Settle, TransportError};

/// The stream port RabbitMQ listens on by default.
pub const DEFAULT_STREAM_PORT: u16 = 5552;

/// Chunks the broker may send ahead of the one being read.
const CREDIT: u16 = 4;

/// How long a connection may take to open.
const CONNECT: Duration = Duration::from_secs(5);

/// How long a read waits for the broker's next frame.
const IDLE: Duration = Duration::from_secs(30);

/// The subscription of a read (one a connection).
const SUBSCRIPTION: u8 = 1;

/// Where the broker serves the stream protocol: the AMQP URL's host, user,
/// password and virtual host, on the stream port.
#[derive(Clone)]
pub(crate) struct StreamEndpoint {
    host: String,
    port: u16,
    user: String,
    password: String,
    vhost: String,
}

impl fmt::Debug for StreamEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.address())
    }
}

impl StreamEndpoint {
    /// The endpoint of the broker at the AMQP URL `uri`, on `port`; none for
    /// an `amqps://` URL (TLS over the stream protocol is left out) or one
    /// that does not parse.
    pub(crate) fn of(uri: &str, port: u16) -> Option<Self> {
        let uri: AMQPUri = uri.parse().ok()?;
        if uri.scheme == AMQPScheme::AMQPS {
            return None;
        }
        Some(StreamEndpoint {
            host: uri.authority.host,
            port,
            user: uri.authority.userinfo.username,
            password: uri.authority.userinfo.password,
            vhost: uri.vhost,
        })
    }

    /// `host:port`.
    pub(crate) fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Why a read over the stream protocol failed; the range is then read over
/// AMQP.
#[derive(Debug, thiserror::Error)]
#[error("reading '{stream}' over the stream protocol at {address}: {failure}")]
pub(crate) struct StreamReadError {
    /// The stream.
    pub(crate) stream: String,
    /// The stream port's `host:port`.
    pub(crate) address: String,
    /// What went wrong.
    pub(crate) failure: StreamFailure,
}

/// What went wrong reading a stream over the stream protocol.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamFailure {
    /// The port did not answer (nothing listens: the plugin is off).
    #[error("the port does not answer ({0})")]
    Connect(std::io::Error),
    /// The connection broke.
    #[error("the connection broke ({0})")]
    Io(std::io::Error),
    /// The broker refused a command.
    #[error("the broker refused {command} ({code:?})")]
    Refused {
        /// The command.
        command: Command,
        /// The broker's code.
        code: ResponseCode,
    },
    /// The broker closed the connection or sent what was not expected.
    #[error("unexpected answer to {command}")]
    Unexpected {
        /// The command it answered.
        command: Command,
    },
    /// A frame did not decode.
    #[error("a frame did not decode ({0})")]
    Decode(String),
    /// Nothing came from the broker.
    #[error("nothing came in {} s", IDLE.as_secs())]
    Idle,
    /// A message could not be turned back into AMQP 0-9-1.
    #[error("the message at offset {offset}: {reason}")]
    Message {
        /// Its offset.
        offset: u64,
        /// Why.
        reason: Unconvertible,
    },
}

/// The commands a read sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// `peer_properties`.
    PeerProperties,
    /// `sasl_handshake`.
    SaslHandshake,
    /// `sasl_authenticate`.
    SaslAuthenticate,
    /// `tune` (sent by the broker first).
    Tune,
    /// `open`.
    Open,
    /// `subscribe`.
    Subscribe,
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Command::PeerProperties => "peer_properties",
            Command::SaslHandshake => "sasl_handshake",
            Command::SaslAuthenticate => "sasl_authenticate",
            Command::Tune => "tune",
            Command::Open => "open",
            Command::Subscribe => "subscribe",
        })
    }
}

/// Reads the messages of `stream` at the offsets `range` over the stream
/// protocol at `endpoint`, calling `each` with each one but the end markers
/// as the AMQP 0-9-1 delivery the broker would have sent for it; the
/// range's end must be in the stream (a read stops at the first message at
/// or past it).
pub(crate) async fn read_range(
    endpoint: &StreamEndpoint,
    stream: &str,
    range: Range<u64>,
    mut each: impl FnMut(&Delivery),
) -> Result<(), StreamReadError> {
    let failed = |failure| StreamReadError {
        stream: stream.to_owned(),
        address: endpoint.address(),
        failure,
    };
    if range.is_empty() {
        return Ok(());
    }
    let (mut session, binary) = Session::open(endpoint).await.map_err(failed)?;
    let result = async {
        let id = session.next_id();
        session
            .call(
                SubscribeCommand::new(
                    id,
                    SUBSCRIPTION,
                    stream.to_owned(),
                    OffsetSpecification::Offset(range.start),
                    CREDIT,
                    HashMap::new(),
                ),
                Command::Subscribe,
            )
            .await?;
        loop {
            let Incoming::Chunk(chunk) = session.receive().await? else {
                continue;
            };
            session
                .send(CreditCommand::new(SUBSCRIPTION, 1))
                .await
                .map_err(StreamFailure::Io)?;
            for (i, entry) in chunk.records.iter().enumerate() {
                let offset = chunk.first_offset + i as u64;
                // The broker starts at the chunk that holds the offset asked for.
                if offset < range.start {
                    continue;
                }
                if offset >= range.end {
                    return Ok(());
                }
                let (properties, data) = entry
                    .clone()
                    .and_then(|range| amqp_091_of(&chunk.data[range], binary))
                    .map_err(|reason| StreamFailure::Message { offset, reason })?;
                // The end markers of earlier reads are no entries.
                if marker_of(&properties).is_some() {
                    continue;
                }
                each(
                    &Delivery::new(data, Acker::new(Unsettled))
                        .with_route("", stream)
                        .with_properties(properties),
                );
            }
        }
    }
    .await;
    session.close().await;
    result.map_err(failed)
}

/// A connection speaking the stream protocol.
struct Session {
    socket: TcpStream,
    /// What was read and not yet decoded, from `start`.
    buffer: Vec<u8>,
    start: usize,
    correlation: u32,
}

impl Session {
    /// Connects and opens the virtual host; with how the broker gives back
    /// binary headers (from its version).
    async fn open(endpoint: &StreamEndpoint) -> Result<(Self, BinaryHeaders), StreamFailure> {
        let socket = tokio::time::timeout(
            CONNECT,
            TcpStream::connect((endpoint.host.as_str(), endpoint.port)),
        )
        .await
        .map_err(|_| {
            StreamFailure::Connect(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer in {} s", CONNECT.as_secs()),
            ))
        })?
        .map_err(StreamFailure::Connect)?;
        let _ = socket.set_nodelay(true);
        let mut session = Session {
            socket,
            buffer: Vec::with_capacity(1 << 20),
            start: 0,
            correlation: 0,
        };
        let id = session.next_id();
        let peer = session
            .call(
                PeerPropertiesCommand::new(id, HashMap::new()),
                Command::PeerProperties,
            )
            .await?;
        let binary = match peer.kind_ref() {
            ResponseKind::PeerProperties(peer)
                if peer
                    .server_properties
                    .get("version")
                    .is_some_and(|v| v.starts_with("3.")) =>
            {
                BinaryHeaders::ByteArray
            }
            _ => BinaryHeaders::LongString,
        };
        let id = session.next_id();
        session
            .call(SaslHandshakeCommand::new(id), Command::SaslHandshake)
            .await?;
        let plain = format!("\0{}\0{}", endpoint.user, endpoint.password);
        let id = session.next_id();
        session
            .call(
                SaslAuthenticateCommand::new(id, "PLAIN".to_owned(), plain.into_bytes()),
                Command::SaslAuthenticate,
            )
            .await?;
        let tune = session.receive().await?;
        let Incoming::Response(tune) = tune else {
            return Err(StreamFailure::Unexpected {
                command: Command::Tune,
            });
        };
        let ResponseKind::Tunes(tune) = tune.kind_ref() else {
            return Err(StreamFailure::Unexpected {
                command: Command::Tune,
            });
        };
        session
            .send(TunesCommand::new(tune.max_frame_size, tune.heartbeat))
            .await
            .map_err(StreamFailure::Io)?;
        let id = session.next_id();
        session
            .call(OpenCommand::new(id, endpoint.vhost.clone()), Command::Open)
            .await?;
        Ok((session, binary))
    }

    /// The correlation id of the next command.
    fn next_id(&mut self) -> u32 {
        self.correlation += 1;
        self.correlation
    }

    /// Sends `request`, framed.
    async fn send(&mut self, request: impl Into<Request>) -> std::io::Result<()> {
        let request: Request = request.into();
        let mut frame = Vec::with_capacity(request.encoded_size() as usize + 4);
        request
            .encode(&mut frame)
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        self.socket.write_all(&frame).await
    }

    /// Sends `request` and reads until its answer (chunks and heartbeats
    /// before it are skipped), which must be a success.
    async fn call(
        &mut self,
        request: impl Into<Request>,
        command: Command,
    ) -> Result<Response, StreamFailure> {
        self.send(request).await.map_err(StreamFailure::Io)?;
        loop {
            let Incoming::Response(response) = self.receive().await? else {
                continue;
            };
            let code = match response.kind_ref() {
                ResponseKind::Deliver(_) | ResponseKind::Heartbeat(_) => continue,
                ResponseKind::Tunes(_) if command == Command::SaslAuthenticate => {
                    return Err(StreamFailure::Unexpected { command });
                }
                ResponseKind::Generic(generic) => generic.code().clone(),
                ResponseKind::Open(open) => open.code().clone(),
                ResponseKind::PeerProperties(_) | ResponseKind::SaslHandshake(_) => {
                    ResponseCode::Ok
                }
                _ => return Err(StreamFailure::Unexpected { command }),
            };
            if code != ResponseCode::Ok {
                return Err(StreamFailure::Refused { command, code });
            }
            return Ok(response);
        }
    }

    /// The next frame from the broker: a chunk, read here, or another
    /// answer, decoded by the protocol crate.
    async fn receive(&mut self) -> Result<Incoming, StreamFailure> {
        loop {
            let held = &self.buffer[self.start..];
            if held.len() >= 4 {
                let len = u32::from_be_bytes([held[0], held[1], held[2], held[3]]) as usize;
                if held.len() >= 4 + len {
                    let frame = &held[..4 + len];
                    let incoming =
                        if len >= 2 && u16::from_be_bytes([frame[4], frame[5]]) == DELIVER {
                            Incoming::Chunk(Chunk::of(&frame[4..])?)
                        } else {
                            let (_, response) = Response::decode(frame)
                                .map_err(|e| StreamFailure::Decode(format!("{e:?}")))?;
                            Incoming::Response(response)
                        };
                    self.start += 4 + len;
                    return Ok(incoming);
                }
            }
            // Keep what is held at the front, then read more.
            if self.start > 0 {
                self.buffer.drain(..self.start);
                self.start = 0;
            }
            if self.buffer.capacity() - self.buffer.len() < 64 * 1024 {
                self.buffer.reserve(1 << 20);
            }
            let read = tokio::time::timeout(IDLE, self.socket.read_buf(&mut self.buffer))
                .await
                .map_err(|_| StreamFailure::Idle)?
                .map_err(StreamFailure::Io)?;
            if read == 0 {
                return Err(StreamFailure::Io(std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                )));
            }
        }
    }

    /// Closes the connection, waiting briefly for the broker's answer.
    async fn close(mut self) {
        let id = self.next_id();
        if self
            .send(CloseRequest::new(id, ResponseCode::Ok, "done".to_owned()))
            .await
            .is_err()
        {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Ok(incoming) = self.receive().await {
                if matches!(&incoming, Incoming::Response(r) if matches!(r.kind_ref(), ResponseKind::Close(_)))
                {
                    break;
                }
            }
        })
        .await;
        let _ = self.socket.shutdown().await;
    }
}

/// A frame from the broker.
enum Incoming {
    /// A chunk of the subscription (`deliver`).
    Chunk(Chunk),
    /// Any other frame.
    Response(Response),
}

/// A chunk delivered by the broker, as osiris stores it: a header, then
/// entries, each either simple (a 4-byte size with its top bit clear, then
/// one record's bytes: an AMQP 1.0 message) or a sub-batch (a byte whose top
/// bit is set and which names the compression, a 2-byte record count, the
/// 4-byte uncompressed and stored sizes, then several records, maybe
/// compressed).
struct Chunk {
    /// The offset of its first record.
    first_offset: u64,
    /// The frame's bytes.
    data: Vec<u8>,
    /// Each record's bytes in `data`, in offset order; a record in a
    /// sub-batch is not read here.
    records: Vec<Result<Range<usize>, Unconvertible>>,
}

impl Chunk {
    /// The chunk of the `deliver` frame `frame` (from its key, without its
    /// size).
    fn of(frame: &[u8]) -> Result<Chunk, StreamFailure> {
        let short = || StreamFailure::Decode("a chunk is cut short".to_owned());
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<Range<usize>, StreamFailure> {
            let range = at..at
                .checked_add(n)
                .filter(|end| *end <= frame.len())
                .ok_or_else(short)?;
            at = range.end;
            Ok(range)
        };
        let number = |range: Range<usize>| {
            frame[range]
                .iter()
                .fold(0u64, |n, b| (n << 8) | u64::from(*b))
        };
        take(2)?; // key
        let version = number(take(2)?);
        take(1)?; // subscription
        if version >= 2 {
            take(8)?; // committed offset
        }
        take(1)?; // magic and version
        take(1)?; // chunk type
        take(2)?; // entries
        let record_count = number(take(4)?) as usize;
        take(8)?; // timestamp
        take(8)?; // epoch
        let first_offset = number(take(8)?);
        take(4)?; // CRC
        let data_length = number(take(4)?) as usize;
        take(4)?; // trailer length
        take(4)?; // reserved
        let data = take(data_length)?;
        let mut records = Vec::with_capacity(record_count);
        let mut at = data.start;
        while at < data.end && records.len() < record_count {
            let head = frame[at];
            if head & 0x80 == 0 {
                let size = frame.get(at..at + 4).ok_or_else(short)?;
                let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
                let start = at + 4;
                let end = start
                    .checked_add(size)
                    .filter(|end| *end <= data.end)
                    .ok_or_else(short)?;
                records.push(Ok(start..end));
                at = end;
            } else {
                let header = frame.get(at..at + 11).ok_or_else(short)?;
                let count = u16::from_be_bytes([header[1], header[2]]) as usize;
                let stored =
                    u32::from_be_bytes([header[7], header[8], header[9], header[10]]) as usize;
                records.extend((0..count).map(|_| Err(Unconvertible::SubBatch)));
                at = (at + 11).checked_add(stored).ok_or_else(short)?;
            }
        }
        Ok(Chunk {
            first_offset,
            data: frame.to_vec(),
            records,
        })
    }
}

/// The settlement of a message read over the stream protocol: there is
/// none (a stream keeps its messages, and credit is granted by chunk).
pub(crate) struct Unsettled;

impl Settle for Unsettled {
    fn delivery_tag(&self) -> u64 {
        0
    }

    fn ack(&self, _multiple: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async { Ok(()) })
    }

    fn nack(&self, _requeue: bool) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async { Ok(()) })
    }

    fn fail(&self) -> BoxFuture<'_, Result<(), TransportError>> {
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use lapin::BasicProperties;
    use lapin::options::{
        BasicConsumeOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
        QueueDeclareOptions, QueueDeleteOptions,
    };
    use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString};

    use rabbit_backoff_test_support::broker::{connect, stream_port, url};

    /// A message published over AMQP 0-9-1 with every property the index
    /// reads and headers of each simple type, read back from the bytes the
    /// broker stored (over the stream protocol), converts to the properties
    /// and body the broker delivers for it over AMQP. Needs a broker
    /// (`AMQP_URL`, `RABBITMQ_STREAM_PORT`), as the workspace's suites do.
    #[tokio::test]
    async fn a_stored_message_converts_as_the_broker_delivers_it() {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let stream = format!(
            "stream-message-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("stream".into()),
        );
        channel
            .queue_declare(
                stream.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                arguments,
            )
            .await
            .unwrap();
        let mut headers = FieldTable::default();
        headers.insert("x-error".into(), AMQPValue::LongString("db down".into()));
        headers.insert("x-retry-count".into(), AMQPValue::LongLongInt(-3));
        headers.insert("weight".into(), AMQPValue::Double(0.1));
        headers.insert("urgent".into(), AMQPValue::Boolean(true));
        headers.insert(
            "raw".into(),
            AMQPValue::ByteArray(ByteArray::from(vec![0u8, 1, 255])),
        );
        headers.insert("seen-at".into(), AMQPValue::Timestamp(1_700_000_007));
        headers.insert(
            "note".into(),
            AMQPValue::LongString(LongString::from("é \"quoted\"")),
        );
        let published = BasicProperties::default()
            .with_message_id("m-\"1\" é".into())
            .with_correlation_id("c-1".into())
            .with_timestamp(1_700_000_100)
            .with_type("order".into())
            .with_app_id("shop".into())
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(headers);
        // Then the same with a priority and an expiration (a header section
        // on 4.x, annotations on 3.10), then the end of the range read.
        let prioritised = published
            .clone()
            .with_priority(7)
            .with_expiration("600000".into());
        let messages = [
            (&b"{\"n\": 1}"[..], published.clone()),
            (b"{\"n\": 2}", prioritised),
            (b"end", published),
        ];
        for (body, properties) in &messages {
            channel
                .basic_publish(
                    "".into(),
                    stream.as_str().into(),
                    BasicPublishOptions::default(),
                    body,
                    properties.clone(),
                )
                .await
                .unwrap()
                .await
                .unwrap();
        }

        // Over AMQP, from the first offset.
        channel
            .basic_qos(10, BasicQosOptions::default())
            .await
            .unwrap();
        let mut from = FieldTable::default();
        from.insert(
            "x-stream-offset".into(),
            AMQPValue::LongString("first".into()),
        );
        let mut consumer = channel
            .basic_consume(
                stream.as_str().into(),
                "stream-message-test".into(),
                BasicConsumeOptions::default(),
                from,
            )
            .await
            .unwrap();
        let mut expected = Vec::new();
        for offset in 0..2 {
            let delivered = tokio::time::timeout(Duration::from_secs(15), consumer.next())
                .await
                .expect("a delivery")
                .expect("a delivery")
                .expect("a delivery");
            let given = delivered.properties.headers().clone().expect("headers");
            assert_eq!(
                given.inner().get("x-stream-offset"),
                Some(&AMQPValue::LongLongInt(offset))
            );
            let mut headers = FieldTable::default();
            for (name, value) in given.inner() {
                if name.as_str() != "x-stream-offset" {
                    headers.insert(name.clone(), value.clone());
                }
            }
            expected.push((
                delivered.properties.clone().with_headers(headers),
                delivered.data.clone(),
            ));
        }

        // Over the stream protocol.
        let endpoint = StreamEndpoint::of(&url(), stream_port()).expect("an endpoint");
        let mut read = Vec::new();
        let outcome = read_range(&endpoint, &stream, 0..2, |delivery| {
            read.push((delivery.properties.clone(), delivery.data.clone()));
        })
        .await;

        let _ = channel
            .queue_delete(stream.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = connection.close(200, "".into()).await;

        outcome.unwrap();
        assert_eq!(read, expected);
        assert_eq!(*read[1].0.priority(), Some(7));
    }
}
