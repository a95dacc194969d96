//! The network threads: one single-threaded tokio runtime each, with the connections dealt to
//! them round robin as they are accepted. A connection stays on its thread for life, as each of
//! Redis's I/O threads (and redis-server itself) keeps its clients.
//!
//! It replaced one work-stealing runtime with a worker per core, which woke an idle worker
//! whenever another had tasks queued (a futex call and a task switch on cores shared with the
//! clients): faster on most commands at pipelines 1 and 16 (docs/SERVER.md, "Where commands
//! run", has the numbers).

use anyhow::{Context, Result};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::runtime::{Builder, Handle};

pub struct NetworkThreads {
    runtimes: Vec<Handle>,
    /// The thread the next connection goes to (round robin).
    next: AtomicUsize,
}

impl NetworkThreads {
    /// Starts `count` threads, each running a runtime of its own until the process ends.
    pub fn start(count: usize) -> Result<NetworkThreads> {
        let runtimes = (0..count.max(1))
            .map(|_| {
                let runtime = Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("starting a network thread's runtime")?;
                let handle = runtime.handle().clone();
                std::thread::Builder::new()
                    .name("shale-serve".into())
                    .spawn(move || runtime.block_on(std::future::pending::<()>()))
                    .context("starting a network thread")?;
                Ok(handle)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NetworkThreads {
            runtimes,
            next: AtomicUsize::new(0),
        })
    }

    /// Serves an accepted connection on the next network thread: `serve` gets the stream,
    /// registered with that thread's runtime. A stream that cannot move (its descriptor taken
    /// away meanwhile) is logged and dropped, which closes it.
    pub fn serve<F, Fut>(&self, stream: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let thread = self.next.fetch_add(1, Ordering::Relaxed) % self.runtimes.len();
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => return tracing::warn!(%error, "a connection could not be handed over"),
        };
        self.runtimes[thread].spawn(async move {
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve(stream).await,
                Err(error) => tracing::warn!(%error, "a connection could not be handed over"),
            }
        });
    }
}
