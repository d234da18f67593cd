//! Where finished operations wake their event loop: one [`Port`] per loop
//! (a queue and a socket pair the loop watches with `add_reader`), drained
//! by one callback that completes every queued task's asyncio future.

use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use super::{locked, Cell};
use crate::support::per_process::PerProcess;

/// Where wakers hand operations to one event loop: a queue, and a socket
/// pair whose reading end the loop watches.
pub(super) struct Port {
    reader: UnixStream,
    writer: UnixStream,
    ready: Mutex<Vec<Arc<Cell>>>,
}

impl Port {
    fn new() -> std::io::Result<Port> {
        let (reader, writer) = UnixStream::pair()?;
        reader.set_nonblocking(true)?;
        writer.set_nonblocking(true)?;
        Ok(Port { reader, writer, ready: Mutex::new(Vec::new()) })
    }

    pub(super) fn push(&self, cell: Arc<Cell>) {
        let first = {
            let mut ready = locked(&self.ready);
            ready.push(cell);
            ready.len() == 1
        };
        if first {
            // A full buffer already holds a byte that will wake the loop.
            let _ = (&self.writer).write(&[1]);
        }
    }
}

/// Called by the event loop when its port's socket is readable: completes
/// the asyncio future of every operation whose result came in since.
#[pyclass(frozen)]
struct Drain {
    port: Arc<Port>,
}

#[pymethods]
impl Drain {
    fn __call__(&self, py: Python<'_>) {
        let mut buf = [0u8; 256];
        loop {
            match (&self.port.reader).read(&mut buf) {
                Ok(n) if n == buf.len() => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        let ready = std::mem::take(&mut *locked(&self.port.ready));
        for cell in ready {
            let parked = {
                let mut inner = locked(&cell.inner);
                inner.queued = false;
                inner.parked.take()
            };
            if let Some(super::Parked::Loop(future, _)) = parked {
                // One failure must not strand the other waiting tasks.
                if let Err(e) = wake(py, future.bind(py)) {
                    e.write_unraisable(py, Some(future.bind(py)));
                }
            }
        }
    }
}

/// Completes the asyncio future a task waits on (unless it was cancelled).
fn wake(py: Python<'_>, future: &Bound<'_, PyAny>) -> PyResult<()> {
    if !future.call_method0(intern!(py, "done"))?.is_truthy()? {
        future.call_method1(intern!(py, "set_result"), (py.None(),))?;
    }
    Ok(())
}

/// The port of the event loop running on this thread: its loop and port.
type LoopPort = (Py<PyAny>, Arc<Port>);

thread_local! {
    /// This process's (a fork's child, on the thread that forked, does not
    /// use its parent's socket, which the two processes share).
    static LOOP_PORT: PerProcess<RefCell<Option<LoopPort>>> = const { PerProcess::new() };
}

/// The running event loop and its port, made (and watched) on first use.
pub(super) fn loop_port(py: Python<'_>) -> PyResult<(Py<PyAny>, Arc<Port>)> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = GET_RUNNING_LOOP
        .get_or_try_init(py, || py.import("asyncio")?.getattr("get_running_loop").map(Bound::unbind))?;
    let running = get.call0(py)?;
    LOOP_PORT.with(|per_process| {
        per_process.with(RefCell::default, |cell| {
            let mut cell = cell.borrow_mut();
            if let Some((event_loop, port)) = cell.as_ref() {
                if event_loop.is(&running) {
                    return Ok((running, port.clone()));
                }
            }
            if let Some((old_loop, old_port)) = cell.take() {
                // An earlier loop of this thread: stop it watching our socket.
                let old_loop = old_loop.bind(py);
                if !old_loop.call_method0("is_closed").and_then(|c| c.is_truthy()).unwrap_or(true) {
                    let _ = old_loop.call_method1("remove_reader", (old_port.reader.as_raw_fd(),));
                }
            }
            let port = Arc::new(Port::new().map_err(|e| PyRuntimeError::new_err(format!("ferrolock: {e}")))?);
            let drain = Drain { port: port.clone() };
            running.call_method1(py, "add_reader", (port.reader.as_raw_fd(), drain))?;
            *cell = Some((running.clone_ref(py), port.clone()));
            Ok((running, port))
        })
    })
}
