//! The admin HTTP port: Prometheus `/metrics`, `/livez` and `/readyz`.

use crate::commands::Shared;
use crate::Readiness;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

const BUSY: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// How long an admin client may take to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the admin port: at most `admin_maxclients` connections at once, each given
/// `HEADER_READ_TIMEOUT` per request, so idle or slow clients cannot hold it.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, readiness: Arc<Readiness>) {
    let slots = Arc::new(Semaphore::new(shared.config.admin_maxclients));
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "admin accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            shared.metrics.admin_connections_rejected.inc();
            tracing::warn!(%peer, "refusing admin client: admin_maxclients reached");
            tokio::spawn(async move {
                let _ = stream.write_all(BUSY).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let (shared, readiness) = (shared.clone(), readiness.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |request| {
                let response = respond(&request, &shared, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(error) = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "admin connection failed");
            }
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    shared: &Shared,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            shared.metrics.render(),
        ),
        "/livez" => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, "text/plain", "ready\n".into()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "draining\n".into(),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a response from fixed parts")
}
