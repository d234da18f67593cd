"""A cron job that must not overlap itself. With --gate PATH it writes
PATH.started once it runs, then waits until PATH exists: the test decides
when it ends. It also fails if another run is inside it at the same time."""

import os
import time

from django.core.management.base import BaseCommand, CommandError

from ferrolock.django import single_instance

TTL = 3.0


def run_exclusively(command, gate):
    inside = os.path.join(os.path.dirname(gate), "inside") if gate else None
    if inside:
        try:
            os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise CommandError("two runs overlapped") from None
        open(gate + ".started", "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(gate):  # the test's event: it creates the file
            if time.monotonic() > deadline:
                raise CommandError("the gate never opened")
            time.sleep(0.01)
        os.remove(inside)
    command.stdout.write(f"ran in pid {os.getpid()}")


class Command(BaseCommand):
    help = "A job guarded by @single_instance: one run at a time."

    def add_arguments(self, parser):
        parser.add_argument("--gate", default=None)

    @single_instance(ttl=TTL)
    def handle(self, *args, gate=None, **options):
        run_exclusively(self, gate)
