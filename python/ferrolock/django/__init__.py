"""Django integration (``pip install ferrolock[django]``): the process's
:class:`ferrolock.Client` built from the ``FERROLOCK`` setting, and a guard
that keeps a management command from running twice at once.

In ``settings.py``::

    INSTALLED_APPS = [..., "ferrolock.django"]   # optional: adds the system check
    FERROLOCK = {
        "URL": "redis://127.0.0.1:6379/0",      # what ferrolock.Client takes: a URL or a list of URLs
        "OPTIONS": {"prefix": "myapp:", "connect_timeout": 2},  # Client's keyword arguments
    }

:func:`get_client` builds the client at its first call and returns that same
object on every later call in the process; a forked child (a prefork server's
worker) builds its own at its first call, and so does a test that changes
``FERROLOCK`` (``override_settings``). Building a client does no network
I/O, so importing this module, the settings and the commands, and
``manage.py check``, work while Redis is down.

:func:`single_instance` decorates a command's ``handle``: the command runs
holding a ferrolock Lock named after it, and a second run started meanwhile
(another cron tick, another host) stops with a ``CommandError`` (exit status
1) naming the holder, or waits for its turn.

With ``"ferrolock.django"`` in ``INSTALLED_APPS``, the system check
``ferrolock.E001`` (tag ``ferrolock``) reports a missing or invalid
``FERROLOCK`` setting at ``manage.py check`` and before every command,
without connecting.
"""

from __future__ import annotations

from .client import SETTING, client_from_settings, get_client
from .commands import single_instance

__all__ = ["SETTING", "client_from_settings", "get_client", "single_instance"]
