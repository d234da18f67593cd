"""The system check of the FERROLOCK setting (``ferrolock.E001``), made without connecting."""

from __future__ import annotations

from typing import Any, List

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from .client import SETTING, client_from_settings

TAG = "ferrolock"
"""The tag of ferrolock's system checks: ``manage.py check --tag ferrolock``."""


def check_setting(app_configs: Any = None, **kwargs: Any) -> List[checks.CheckMessage]:
    """``ferrolock.E001`` when the ``FERROLOCK`` setting is missing or a
    Client cannot be built from it; nothing is sent to Redis."""
    try:
        client_from_settings().close()
    except ImproperlyConfigured as exc:
        return [
            checks.Error(
                str(exc),
                hint=f"See {SETTING} in ferrolock's documentation (Integrations, Django).",
                id="ferrolock.E001",
            )
        ]
    return []
