"""What the test suites stand on, none of it a test itself: the servers and
deployments they start (redis_cluster, redis_sentinel, redis_masters,
postgresql, tls_certs), the faults they inject (fault_proxy; netns with its
agent and relay for network partitions), shared helpers (helpers: waiting,
probes, key names), the Celery app of test_celery.py (celery_app) and the
chaos suite's figures (chaos_report). Imported as ``support.<module>`` with
``tests/`` on ``sys.path`` (pytest puts it there; ``PYTHONPATH=tests`` for
``python -m history`` and the benches). ``TESTS`` and ``ROOT`` are where
the suites' folders and the repository are, for a suite at any depth."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
