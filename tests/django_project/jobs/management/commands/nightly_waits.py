"""The same job as nightly (the same lock), waiting up to a minute for a run in progress."""

from ferrolock.django import single_instance

from .nightly import TTL, Command as Nightly, run_exclusively


class Command(Nightly):
    help = "nightly's job, waiting for its turn."

    @single_instance(name="django:command:nightly", ttl=TTL, wait=60)
    def handle(self, *args, gate=None, **options):
        run_exclusively(self, gate)
