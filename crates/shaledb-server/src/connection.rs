//! One client connection: read requests, run them, write replies, until the client leaves, breaks
//! the protocol, idles too long, exceeds a limit, or the server drains.
//!
//! Memory per client is bounded: requests are parsed as they arrive (one at a time before AUTH,
//! under the tighter unauthenticated limits), replies are written whenever `OUTPUT_FLUSH_BYTES`
//! of them are ready rather than after the whole pipeline, a client whose pending replies exceed
//! `max_output_bytes` or stay unread for `output_stall_timeout` is disconnected, and input and
//! output together are charged to the budget all clients share (`buffers`). A string value
//! longer than a chunk is not buffered: its bytes go to a blob in the engine as they arrive
//! (`Partial`), and a long string is written to the socket as its chunks are read.

use crate::buffers::BufferCharge;
use crate::clients::{ClientSlot, InputSignal};
use crate::combiner::Finished;
use crate::commands::{takes_streamed_value, PipelineRun, Request, Session, Shared, Waiter};
use crate::config::Executor;
use crate::keyspace::{StagedBlob, Upload, CHUNK_BYTES};
use crate::network_threads::{ConnectionTask, NetworkThreads, Placement};
use crate::resp::{
    continue_request, parse_request, Frame, Output, Part, ProtocolError, Reply, RequestLimits,
};
use bytes::{Buf, Bytes, BytesMut};
use shaledb::SyncPoint;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

const READ_BUFFER_BYTES: usize = 16 << 10;
/// Replies are written once this many bytes of them are ready.
const OUTPUT_FLUSH_BYTES: usize = 64 << 10;
/// Bytes reserved per request for a slice's replies before they are encoded: a status line, a
/// number or a short value fits.
const SHORT_REPLY_BYTES: usize = 16;
/// A single request whose run took this long has its reply written after the other ready
/// connections ran (`run_and_reply`): in that time a client reading many connections has taken
/// the last reply and gone back to sleep, so a reply written at once would wake it again for
/// itself alone. A shorter request's reply is written at once, as the yield costs more than
/// the wake-up it saves (docs/SERVER.md, "Replies in bursts").
const BURST_AFTER: Duration = Duration::from_micros(4);
/// Most arguments of one request (Redis's bound too).
const ARGS_MAX: usize = 1 << 20;
/// Most arguments of a request before AUTH (Redis 7.2's bound).
const UNAUTHENTICATED_ARGS_MAX: usize = 10;

/// Why a connection ends early; logged with the client.
enum Close {
    /// The client left or the socket failed.
    Gone,
    /// QUIT, or the server drains.
    Done,
    Limit(String),
    /// The server could not do its part (a long value it could not store or read): logged as
    /// an error.
    Failed(String),
    /// Not an end: the connection goes on on another network thread (`network_threads`).
    Move(Placement),
}

/// Serves one client until it is done; `permit` is its maxclients slot.
pub fn serve_client(
    shared: Arc<Shared>,
    network: Arc<NetworkThreads>,
    stream: TcpStream,
    placement: Placement,
    peer: SocketAddr,
    permit: ClientSlot,
    shutdown: watch::Receiver<bool>,
) -> ConnectionTask {
    let _ = stream.set_nodelay(true);
    shared.connected_clients.fetch_add(1, Ordering::Relaxed);
    shared.metrics.connections.inc();
    let session = shared.new_session();
    tracing::debug!(client = session.id, %peer, "client connected");
    let client = Client {
        shared: shared.clone(),
        session: Some(session),
        input: BytesMut::new(),
        partial: None,
        charge: BufferCharge::new(shared.buffer_budget.clone()),
    };
    let connection = Connection {
        input_signal: shared.input_waits.signal(),
        client,
        network,
        peer,
        _permit: permit,
        shutdown,
    };
    run_connection(connection, stream, placement)
}

/// What a connection keeps when it moves to another network thread.
struct Connection {
    client: Client,
    network: Arc<NetworkThreads>,
    peer: SocketAddr,
    /// Its maxclients slot, held until it ends.
    _permit: ClientSlot,
    shutdown: watch::Receiver<bool>,
    /// Wakes it while it waits for input (a new idle timeout, the server's drain).
    input_signal: InputSignal,
}

/// Serves `connection` on the thread of `placement` until it ends or moves on.
fn run_connection(
    mut connection: Connection,
    mut stream: TcpStream,
    placement: Placement,
) -> ConnectionTask {
    Box::pin(async move {
        let close = connection
            .client
            .serve(
                &mut stream,
                &mut connection.shutdown,
                &connection.input_signal,
                &connection.network,
                placement,
            )
            .await;
        let (shared, id, peer) = (
            connection.client.shared.clone(),
            connection.client.id(),
            connection.peer,
        );
        match close {
            Close::Move(home) => {
                let network = connection.network.clone();
                return network.move_to(home, stream, move |stream, placement| {
                    run_connection(connection, stream, placement)
                });
            }
            Close::Limit(reason) => {
                shared.metrics.clients_closed_by_limit.inc();
                tracing::warn!(client = id, %peer, %reason, "closing client: limit exceeded");
            }
            Close::Failed(reason) => {
                tracing::error!(client = id, %peer, %reason, "closing client");
            }
            Close::Gone | Close::Done => {}
        }
        let _ = stream.shutdown().await;
        shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
        shared.metrics.connections.dec();
        tracing::debug!(client = id, %peer, "client disconnected");
    })
}

struct Client {
    shared: Arc<Shared>,
    /// Taken while a worker runs the client's requests.
    session: Option<Session>,
    input: BytesMut,
    /// A request whose string value is arriving.
    partial: Option<Partial>,
    charge: BufferCharge,
}

/// A request read up to a string value that streams into a blob as its bytes arrive.
struct Partial {
    request: Request,
    /// Bytes of the request's arguments held in memory.
    held: usize,
    phase: Phase,
    /// Why its value could not be stored: the request is read to its end, then refused.
    failure: Option<Reply>,
}

enum Phase {
    /// The value's bytes and CRLF come next. Its upload starts once the requests before it have
    /// run, so it goes to the database they leave selected.
    Value {
        remaining: usize,
        upload: Option<Upload>,
        after: usize,
    },
    /// The arguments after it come next.
    Rest { after: usize },
}

/// Why a partial request cannot go on.
enum Broken {
    Protocol(ProtocolError),
    /// Read whole, but its value could not be stored: answered with this error.
    Refused(Reply),
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
                bulk_bytes_max: self.shared.max_bulk_bytes(),
                args_max: ARGS_MAX,
                unauthenticated: false,
                streaming: Some((CHUNK_BYTES, takes_streamed_value)),
            }
        } else {
            RequestLimits {
                request_bytes_max: config.max_unauthenticated_request_bytes,
                bulk_bytes_max: config.max_unauthenticated_request_bytes,
                args_max: UNAUTHENTICATED_ARGS_MAX,
                unauthenticated: true,
                streaming: None,
            }
        }
    }

    /// Serves requests until the connection ends, or (between two pipelines) until its place is
    /// on another network thread than `placement`'s.
    async fn serve(
        &mut self,
        stream: &mut TcpStream,
        shutdown: &mut watch::Receiver<bool>,
        input_signal: &InputSignal,
        network: &NetworkThreads,
        placement: Placement,
    ) -> Close {
        let mut pending = VecDeque::new();
        loop {
            // Before AUTH, one request at a time: AUTH changes the limits the next is read under.
            let one_only = !self.authenticated();
            let limits = self.limits();
            let mut broken = None;
            if self.partial.is_none() {
                match take_requests(&mut self.input, &limits, &mut pending, one_only) {
                    Ok(partial) => self.partial = partial,
                    Err(error) => broken = Some(error),
                }
            }
            let ran = !pending.is_empty();
            if ran {
                self.shared.network.count_read();
            }
            while !pending.is_empty() {
                if let Err(close) = self.run_and_reply(stream, &mut pending).await {
                    return close;
                }
                if let Err(close) = self.wait_unblocked(stream, shutdown, &mut pending).await {
                    return close;
                }
            }
            if self.partial.is_some() && broken.is_none() {
                match self.advance_partial(&mut pending) {
                    Ok(()) if !pending.is_empty() => continue,
                    Ok(()) => {}
                    Err(Broken::Protocol(error)) => broken = Some(error),
                    Err(Broken::Refused(reply)) => {
                        tracing::warn!(
                            client = self.id(),
                            ?reply,
                            "a streamed value could not be stored"
                        );
                        if let Some(session) = self.session.as_mut() {
                            session.refused_request();
                        }
                        let mut output = Output::new();
                        reply.encode(self.protocol(), &mut output);
                        let stall = self.shared.config.output_stall_timeout;
                        if let Err(close) = write_output(stream, &mut output, stall).await {
                            return close;
                        }
                        continue;
                    }
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
            if self.partial.is_none() {
                // Nothing is half done: every reply is written, every request before the bytes
                // buffered has run.
                if let Some(home) = network.new_home(placement) {
                    return Close::Move(home);
                }
            }
            if let Err(close) = self.make_room() {
                return close;
            }
            if let Err(close) = self.read_input(stream, shutdown, input_signal).await {
                return close;
            }
        }
    }

    /// Reads more input, or ends the connection: the client left, stayed silent for the idle
    /// timeout (counted from the call, also when the timeout was set while it waited, as Redis
    /// counts from the client's last request), or the server drains. The wait's start is read
    /// from the commands' TSC clock; without a timeout no timer is armed, and nothing is
    /// registered per read but with the connection's own signal.
    async fn read_input(
        &mut self,
        stream: &mut TcpStream,
        shutdown: &watch::Receiver<bool>,
        input_signal: &InputSignal,
    ) -> Result<(), Close> {
        let waiting_since = quanta::Instant::now();
        loop {
            let seconds = self.shared.idle_timeout.seconds();
            let deadline = (seconds > 0).then(|| {
                let now = tokio::time::Instant::now();
                now.checked_sub(waiting_since.elapsed())
                    .unwrap_or(now)
                    .checked_add(Duration::from_secs(seconds))
            });
            let idle = async {
                match deadline.flatten() {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                read = stream.read_buf(&mut self.input) => {
                    return match read {
                        Ok(0) | Err(_) => Err(Close::Gone),
                        Ok(_) => Ok(()),
                    };
                }
                () = idle => {
                    tracing::info!(client = self.id(), "closing idle client");
                    return Err(Close::Done);
                }
                () = input_signal.woken() => {
                    if *shutdown.borrow() {
                        return Err(Close::Done);
                    }
                }
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
                request: request.args,
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
                        break (blocked.timeout_reply, SyncPoint::default());
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
        let (reply, point) = reply;
        // The command that served it (a pop) may have written: its reply waits for the sync.
        shared
            .syncer
            .wait(point)
            .await
            .map_err(|reason| Close::Failed(format!("reply withheld: {reason}")))?;
        let mut output = Output::new();
        reply.encode(protocol, &mut output);
        write_output(stream, &mut output, shared.config.output_stall_timeout).await
    }

    fn id(&self) -> u64 {
        self.session.as_ref().map_or(0, |session| session.id)
    }

    fn protocol(&self) -> u8 {
        self.session.as_ref().map_or(2, |session| session.protocol)
    }

    /// Runs requests from `pending` until about `OUTPUT_FLUSH_BYTES` of replies are ready, and
    /// writes them.
    async fn run_and_reply(
        &mut self,
        stream: &mut TcpStream,
        pending: &mut VecDeque<Request>,
    ) -> Result<(), Close> {
        let queued = pending.len();
        // The TSC clock the commands read (`quanta`): a vDSO clock read twice per request was
        // a few percent of a pipeline-1 request's user time.
        let started = quanta::Instant::now();
        let (mut output, closing) = self.run_requests(pending).await?;
        let config = &self.shared.config;
        if output.len() > config.max_output_bytes {
            return Err(Close::Limit(format!(
                "a reply of {} bytes exceeds max_output_bytes ({})",
                output.len(),
                config.max_output_bytes
            )));
        }
        if !self.charge.set(self.held() + output.len()) {
            return Err(self.budget_exhausted(output.len()));
        }
        if queued - pending.len() > 1 || started.elapsed() >= BURST_AFTER {
            // A pipeline's replies, or a long request's, wait until the other connections whose
            // requests came in with it have run theirs, as Redis writes replies once per turn of
            // its event loop: a client driving many connections then reads many of them per
            // wake-up instead of being woken for each one (docs/SERVER.md, "Replies in bursts").
            tokio::task::yield_now().await;
        }
        write_output(stream, &mut output, config.output_stall_timeout).await?;
        self.charge.set(self.held());
        if closing {
            return Err(Close::Done);
        }
        Ok(())
    }

    /// What this client holds apart from replies: its input buffer, MULTI's queue, and a
    /// streaming request's arguments and chunk.
    fn held(&self) -> usize {
        let queued = self.session.as_ref().map_or(0, Session::queued_bytes);
        let partial = self.partial.as_ref().map_or(0, |partial| {
            let chunk = match &partial.phase {
                Phase::Value {
                    upload: Some(upload),
                    ..
                } => upload.buffered(),
                _ => 0,
            };
            partial.held + chunk
        });
        self.input.capacity() + queued + partial
    }

    /// Moves a streaming request on with what the input holds: the value's bytes into its blob,
    /// then the arguments after it. A request it completes goes to `pending`; one whose value
    /// could not be stored is read to its end (so the stream stays in step) and answered with
    /// the error (`Broken::Refused`).
    fn advance_partial(&mut self, pending: &mut VecDeque<Request>) -> Result<(), Broken> {
        let Some(session) = self.session.as_ref() else {
            return Ok(());
        };
        let space = self.shared.keyspaces[session.db].space();
        let mut limits = self.limits();
        let Some(partial) = self.partial.as_mut() else {
            return Ok(());
        };
        loop {
            match &mut partial.phase {
                Phase::Value {
                    remaining,
                    upload,
                    after,
                } => {
                    if upload.is_none() && partial.failure.is_none() {
                        match Upload::begin(space.clone(), *remaining as u64) {
                            Ok(begun) => *upload = Some(begun),
                            Err(failure) => partial.failure = Some(Reply::from(failure)),
                        }
                    }
                    let take = (*remaining).min(self.input.len());
                    if let Some(writing) = upload.as_mut() {
                        if let Err(failure) = writing.push(&self.input[..take]) {
                            // Dropping the upload deletes what it wrote.
                            *upload = None;
                            partial.failure = Some(Reply::from(failure));
                        }
                    }
                    self.input.advance(take);
                    *remaining -= take;
                    if *remaining > 0 || self.input.len() < 2 {
                        return Ok(());
                    }
                    if &self.input[..2] != b"\r\n" {
                        return Err(Broken::Protocol(ProtocolError(
                            "bulk string not terminated by CRLF".into(),
                        )));
                    }
                    self.input.advance(2);
                    let index = partial.request.args.len();
                    partial.request.args.push(Bytes::new());
                    if let Some(writing) = upload.take() {
                        let blob: StagedBlob = writing.finish();
                        partial.request.streamed.push((index, blob));
                    }
                    partial.phase = Phase::Rest { after: *after };
                }
                Phase::Rest { after: 0 } => {
                    let partial = self.partial.take().expect("matched above");
                    if let Some(failure) = partial.failure {
                        return Err(Broken::Refused(failure));
                    }
                    pending.push_back(partial.request);
                    return Ok(());
                }
                Phase::Rest { after } => {
                    // The arguments held so far count against the request's limit.
                    limits.request_bytes_max =
                        limits.request_bytes_max.saturating_sub(partial.held);
                    let index = partial.request.args.len();
                    let command = partial.request.args[0].clone();
                    let frame = continue_request(&mut self.input, &command, index, *after, &limits)
                        .map_err(Broken::Protocol)?;
                    let (args, phase) = match frame {
                        None => return Ok(()),
                        Some(Frame::Request(args)) => (args, Phase::Rest { after: 0 }),
                        Some(Frame::Stream {
                            args,
                            length,
                            after,
                        }) => (
                            args,
                            Phase::Value {
                                remaining: length,
                                upload: None,
                                after,
                            },
                        ),
                    };
                    partial.held += args.iter().map(Bytes::len).sum::<usize>();
                    partial.request.args.extend(args);
                    partial.phase = phase;
                }
            }
        }
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
        let during_copy = self.held() + wanted;
        if !self.charge.set(during_copy) {
            return Err(self.budget_exhausted(during_copy));
        }
        let mut grown = BytesMut::with_capacity(wanted);
        grown.extend_from_slice(&self.input);
        self.input = grown;
        self.charge.set(self.held());
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
        let slow = pending
            .iter()
            .any(|request| request.command().is_some_and(|command| command.is_slow()));
        let executor = if slow {
            Executor::Pool
        } else {
            shared.config.executor
        };
        let (output, synced) = match executor {
            Executor::Inline => {
                // With one network thread there is no other thread to hand a hot key's
                // pipelines to: the stripe's queue would only be entered and left (two locks of
                // a cold line per request, a twentieth of a pipeline-1 SET's user time).
                let stripe = pending
                    .front()
                    .filter(|_| !shared.network.is_single())
                    .and_then(|request| shared.combining_stripe(request));
                let (output, point) = match stripe {
                    None => execute_slice(shared, &mut session, pending),
                    Some(stripe) => {
                        let ran = run_on_stripe(shared, stripe, session, pending).await?;
                        session = ran.0;
                        (ran.1, ran.2)
                    }
                };
                (output, shared.syncer.wait(point).await)
            }
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
                    let (output, point) = execute_slice(&shared, &mut session, &mut requests);
                    // A pool thread may block: it waits for the sync itself.
                    let synced = shared
                        .db
                        .wait_synced(point)
                        .map_err(|error| error.to_string());
                    drop(permit);
                    (session, requests, output, synced)
                })
                .await;
                match joined {
                    Ok((back, rest, output, synced)) => {
                        session = back;
                        *pending = rest;
                        (output, synced)
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
        // Writes the replies acknowledge may not be durable: none of them is sent.
        synced.map_err(|reason| Close::Failed(format!("replies withheld: {reason}")))?;
        Ok((output, closing))
    }
}

/// Moves every complete request of `input` (only the first, with `one_only`) to `pending`;
/// stops at a request with a value to stream, returned to be read on (`Client::advance_partial`)
/// once those before it have run.
fn take_requests(
    input: &mut BytesMut,
    limits: &RequestLimits,
    pending: &mut VecDeque<Request>,
    one_only: bool,
) -> Result<Option<Partial>, ProtocolError> {
    loop {
        if one_only && !pending.is_empty() {
            return Ok(None);
        }
        match parse_request(input, limits)? {
            Some(Frame::Request(args)) if args.is_empty() => {}
            Some(Frame::Request(args)) => pending.push_back(Request::from(args)),
            Some(Frame::Stream {
                args,
                length,
                after,
            }) => {
                return Ok(Some(Partial {
                    held: args.iter().map(Bytes::len).sum(),
                    request: Request::from(args),
                    phase: Phase::Value {
                        remaining: length,
                        upload: None,
                        after,
                    },
                    failure: None,
                }))
            }
            None => return Ok(None),
        }
    }
}

/// Runs a pipeline that starts with a write to `stripe` where the combiner says: here, if no
/// connection runs the stripe (then the jobs queued for it too), else as a job on the thread
/// that runs it, or here once that thread hands the turn over. Returns the session with the
/// replies and the point to sync before they are sent.
async fn run_on_stripe(
    shared: &Shared,
    stripe: usize,
    session: Session,
    pending: &mut VecDeque<Request>,
) -> Result<(Session, Output, SyncPoint), Close> {
    let mut entering = Some(session);
    let Some(finished) = shared.combiner.enter(stripe, &mut entering, pending) else {
        let mut session = entering.expect("a runner keeps its session");
        let (output, sync) = run_turn(shared, stripe, &mut session, pending);
        return Ok((session, output, sync));
    };
    match finished.await {
        Ok(Finished::Ran {
            session,
            requests,
            output,
            sync,
        }) => {
            *pending = requests;
            Ok((session, output, sync))
        }
        Ok(Finished::YourTurn {
            mut session,
            requests,
        }) => {
            *pending = requests;
            let (output, sync) = run_turn(shared, stripe, &mut session, pending);
            Ok((session, output, sync))
        }
        // The runner gave the job up (a command failed): the session went with it.
        Err(_) => Err(Close::Gone),
    }
}

/// Runs this connection's slice of its pipeline on `stripe`, which it runs now (`combiner`),
/// then the jobs other connections queued for the stripe meanwhile, until the queue is empty or
/// the turn passes to another connection. Returns this connection's replies and sync point.
fn run_turn(
    shared: &Shared,
    stripe: usize,
    session: &mut Session,
    pending: &mut VecDeque<Request>,
) -> (Output, SyncPoint) {
    // A command that panics ends only its own connection, as a panic in a connection's task
    // does: the queue is still run, and this connection's own panic goes on after it.
    let own = catch_unwind(AssertUnwindSafe(|| execute_slice(shared, session, pending)));
    let mut ran = 0;
    while let Some(mut job) = shared.combiner.next_job(stripe, ran) {
        let slice = AssertUnwindSafe(|| execute_slice(shared, &mut job.session, &mut job.requests));
        match catch_unwind(slice) {
            Ok((output, sync)) => shared.combiner.finish(job, output, sync),
            // Dropped, the job tells its connection, which closes.
            Err(_) => tracing::error!(
                client = job.session.id,
                "a command panicked; its connection closes"
            ),
        }
        ran += 1;
    }
    own.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Runs requests of a pipeline in order, encoding the replies, until `OUTPUT_FLUSH_BYTES` of
/// them are ready, the pipeline is done, or one closes the session. Returns the replies with
/// the point to sync (`Db::wait_synced`) before any of them is sent.
fn execute_slice(
    shared: &Shared,
    session: &mut Session,
    pending: &mut VecDeque<Request>,
) -> (Output, SyncPoint) {
    // Room for the short replies most pipelines get (a status, a number, a small value), or
    // for a long first reply (HGETALL's), reserved once instead of grown reply by reply.
    let mut output = Output::with_room((pending.len() * SHORT_REPLY_BYTES).min(OUTPUT_FLUSH_BYTES));
    let mut run = PipelineRun::deferring_sync(pending.len());
    while let Some(mut request) = pending.pop_front() {
        shared.execute_pipelined(session, &mut request, pending.front(), &mut run);
        if session.blocked.is_some() {
            // A blocking command found nothing: the connection queues it with the server
            // (`Client::wait_unblocked`).
            pending.push_front(request);
            break;
        }
        for reply in run.final_replies() {
            reply.encode(session.protocol, &mut output);
        }
        if session.closing || output.len() >= OUTPUT_FLUSH_BYTES {
            break;
        }
    }
    shared.end_run(&mut run);
    for reply in run.final_replies() {
        reply.encode(session.protocol, &mut output);
    }
    (output, run.take_sync_point())
}

/// Writes `output`, giving up when the client leaves a write unaccepted for `stall`; a streamed
/// body is read a chunk at a time as the socket takes it.
async fn write_output(
    stream: &mut TcpStream,
    output: &mut Output,
    stall: Duration,
) -> Result<(), Close> {
    // Short replies only (no shared or streamed part): written from the output's own buffer,
    // with no list of parts or frozen copy made for them.
    if let Some(replies) = output.only_replies() {
        write_bytes(stream, replies, stall).await?;
        output.clear();
        return Ok(());
    }
    for part in output.take() {
        match part {
            Part::Bytes(bytes) => write_bytes(stream, &bytes, stall).await?,
            Part::Stream(bulk) => {
                let Some(mut source) = bulk.take_source() else {
                    return Err(Close::Failed("a streamed reply written twice".into()));
                };
                let mut written = 0u64;
                loop {
                    match source.next_chunk() {
                        Ok(Some(chunk)) => {
                            written += chunk.len() as u64;
                            write_bytes(stream, &chunk, stall).await?;
                        }
                        Ok(None) => break,
                        // Its length is sent already: the reply cannot be finished or taken
                        // back, so the connection ends, and the log says why.
                        Err(error) => {
                            return Err(Close::Failed(format!(
                                "a long value could not be read while it was sent: {error}"
                            )))
                        }
                    }
                }
                if written != bulk.len() {
                    return Err(Close::Failed(format!(
                        "a long value read {written} bytes of {}",
                        bulk.len()
                    )));
                }
            }
        }
    }
    Ok(())
}

async fn write_bytes(
    stream: &mut TcpStream,
    mut rest: &[u8],
    stall: Duration,
) -> Result<(), Close> {
    while !rest.is_empty() {
        // A write the socket takes at once arms no stall timer (whose deadline is a clock
        // read): only one that finds the socket's buffer full waits, at most `stall`.
        match stream.try_write(rest) {
            Ok(0) => return Err(Close::Gone),
            Ok(written) => rest = &rest[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                match tokio::time::timeout(stall, stream.writable()).await {
                    Err(_) => {
                        return Err(Close::Limit(format!(
                            "its replies stayed unread for output_stall_timeout ({} s)",
                            stall.as_secs()
                        )))
                    }
                    Ok(Err(_)) => return Err(Close::Gone),
                    Ok(Ok(())) => {}
                }
            }
            Err(_) => return Err(Close::Gone),
        }
    }
    Ok(())
}
