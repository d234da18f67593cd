//! The docstrings `Lock`'s methods share, or that belong to the `with` /
//! `async with` protocol: each written once here, used with `#[doc = ...]`.

/// The errors of any call that talks to Redis.
macro_rules! redis_raises {
    () => {
        concat!(
            "    LockConnectionError: Redis could not be reached in time.\n",
            "    LockError: Redis answered with an error."
        )
    };
}
pub(crate) use redis_raises;

/// The errors of any awaited call that talks to Redis.
macro_rules! awaited_raises {
    () => {
        concat!(
            "    LockConnectionError: Redis could not be reached in time (when\n",
            "        awaited).\n",
            "    LockError: Redis answered with an error (when awaited)."
        )
    };
}
pub(crate) use awaited_raises;

/// The docstring of `a{name}`, the asyncio version of `{name}`, which
/// returns a future of `returns`.
macro_rules! asyncio_twin {
    ($name:literal, $returns:literal) => {
        concat!(
            "Asyncio version of :meth:`",
            $name,
            "`.\n\nReturns:\n    ",
            $returns,
            "\n\nRaises:\n    RuntimeError: awaited with no event loop running.\n",
            $crate::py::lock::docs::awaited_raises!()
        )
    };
}
pub(crate) use asyncio_twin;

/// The docstring of `Lock.acquire`.
macro_rules! acquire_doc {
    () => {
        concat!(
            "Take the lock, with the semantics of :meth:`threading.Lock.acquire`.\n",
            "\n",
            "The GIL is released while waiting; the wait wakes every 50 ms to check\n",
            "for signals, so Ctrl-C raises ``KeyboardInterrupt`` promptly and leaves\n",
            "no lock behind (a hold granted in the meantime is released first).\n",
            "\n",
            "Args:\n",
            "    blocking: when ``False`` (or ``0``), make one attempt and return\n",
            "        at once.\n",
            "    timeout: the most seconds to wait when ``blocking``; ``None`` (the\n",
            "        default) waits up to the handle's ``blocking_timeout``, which\n",
            "        is forever unless it was set (as redis-py's ``Lock.acquire``);\n",
            "        ``-1`` waits forever whatever ``blocking_timeout`` says; ``0``\n",
            "        makes one attempt. Must be ``None`` or ``-1`` when\n",
            "        ``blocking`` is ``False``.\n",
            "\n",
            "Returns:\n",
            "    ``True`` once the lock is taken; ``False`` when the wait passed,\n",
            "    ``blocking`` is ``False`` and the lock is busy, or the\n",
            "    :class:`Retry` strategy ran out of attempts. The retry's\n",
            "    ``attempts`` and the wait are two limits and the first one reached\n",
            "    ends the acquire: with ``retry=Retry.none()`` (one attempt) a busy\n",
            "    lock returns ``False`` at once, whatever ``timeout`` says.\n",
            "\n",
            "Raises:\n",
            "    ValueError: a ``timeout`` with ``blocking=False``; a negative\n",
            "        ``timeout`` other than ``-1``; an infinite or NaN ``timeout``;\n",
            "        an int ``blocking`` other than ``0`` or ``1``.\n",
            "    TypeError: ``blocking`` is not a ``bool`` or an ``int``, or\n",
            "        ``timeout`` is not a number or ``None``.\n",
            $crate::py::lock::docs::redis_raises!(),
            "\n",
            "    KeyboardInterrupt: Ctrl-C while waiting (no lock is left behind).",
        )
    };
}
pub(crate) use acquire_doc;

/// The docstring of `Lock.__enter__`.
macro_rules! enter_doc {
    () => {
        concat!(
            "Take the lock, waiting up to ``blocking_timeout``.\n",
            "\n",
            "Blocks like :meth:`acquire`: the GIL is released, and Ctrl-C raises\n",
            "``KeyboardInterrupt`` within 50 ms, leaving no lock behind.\n",
            "\n",
            "Returns:\n",
            "    This lock.\n",
            "\n",
            "Raises:\n",
            "    LockNotAcquired: the lock was not taken within ``blocking_timeout``,\n",
            "        or the :class:`Retry` strategy ran out of attempts.\n",
            $crate::py::lock::docs::redis_raises!(),
            "\n",
            "    KeyboardInterrupt: Ctrl-C while waiting."
        )
    };
}
pub(crate) use enter_doc;

/// The docstring of `Lock.__exit__`.
macro_rules! exit_doc {
    () => {
        concat!(
            "Release the lock; never suppresses the block's exception.\n",
            "\n",
            "The GIL is released while waiting for Redis.\n",
            "\n",
            "Args:\n",
            "    exc_type: the type of the exception that ended the block, or ``None``.\n",
            "    exc: that exception, or ``None``.\n",
            "    tb: its traceback, or ``None``.\n",
            "\n",
            "Returns:\n",
            "    ``False``.\n",
            "\n",
            "Raises:\n",
            "    LockLost: the hold was lost while the block ran and the block\n",
            "        raised nothing itself (its own exception propagates instead,\n",
            "        noted with the loss).\n",
            "    LockNotOwned: the handle held nothing any more at the end of the\n",
            "        block (it was released inside the block).\n",
            $crate::py::lock::docs::redis_raises!()
        )
    };
}
pub(crate) use exit_doc;

/// The docstring of `Lock.__aenter__`.
macro_rules! aenter_doc {
    () => {
        concat!(
            "Take the lock without blocking the event loop, waiting up to\n",
            "``blocking_timeout``.\n",
            "\n",
            "Until the block ends, a loss of the hold cancels the task running the\n",
            "block (``CancelledError`` inside it); ``__aexit__`` then raises\n",
            ":class:`LockLost` instead. Cancelling the task while it waits to enter\n",
            "leaves no lock behind.\n",
            "\n",
            "Returns:\n",
            "    A future of this lock.\n",
            "\n",
            "Raises:\n",
            "    RuntimeError: awaited with no event loop running.\n",
            "    LockNotAcquired: the lock was not taken within ``blocking_timeout``,\n",
            "        or the :class:`Retry` strategy ran out of attempts (when\n",
            "        awaited).\n",
            $crate::py::lock::docs::awaited_raises!()
        )
    };
}
pub(crate) use aenter_doc;

/// The docstring of `Lock.__aexit__`.
macro_rules! aexit_doc {
    () => {
        concat!(
            "Release the lock; never suppresses the block's exception.\n",
            "\n",
            "The release goes through even when the task is cancelled meanwhile.\n",
            "If the block was cancelled because the hold was lost, that\n",
            "cancellation is taken back (``Task.uncancel`` on Python 3.11+) and\n",
            ":class:`LockLost` is raised in its place; a cancellation from\n",
            "elsewhere propagates unchanged.\n",
            "\n",
            "Args:\n",
            "    exc_type: the type of the exception that ended the block, or ``None``.\n",
            "    _exc: that exception, or ``None``.\n",
            "    _tb: its traceback, or ``None``.\n",
            "\n",
            "Returns:\n",
            "    A future of ``False``.\n",
            "\n",
            "Raises:\n",
            "    RuntimeError: awaited with no event loop running.\n",
            "    LockLost: the hold was lost while the block ran (when awaited).\n",
            "    LockNotOwned: the handle held nothing any more at the end of the\n",
            "        block (it was released inside the block) (when awaited).\n",
            $crate::py::lock::docs::awaited_raises!()
        )
    };
}
pub(crate) use aexit_doc;
