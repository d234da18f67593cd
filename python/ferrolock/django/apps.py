"""The Django app ``ferrolock.django``: adds the system check of the FERROLOCK setting."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks


class FerrolockConfig(AppConfig):
    """``"ferrolock.django"`` in ``INSTALLED_APPS``: registers the check ``ferrolock.E001``."""

    name = "ferrolock.django"
    label = "ferrolock"
    verbose_name = "ferrolock"

    def ready(self) -> None:
        from .checks import TAG, check_setting

        checks.register(check_setting, TAG)
