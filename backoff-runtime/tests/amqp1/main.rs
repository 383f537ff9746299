//! The AMQP 1.0 consume path (feature `amqp1`) against the broker
//! `AMQP_URL` names: messages published over AMQP 0-9-1 to a quorum queue,
//! consumed through the holding channels of the transport's `Connection`
//! (sessions of the AMQP 1.0 connection it pairs itself with), settled
//! with each outcome.
//!
//! On RabbitMQ 4.3 and later everything is asserted, the held-back
//! `modified` included; 4.0 to 4.2 the same but the hold-back (they
//! redeliver at once); before 4.0 (no AMQP 1.0 without its plugin) that
//! the connection is refused, saying why. Nothing is skipped silently.
//!
//! The tests of this file run one at a time: one of them closes the
//! broker side of its AMQP 1.0 connection.
//!
//! One binary, a module per behaviour: [`settling`] (each outcome, multiple
//! acks, cancel and get), [`connection`] (its loss, its vhost) and
//! [`messages`] (what AMQP 1.0 can send that AMQP 0-9-1 cannot, a backlog
//! settled out of order); the broker and the quorum queue they share in
//! [`broker`] and [`fixture`].

use std::time::Duration;

use tokio::sync::Mutex;

mod broker;
mod connection;
mod fixture;
mod messages;
mod settling;

/// One test at a time (see the module's documentation).
static SERIAL: Mutex<()> = Mutex::const_new(());

/// How long a test waits for a delivery that should come.
const PATIENCE: Duration = Duration::from_secs(15);
/// How late a held-back redelivery may come on a busy machine.
const LATE_BOUND: Duration = Duration::from_millis(1500);
