"""The process's ferrolock Client, built lazily from the FERROLOCK setting."""

from __future__ import annotations

import inspect
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

import ferrolock

from .._per_process import PerProcess

SETTING = "FERROLOCK"
"""The name of the Django setting that configures the client."""

_KEYS = ("URL", "OPTIONS")

# The process's client, built at the first get_client(), and forgotten when
# FERROLOCK changes or the process forks.
_client: PerProcess[ferrolock.Client] = PerProcess()


def _client_keywords() -> Optional[Tuple[str, ...]]:
    """The keyword arguments ``ferrolock.Client`` takes, read off its
    signature; ``None`` where Python reads none off a native class (3.9):
    the Client's own ``TypeError`` then names an unknown one."""
    try:
        params = inspect.signature(ferrolock.Client).parameters.values()
    except ValueError:
        return None
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _arguments() -> Tuple[Union[str, Sequence[str]], Dict[str, Any]]:
    """The URL and keyword arguments for ``ferrolock.Client``, read from the
    setting and checked by shape (the values are the Client's to check)."""
    if not hasattr(settings, SETTING):  # settings not configured at all: Django's own error
        raise ImproperlyConfigured(
            f"the {SETTING} setting is missing: add {SETTING} = {{'URL': 'redis://host:6379/0'}} to your settings"
        )
    value = getattr(settings, SETTING)
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"{SETTING} must be a dict like {{'URL': 'redis://host:6379/0', 'OPTIONS': {{...}}}}, "
            f"not {type(value).__name__}"
        )
    unknown = sorted(str(k) for k in value if k not in _KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{SETTING} has unknown key {unknown[0]!r}: the keys are {', '.join(_KEYS)}")
    if "URL" not in value:
        raise ImproperlyConfigured(f"{SETTING} has no 'URL': give the Redis URL (or a list of URLs for a quorum)")
    url = value["URL"]
    if not isinstance(url, (str, list, tuple)):
        raise ImproperlyConfigured(
            f"{SETTING}['URL'] must be a str (or a list of str for a quorum), not {type(url).__name__}"
        )
    options = value.get("OPTIONS", {})
    if not isinstance(options, dict):
        raise ImproperlyConfigured(
            f"{SETTING}['OPTIONS'] must be a dict of ferrolock.Client's keyword arguments, not {type(options).__name__}"
        )
    valid = _client_keywords()
    unknown = [key for key in options if valid is not None and key not in valid]
    if unknown and valid is not None:
        raise ImproperlyConfigured(
            f"{SETTING}['OPTIONS'] has unknown option {unknown[0]!r}: ferrolock.Client takes {', '.join(valid)}"
        )
    return url, dict(options)


def client_from_settings() -> ferrolock.Client:
    """A new :class:`ferrolock.Client` built from the ``FERROLOCK`` setting
    (no network I/O). :func:`get_client` shares one; this makes another.

    Raises:
        ImproperlyConfigured: the setting is missing, is not a dict with a
            ``URL`` and optional ``OPTIONS``, names an option the Client
            does not take (the message lists those it takes), or has a
            value the Client refuses (the Client's message).
    """
    url, options = _arguments()
    try:
        return ferrolock.Client(url, **options)
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"{SETTING}: {exc}") from exc


def get_client() -> ferrolock.Client:
    """The process's :class:`ferrolock.Client`, built from the ``FERROLOCK``
    setting at the first call (no network I/O: its first use connects).

    Every call returns the same object, from any thread, until the process
    forks (the child builds its own at its first call) or a test changes
    ``FERROLOCK`` (``override_settings``, ``self.settings(...)``: the next
    call builds one from the new value). The client it replaces is not
    closed: locks held through it stay held and are released as usual.

    Raises:
        ImproperlyConfigured: as :func:`client_from_settings`; nothing is
            kept, so the next call tries again.
    """
    return _client.get(SETTING, client_from_settings)


def _on_setting_changed(*, setting: str, **_: Any) -> None:
    if setting == SETTING:
        _client.clear()


setting_changed.connect(_on_setting_changed, dispatch_uid="ferrolock.django.setting_changed")
