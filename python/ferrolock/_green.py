"""Which wait a blocking call uses under gevent or eventlet.

Once either has monkey-patched the process, a blocking ferrolock call waits
in the hub, letting other greenlets run, instead of blocking the thread
(``src/py/green.rs`` does the waiting; this module only says how). Consulted
by every blocking call, and only when ``gevent.monkey`` or
``eventlet.patcher`` has been imported.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Optional


def waiter() -> Optional[Callable[[int], Any]]:
    """The hub's wait until a file descriptor is readable, or ``None``.

    ``None`` when neither gevent nor eventlet has patched this process, and
    when the caller is the hub itself (which cannot wait on itself): the call
    then blocks its thread, as without them.
    """
    modules = sys.modules
    monkey = modules.get("gevent.monkey")
    if monkey is not None and (monkey.is_module_patched("socket") or monkey.is_module_patched("threading")):
        from gevent import getcurrent
        from gevent.hub import Hub
        from gevent.socket import wait_read

        return None if isinstance(getcurrent(), Hub) else wait_read
    patcher = modules.get("eventlet.patcher")
    if patcher is not None and (patcher.is_monkey_patched("socket") or patcher.is_monkey_patched("thread")):
        from eventlet.hubs import get_hub, trampoline
        from greenlet import getcurrent as current

        return None if get_hub().greenlet is current() else functools.partial(trampoline, read=True)
    return None
