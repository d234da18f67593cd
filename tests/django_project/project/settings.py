"""A minimal Django project for ferrolock.django's tests: no database, the
ferrolock app and an app of guarded commands. tests/integrations/test_django.py points it
at a throwaway Redis through the environment."""

import json
import os

SECRET_KEY = "a test project: nothing here is secret"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["ferrolock.django", "jobs"]
DATABASES = {}

FERROLOCK = {
    "URL": os.environ.get("FERROLOCK_DJANGO_URL", "redis://127.0.0.1:6379/0"),
    "OPTIONS": {
        "prefix": os.environ.get("FERROLOCK_DJANGO_PREFIX", "ferrolock-django-tests:"),
        **json.loads(os.environ.get("FERROLOCK_DJANGO_OPTIONS", "{}")),
    },
}
if os.environ.get("FERROLOCK_DJANGO_NO_SETTING"):  # the test of a project that forgot the setting
    del FERROLOCK
