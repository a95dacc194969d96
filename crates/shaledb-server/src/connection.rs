//! One client connection: read requests, run them, write replies, until the client leaves, breaks
//! the protocol, idles too long, or the server drains.

use crate::commands::{Session, Shared};
use crate::config::Executor;
use crate::resp::{parse_request, ProtocolError, RequestLimits};
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

const READ_BUFFER_BYTES: usize = 16 << 10;
/// Most arguments of one request (Redis's bound too).
const ARGS_MAX: usize = 1 << 20;

enum Next {
    Continue,
    Close,
}

/// Serves one client until it is done; `_permit` is its maxclients slot.
pub async fn serve_client(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    peer: SocketAddr,
    _permit: OwnedSemaphorePermit,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    shared.connected_clients.fetch_add(1, Ordering::Relaxed);
    shared.metrics.connections.inc();
    let limits = RequestLimits {
        request_bytes_max: shared.config.max_request_bytes,
        bulk_bytes_max: shared.config.max_bulk_bytes,
        args_max: ARGS_MAX,
    };
    let mut session = Some(shared.new_session());
    let id = session.as_ref().map_or(0, |session| session.id);
    tracing::debug!(client = id, %peer, "client connected");
    let mut input = BytesMut::with_capacity(READ_BUFFER_BYTES);
    loop {
        let (requests, broken) = take_requests(&mut input, &limits);
        if !requests.is_empty() {
            let outcome = run_requests(&shared, &mut session, requests).await;
            match outcome {
                Some((output, next)) => {
                    if stream.write_all(&output).await.is_err() {
                        break;
                    }
                    if let Next::Close = next {
                        break;
                    }
                }
                None => break,
            }
        }
        if let Some(ProtocolError(message)) = broken {
            shared.metrics.protocol_errors.inc();
            tracing::info!(client = id, %peer, reason = %message, "closing client: protocol error");
            let line = format!("-ERR Protocol error: {message}\r\n");
            let _ = stream.write_all(line.as_bytes()).await;
            break;
        }
        if *shutdown.borrow() {
            break;
        }
        if input.capacity() - input.len() < READ_BUFFER_BYTES / 2 {
            input.reserve(READ_BUFFER_BYTES);
        }
        let read = async {
            match shared.config.idle_timeout {
                Some(idle) => tokio::time::timeout(idle, stream.read_buf(&mut input))
                    .await
                    .map_err(|_| ()),
                None => Ok(stream.read_buf(&mut input).await),
            }
        };
        tokio::select! {
            read = read => match read {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => {}
                Err(()) => {
                    tracing::info!(client = id, %peer, "closing idle client");
                    break;
                }
            },
            _ = shutdown.changed() => break,
        }
    }
    let _ = stream.shutdown().await;
    shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
    shared.metrics.connections.dec();
    tracing::debug!(client = id, %peer, "client disconnected");
}

/// Every complete request in `input`, and the protocol error that stopped parsing, if any.
fn take_requests(
    input: &mut BytesMut,
    limits: &RequestLimits,
) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
    let mut requests = Vec::new();
    loop {
        match parse_request(input, limits) {
            Ok(Some(args)) if args.is_empty() => {}
            Ok(Some(args)) => requests.push(args),
            Ok(None) => return (requests, None),
            Err(error) => return (requests, Some(error)),
        }
    }
}

/// Runs every request of a pipeline in order, encoding the replies, until one closes the session.
fn execute_pipeline(shared: &Shared, session: &mut Session, requests: Vec<Vec<Bytes>>) -> BytesMut {
    let mut output = BytesMut::new();
    for request in requests {
        let reply = shared.execute(session, &request);
        reply.encode(session.protocol, &mut output);
        if session.closing {
            break;
        }
    }
    output
}

/// Runs a pipeline where the configured executor says (see `Executor`) and returns the encoded
/// replies; `None` if the worker failed.
async fn run_requests(
    shared: &Arc<Shared>,
    session: &mut Option<Session>,
    requests: Vec<Vec<Bytes>>,
) -> Option<(BytesMut, Next)> {
    let mut owned = session.take()?;
    let output = match shared.config.executor {
        Executor::Inline => execute_pipeline(shared, &mut owned, requests),
        Executor::Pool => {
            let permit = shared.pool_slots.clone().acquire_owned().await.ok()?;
            let shared = shared.clone();
            let joined = tokio::task::spawn_blocking(move || {
                let output = execute_pipeline(&shared, &mut owned, requests);
                drop(permit);
                (owned, output)
            })
            .await;
            match joined {
                Ok((back, output)) => {
                    owned = back;
                    output
                }
                Err(error) => {
                    tracing::error!(%error, "a command's worker failed");
                    return None;
                }
            }
        }
    };
    let next = if owned.closing {
        Next::Close
    } else {
        Next::Continue
    };
    *session = Some(owned);
    Some((output, next))
}
