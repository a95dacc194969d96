//! Many reads in flight from one thread: a per-thread io_uring ring. The only `unsafe` of the
//! media layer lives here, and the rule that makes it sound is simple: [`read_all`] returns only
//! once the kernel has completed every read it was handed, so no buffer is released or touched
//! while the kernel may still write into it.

use io_uring::{opcode, types, IoUring, Probe};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Reads in flight at once on one thread's ring; more wait for a free slot.
pub const RING_ENTRIES: u32 = 64;

/// One read for the ring: `buf.len()` bytes of `fd` at `offset`.
pub struct RingRead<'b> {
    pub fd: RawFd,
    pub offset: u64,
    pub buf: &'b mut [u8],
}

enum Ring {
    Untried,
    Ready(Box<IoUring>),
    /// The kernel refused a ring (too old, or io_uring disabled by policy): reads go one by one.
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
}

static UNAVAILABLE_WARNED: AtomicBool = AtomicBool::new(false);

/// Performs every read, up to [`RING_ENTRIES`] at a time; each result is the bytes read (short
/// at the end of a file, or when the kernel chose to stop early) or the read's error.
/// `None` if this thread has no ring: the caller reads another way.
pub fn read_all(reads: &mut [RingRead<'_>]) -> Option<Vec<io::Result<usize>>> {
    RING.with(|cell| {
        let mut ring = cell.borrow_mut();
        if matches!(*ring, Ring::Untried) {
            *ring = match new_ring() {
                Ok(created) => Ring::Ready(Box::new(created)),
                Err(error) => {
                    if !UNAVAILABLE_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            %error,
                            "io_uring is unavailable; batched reads go one pread at a time"
                        );
                    }
                    Ring::Unavailable
                }
            };
        }
        let Ring::Ready(ring) = &mut *ring else {
            return None;
        };
        Some(run(ring, reads))
    })
}

/// A ring whose kernel can read (IORING_OP_READ arrived in Linux 5.6, rings in 5.1: on a
/// kernel between them every read would fail, so such a ring counts as unavailable).
fn new_ring() -> io::Result<IoUring> {
    let ring = IoUring::new(RING_ENTRIES)?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    if !probe.is_supported(opcode::Read::CODE) {
        return Err(io::Error::other(
            "the kernel's io_uring has no READ operation",
        ));
    }
    Ok(ring)
}

/// Reads handed to the kernel and not yet completed. Dropped while any are (only by a panic
/// unwinding out of [`run`]), it aborts the process: returning would free buffers the kernel
/// may still write into.
struct InFlight(usize);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0 > 0 {
            std::process::abort();
        }
    }
}

fn run(ring: &mut IoUring, reads: &mut [RingRead<'_>]) -> Vec<io::Result<usize>> {
    let mut results: Vec<io::Result<usize>> = (0..reads.len()).map(|_| Ok(0)).collect();
    let mut next = 0;
    let mut in_flight = InFlight(0);
    while next < reads.len() || in_flight.0 > 0 {
        {
            let mut queue = ring.submission();
            // At most RING_ENTRIES in flight, so the completion queue (twice that) never
            // overflows.
            while next < reads.len() && in_flight.0 < RING_ENTRIES as usize {
                let read = &mut reads[next];
                // A read longer than u32 cannot be one request; it gets the bytes it can and
                // the caller finishes it, as after any short read.
                let len = u32::try_from(read.buf.len()).unwrap_or(u32::MAX);
                let entry = opcode::Read::new(types::Fd(read.fd), read.buf.as_mut_ptr(), len)
                    .offset(read.offset)
                    .build()
                    .user_data(next as u64);
                // SAFETY: the entry points into `reads[next].buf`, which stays mutably borrowed,
                // neither moved nor freed, until this function returns, and it returns only after
                // the completion of every pushed entry has been reaped: the loop runs while
                // any is in flight, a failure of the ring itself aborts the process, and so does
                // a panic (`InFlight`'s drop), rather than return with reads in flight.
                if unsafe { queue.push(&entry) }.is_err() {
                    break; // the queue is full: wait for a completion first
                }
                next += 1;
                in_flight.0 += 1;
            }
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            // Interrupted, short of kernel resources, or the completion queue is full: reap
            // what has completed, then submit and wait again.
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(error) => {
                // Reads may be in flight into buffers the caller would free on return.
                tracing::error!(%error, "io_uring_enter failed with reads in flight");
                std::process::abort();
            }
        }
        for completion in ring.completion() {
            let index = completion.user_data() as usize;
            let result = completion.result();
            results[index] = if result < 0 {
                Err(io::Error::from_raw_os_error(-result))
            } else {
                Ok(result as usize)
            };
            in_flight.0 -= 1;
        }
    }
    results
}
