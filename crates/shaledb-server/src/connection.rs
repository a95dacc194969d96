//! One client connection: read requests, run them, write replies, until the client leaves, breaks
//! the protocol, idles too long, exceeds a limit, or the server drains.
//!
//! Memory per client is bounded: requests are parsed as they arrive (one at a time before AUTH,
//! under the tighter unauthenticated limits), replies are written whenever `OUTPUT_FLUSH_BYTES`
//! of them are ready rather than after the whole pipeline, a client whose pending replies exceed
//! `max_output_bytes` or stay unread for `output_stall_timeout` is disconnected, and input and
//! output together are charged to the budget all clients share (`buffers`).

use crate::buffers::BufferCharge;
use crate::clients::ClientSlot;
use crate::commands::{Session, Shared, Waiter};
use crate::config::Executor;
use crate::resp::{parse_request, Output, ProtocolError, RequestLimits};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

const READ_BUFFER_BYTES: usize = 16 << 10;
/// Replies are written once this many bytes of them are ready.
const OUTPUT_FLUSH_BYTES: usize = 64 << 10;
/// Most arguments of one request (Redis's bound too).
const ARGS_MAX: usize = 1 << 20;
/// Most arguments of a request before AUTH (Redis 7.2's bound).
const UNAUTHENTICATED_ARGS_MAX: usize = 10;

type Request = Vec<Bytes>;

/// Why a connection ends early; logged with the client.
enum Close {
    /// The client left or the socket failed.
    Gone,
    /// QUIT, or the server drains.
    Done,
    Limit(String),
}

/// Serves one client until it is done; `_permit` is its maxclients slot.
pub async fn serve_client(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    peer: SocketAddr,
    _permit: ClientSlot,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    shared.connected_clients.fetch_add(1, Ordering::Relaxed);
    shared.metrics.connections.inc();
    let session = shared.new_session();
    let id = session.id;
    tracing::debug!(client = id, %peer, "client connected");
    let mut client = Client {
        shared: shared.clone(),
        session: Some(session),
        input: BytesMut::new(),
        charge: BufferCharge::new(shared.buffer_budget.clone()),
    };
    let close = client.serve(&mut stream, &mut shutdown).await;
    if let Close::Limit(reason) = close {
        shared.metrics.clients_closed_by_limit.inc();
        tracing::warn!(client = id, %peer, %reason, "closing client: limit exceeded");
    }
    let _ = stream.shutdown().await;
    shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
    shared.metrics.connections.dec();
    tracing::debug!(client = id, %peer, "client disconnected");
}

struct Client {
    shared: Arc<Shared>,
    /// Taken while a worker runs the client's requests.
    session: Option<Session>,
    input: BytesMut,
    charge: BufferCharge,
}

impl Client {
    fn authenticated(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|session| session.authenticated)
    }

    fn limits(&self) -> RequestLimits {
        let config = &self.shared.config;
        if self.authenticated() {
            RequestLimits {
                request_bytes_max: config.max_request_bytes,
                bulk_bytes_max: config.max_bulk_bytes,
                args_max: ARGS_MAX,
                unauthenticated: false,
            }
        } else {
            RequestLimits {
                request_bytes_max: config.max_unauthenticated_request_bytes,
                bulk_bytes_max: config.max_unauthenticated_request_bytes,
                args_max: UNAUTHENTICATED_ARGS_MAX,
                unauthenticated: true,
            }
        }
    }

    async fn serve(
        &mut self,
        stream: &mut TcpStream,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Close {
        let mut pending = VecDeque::new();
        loop {
            // Before AUTH, one request at a time: AUTH changes the limits the next is read under.
            let one_only = !self.authenticated();
            let limits = self.limits();
            let broken = take_requests(&mut self.input, &limits, &mut pending, one_only);
            let ran = !pending.is_empty();
            while !pending.is_empty() {
                if let Err(close) = self.run_and_reply(stream, &mut pending).await {
                    return close;
                }
                if let Err(close) = self.wait_unblocked(stream, shutdown, &mut pending).await {
                    return close;
                }
            }
            if let Some(ProtocolError(message)) = broken {
                self.shared.metrics.protocol_errors.inc();
                tracing::info!(client = self.id(), reason = %message, "closing client: protocol error");
                let line = format!("-ERR Protocol error: {message}\r\n");
                let _ = stream.write_all(line.as_bytes()).await;
                return Close::Done;
            }
            if *shutdown.borrow() {
                return Close::Done;
            }
            if one_only && ran {
                // More complete requests may wait in the input, to be read under new limits.
                continue;
            }
            if let Err(close) = self.make_room() {
                return close;
            }
            let read = self
                .shared
                .idle_timeout
                .run(stream.read_buf(&mut self.input));
            tokio::select! {
                read = read => match read {
                    Ok(Ok(0)) | Ok(Err(_)) => return Close::Gone,
                    Ok(Ok(_)) => {}
                    Err(()) => {
                        tracing::info!(client = self.id(), "closing idle client");
                        return Close::Done;
                    }
                },
                _ = shutdown.changed() => return Close::Done,
            }
        }
    }

    /// If the last request blocked, queues it with the server (`commands::blocking`) and waits
    /// for its reply, its timeout (then it answers the command's timeout reply), the client
    /// leaving or the server draining. Requests the client sends meanwhile are buffered.
    async fn wait_unblocked(
        &mut self,
        stream: &mut TcpStream,
        shutdown: &mut watch::Receiver<bool>,
        pending: &mut VecDeque<Request>,
    ) -> Result<(), Close> {
        let Some(session) = self.session.as_mut() else {
            return Ok(());
        };
        let Some(blocked) = session.blocked.take() else {
            return Ok(());
        };
        let Some(request) = pending.pop_front() else {
            return Ok(());
        };
        let protocol = session.protocol;
        let shared = self.shared.clone();
        let deadline = blocked.timeout.map(|timeout| Instant::now() + timeout);
        let (sender, mut receiver) = oneshot::channel();
        let id = shared.waiters.new_id();
        shared.add_waiter(
            Waiter {
                id,
                db: session.db,
                protocol,
                request,
                reply: sender,
            },
            blocked.generation,
        );
        let request_limit = self.limits().request_bytes_max;
        let reply = loop {
            if let Err(close) = self.make_room() {
                shared.waiters.remove(id);
                return Err(close);
            }
            let timeout = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                reply = &mut receiver => match reply {
                    Ok(reply) => break reply,
                    Err(_) => return Err(Close::Gone),
                },
                _ = timeout => {
                    if shared.waiters.remove(id) {
                        break blocked.timeout_reply;
                    }
                    // Served just now: its reply is on its way.
                    match (&mut receiver).await {
                        Ok(reply) => break reply,
                        Err(_) => return Err(Close::Gone),
                    }
                }
                _ = shutdown.changed() => {
                    shared.waiters.remove(id);
                    return Err(Close::Done);
                }
                // What it sends meanwhile is buffered up to one request's limit, then left in
                // the socket until the blocked command is answered.
                read = stream.read_buf(&mut self.input), if self.input.len() < request_limit => {
                    match read {
                        Ok(0) | Err(_) => {
                            shared.waiters.remove(id);
                            return Err(Close::Gone);
                        }
                        Ok(_) => {}
                    }
                }
            }
        };
        let mut output = Output::new();
        reply.encode(protocol, &mut output);
        write_output(stream, &mut output, shared.config.output_stall_timeout).await
    }

    fn id(&self) -> u64 {
        self.session.as_ref().map_or(0, |session| session.id)
    }

    /// Runs requests from `pending` until about `OUTPUT_FLUSH_BYTES` of replies are ready, and
    /// writes them.
    async fn run_and_reply(
        &mut self,
        stream: &mut TcpStream,
        pending: &mut VecDeque<Request>,
    ) -> Result<(), Close> {
        let (mut output, closing) = self.run_requests(pending).await?;
        let config = &self.shared.config;
        if output.len() > config.max_output_bytes {
            return Err(Close::Limit(format!(
                "a reply of {} bytes exceeds max_output_bytes ({})",
                output.len(),
                config.max_output_bytes
            )));
        }
        if !self.charge.set(self.input.capacity() + output.len()) {
            return Err(self.budget_exhausted(output.len()));
        }
        write_output(stream, &mut output, config.output_stall_timeout).await?;
        self.charge.set(self.input.capacity());
        if closing {
            return Err(Close::Done);
        }
        Ok(())
    }

    fn budget_exhausted(&self, wanted: usize) -> Close {
        let budget = &self.shared.buffer_budget;
        Close::Limit(format!(
            "max_client_buffers_bytes ({}) reached: clients hold {} bytes, this one asked for {wanted}",
            budget.max(),
            budget.used()
        ))
    }

    /// Makes room in the input buffer for the next read, charged to the shared budget first.
    /// Grows by half again (not doubling blindly) up to what one request may hold, and shrinks
    /// back once a large request is done.
    fn make_room(&mut self) -> Result<(), Close> {
        let spare = self.input.capacity() - self.input.len();
        if self.input.is_empty() && self.input.capacity() > 4 * READ_BUFFER_BYTES {
            self.input = BytesMut::new();
        } else if spare >= READ_BUFFER_BYTES / 2 {
            return Ok(());
        }
        let wanted = (self.input.len() + READ_BUFFER_BYTES).max(self.input.capacity() * 3 / 2);
        let ceiling = self.limits().request_bytes_max + READ_BUFFER_BYTES;
        let wanted = wanted.min(ceiling.max(self.input.len() + READ_BUFFER_BYTES));
        // While the input is copied both buffers exist: charge both, then the new one alone.
        let during_copy = self.input.capacity() + wanted;
        if !self.charge.set(during_copy) {
            return Err(self.budget_exhausted(during_copy));
        }
        let mut grown = BytesMut::with_capacity(wanted);
        grown.extend_from_slice(&self.input);
        self.input = grown;
        self.charge.set(wanted);
        Ok(())
    }

    /// Runs requests where the configured executor says (see `Executor`); returns the encoded
    /// replies and whether the session asked to close.
    async fn run_requests(
        &mut self,
        pending: &mut VecDeque<Request>,
    ) -> Result<(Output, bool), Close> {
        let mut session = self.session.take().ok_or(Close::Gone)?;
        let shared = &self.shared;
        // Commands that may walk many keys (KEYS, SCAN, INFO, ...) never run on the network
        // threads, whatever the executor: other clients keep being served meanwhile.
        let slow = pending.iter().any(|request| {
            shared
                .command_of(request)
                .is_some_and(|command| command.is_slow())
        });
        let executor = if slow {
            Executor::Pool
        } else {
            shared.config.executor
        };
        let output = match executor {
            Executor::Inline => execute_slice(shared, &mut session, pending),
            Executor::Pool => {
                let permit = shared
                    .pool_slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| Close::Gone)?;
                let shared = shared.clone();
                let mut requests = std::mem::take(pending);
                let joined = tokio::task::spawn_blocking(move || {
                    let output = execute_slice(&shared, &mut session, &mut requests);
                    drop(permit);
                    (session, requests, output)
                })
                .await;
                match joined {
                    Ok((back, rest, output)) => {
                        session = back;
                        *pending = rest;
                        output
                    }
                    Err(error) => {
                        tracing::error!(%error, "a command's worker failed");
                        return Err(Close::Gone);
                    }
                }
            }
        };
        let closing = session.closing;
        if closing {
            pending.clear();
        }
        self.session = Some(session);
        Ok((output, closing))
    }
}

/// Moves every complete request of `input` (only the first, with `one_only`) to `pending`, and
/// returns the protocol error that stopped parsing, if any.
fn take_requests(
    input: &mut BytesMut,
    limits: &RequestLimits,
    pending: &mut VecDeque<Request>,
    one_only: bool,
) -> Option<ProtocolError> {
    loop {
        if one_only && !pending.is_empty() {
            return None;
        }
        match parse_request(input, limits) {
            Ok(Some(args)) if args.is_empty() => {}
            Ok(Some(args)) => pending.push_back(args),
            Ok(None) => return None,
            Err(error) => return Some(error),
        }
    }
}

/// Runs requests of a pipeline in order, encoding the replies, until `OUTPUT_FLUSH_BYTES` of
/// them are ready, the pipeline is done, or one closes the session.
fn execute_slice(
    shared: &Shared,
    session: &mut Session,
    pending: &mut VecDeque<Request>,
) -> Output {
    let mut output = Output::new();
    while let Some(request) = pending.pop_front() {
        let reply = shared.execute(session, &request);
        if session.blocked.is_some() {
            // A blocking command found nothing: the connection queues it with the server
            // (`Client::wait_unblocked`).
            pending.push_front(request);
            break;
        }
        reply.encode(session.protocol, &mut output);
        if session.closing || output.len() >= OUTPUT_FLUSH_BYTES {
            break;
        }
    }
    output
}

/// Writes `output`, giving up when the client leaves a write unaccepted for `stall`.
async fn write_output(
    stream: &mut TcpStream,
    output: &mut Output,
    stall: Duration,
) -> Result<(), Close> {
    for part in output.take() {
        let mut rest = &part[..];
        while !rest.is_empty() {
            match tokio::time::timeout(stall, stream.write(rest)).await {
                Err(_) => {
                    return Err(Close::Limit(format!(
                        "its replies stayed unread for output_stall_timeout ({} s)",
                        stall.as_secs()
                    )))
                }
                Ok(Err(_)) | Ok(Ok(0)) => return Err(Close::Gone),
                Ok(Ok(written)) => rest = &rest[written..],
            }
        }
    }
    Ok(())
}
