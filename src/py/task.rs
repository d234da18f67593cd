//! A call's future on the runtime, however its caller waits for it (a
//! blocked thread: `runtime`; a greenlet: `green`; a coroutine: `coro`): a
//! panic inside contained, an interrupted call's task abandoned.

use std::future::Future;

use pyo3::prelude::*;

use crate::client::Client;

use super::errors::internal_error;

/// Stops an interrupted call's task (see `runtime::wait_interruptible`): aborted, its
/// result handed to `undo` if it had one already, and this process's
/// clean-ups waited for, all within the command timeout.
pub(super) async fn abandon<T, U, UF>(task: tokio::task::JoinHandle<PyResult<T>>, client: &Client, undo: U)
where
    U: FnOnce(T) -> UF,
    UF: Future<Output = ()>,
{
    task.abort();
    // Done once the future is dropped (its guards' clean-ups started), or it had ended.
    let late = task.await;
    let limit = client.options().command_timeout;
    let settled = async {
        if let Ok(Ok(value)) = late {
            undo(value).await;
        }
        client.settle().await;
    };
    let _ = tokio::time::timeout(limit, settled).await;
}

/// `fut`'s result as a Python one; a panic inside becomes a `LockError`
/// rather than unwinding into Python.
pub(super) async fn contained<F, T, E>(fut: F) -> PyResult<T>
where
    F: Future<Output = std::result::Result<T, E>>,
    E: Into<PyErr>,
{
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result.map_err(Into::into),
        Err(panic) => Err(internal_error(&panic_message(&*panic))),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<&str>().map(|s| (*s).to_string());
    text.or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}
