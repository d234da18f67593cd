"""ferrolock.django under Django's own test runner (tests/integrations/test_django.py runs
`python -m django test` on this project against a throwaway Redis)."""

import os
import sys
import tempfile
import threading
import time
from io import StringIO

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import BaseCommand, CommandError, call_command
from django.test import SimpleTestCase

import ferrolock
from ferrolock.django import get_client, single_instance

NIGHTLY = "django:command:nightly"


def with_options(**options):
    """The FERROLOCK setting of the project with these OPTIONS changed."""
    return {**settings.FERROLOCK, "OPTIONS": {**settings.FERROLOCK["OPTIONS"], **options}}


class GetClientTests(SimpleTestCase):
    def test_one_client_for_the_process_built_from_the_setting(self):
        client = get_client()
        self.assertIsInstance(client, ferrolock.Client)
        self.assertIs(get_client(), client)
        self.assertEqual(client.prefix, settings.FERROLOCK["OPTIONS"]["prefix"])
        with client.lock("works"):
            self.assertFalse(client.lock("works").acquire(blocking=False))

    def test_threads_calling_at_once_share_one_client(self):
        with self.settings(FERROLOCK=with_options()):  # a fresh build, raced by the threads
            start, seen = threading.Barrier(8), []
            threads = [threading.Thread(target=lambda: (start.wait(), seen.append(get_client()))) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(len(seen), 8)
            self.assertEqual(len({id(c) for c in seen}), 1)

    def test_a_changed_setting_builds_a_new_client(self):
        before = get_client()
        other = settings.FERROLOCK["OPTIONS"]["prefix"] + "other:"
        with self.settings(FERROLOCK=with_options(prefix=other)):
            inside = get_client()
            self.assertIsNot(inside, before)
            self.assertEqual(inside.prefix, other)
            self.assertIs(get_client(), inside)
        after = get_client()
        self.assertIsNot(after, inside)
        self.assertEqual(after.prefix, settings.FERROLOCK["OPTIONS"]["prefix"])

    def test_an_unknown_option_names_itself_and_the_valid_ones(self):
        with self.settings(FERROLOCK=with_options(conect_timeout=2)):
            with self.assertRaises(ImproperlyConfigured) as caught:
                get_client()
        message = str(caught.exception)
        if sys.version_info >= (3, 10):
            self.assertIn("unknown option 'conect_timeout'", message)
            self.assertIn("connect_timeout, command_timeout, prefix", message)
        else:  # Python 3.9 reads no signature off the native Client: its own TypeError names the key
            self.assertIn("unexpected keyword argument 'conect_timeout'", message)

    def test_a_setting_of_the_wrong_shape_says_what_it_should_be(self):
        cases = [
            ("redis://127.0.0.1:6379/0", "FERROLOCK must be a dict"),
            ({"URL": "redis://127.0.0.1:6379/0", "OPTION": {}}, "unknown key 'OPTION': the keys are URL, OPTIONS"),
            ({"OPTIONS": {}}, "FERROLOCK has no 'URL'"),
            ({"URL": 6379}, "FERROLOCK['URL'] must be a str"),
            ({"URL": "redis://127.0.0.1:6379/0", "OPTIONS": ["prefix"]}, "FERROLOCK['OPTIONS'] must be a dict"),
            (with_options(connect_timeout=-1), "FERROLOCK: "),  # the Client's own message follows
            ({"URL": "http://127.0.0.1/"}, "FERROLOCK: "),
        ]
        for value, expected in cases:
            with self.subTest(value=value), self.settings(FERROLOCK=value):
                with self.assertRaisesMessage(ImproperlyConfigured, expected):
                    get_client()

    def test_the_system_check_reports_a_bad_setting_without_connecting(self):
        self.assertEqual(checks.run_checks(tags=["ferrolock"]), [])
        with self.settings(FERROLOCK=with_options(conect_timeout=2)):
            errors = checks.run_checks(tags=["ferrolock"])
        self.assertEqual([e.id for e in errors], ["ferrolock.E001"])
        self.assertIn("conect_timeout", errors[0].msg)
        with self.settings(FERROLOCK={"URL": "redis://127.0.0.1:1/0"}):  # nothing listens there
            self.assertEqual(checks.run_checks(tags=["ferrolock"]), [])


class SingleInstanceTests(SimpleTestCase):
    def setUp(self):
        self.client_ = get_client()
        self.addCleanup(self.client_.force_release, NIGHTLY)

    def test_a_run_holds_the_lock_named_after_the_command_and_releases_it(self):
        out = StringIO()
        seen = []
        with tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate")
            run = threading.Thread(target=lambda: call_command("nightly", gate=gate, stdout=out))
            run.start()
            try:
                self.wait_for_file(gate + ".started")
                seen.append(self.client_.inspect(NIGHTLY))
            finally:
                open(gate, "w").close()
                run.join()
        self.assertIn(f"ran in pid {os.getpid()}", out.getvalue())
        self.assertIsNotNone(seen[0])
        self.assertRegex(seen[0].metadata, rf"^manage.py nightly on .+, pid {os.getpid()}, since \d{{4}}-")
        self.assertIsNone(self.client_.inspect(NIGHTLY))

    def test_a_second_run_does_not_start_while_one_runs(self):
        out = StringIO()
        with self.client_.lock(NIGHTLY, metadata="the other run"):
            with self.assertRaises(CommandError) as caught:
                call_command("nightly", stdout=out)
        self.assertEqual(out.getvalue(), "")
        self.assertIn(
            "nightly is already running (lock 'django:command:nightly' held by the other run); this run did not start",
            str(caught.exception),
        )

    def test_a_hold_lost_during_the_run_fails_the_run_at_its_end(self):
        errors = []

        def run():
            try:
                call_command("nightly", gate=gate, stdout=StringIO())
            except CommandError as exc:
                errors.append(str(exc))

        with tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate")
            runner = threading.Thread(target=run)
            runner.start()
            try:
                self.wait_for_file(gate + ".started")
                self.assertTrue(self.client_.force_release(NIGHTLY))
            finally:
                open(gate, "w").close()
                runner.join()
        self.assertEqual(len(errors), 1)
        self.assertIn("nightly ran to its end, but its lock 'django:command:nightly' was lost meanwhile", errors[0])

    def test_bare_decorator_names_the_lock_after_the_commands_module(self):
        seen = []

        class Command(BaseCommand):  # defined in jobs.tests: manage.py would call it "tests"
            @single_instance
            def handle(self, *args, **options):
                seen.append(get_client().inspect("django:command:tests"))

        call_command(Command())
        self.assertEqual(len(seen), 1)
        self.assertIsNotNone(seen[0])
        self.assertIsNone(self.client_.inspect("django:command:tests"))

    def test_a_run_that_waited_in_vain_says_how_long_it_waited(self):
        class Command(BaseCommand):
            @single_instance(name=NIGHTLY, wait=0.2)
            def handle(self, *args, **options):
                raise AssertionError("ran while the lock was held")

        with self.client_.lock(NIGHTLY, metadata="the other run"):
            with self.assertRaisesMessage(
                CommandError,
                "tests is still running after 0.2 s of waiting (lock 'django:command:nightly' held by the other run)",
            ):
                call_command(Command())

    def wait_for_file(self, path):
        """Until the run, on another thread, writes ``path`` from inside handle."""
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            self.assertLess(time.monotonic(), deadline, f"{path} never appeared")
            time.sleep(0.005)
