"""A history checker run under faults.

Worker processes take and release locks of one scenario (lock, fair-lock,
rwmutex, fair-rwmutex, multi-lock) and log every step with its time on
CLOCK_MONOTONIC, which Linux keeps system-wide. Meanwhile a nemesis in the
parent injects faults (connection kills, SIGSTOP past the ttl, server
restarts, server stalls, Ctrl-C) and logs them, and a monitor samples who
Redis says holds each name. Afterwards the checker reads the merged history
and looks for anomalies: overlapping holds, fences out of order, losses
reported late or not at all, holds left behind by failed acquires, keys left
in Redis.

Modules: events (the log format), scenarios (what a worker takes), attempt
(one attempt as the history records it), workers (the processes), board
(what each worker is doing, in shared memory), nemesis (the faults), monitor
(who Redis says holds), resp (a minimal Redis client), checker (the checks,
pure functions), summary (the figures), run (one run end to end).

``PYTHONPATH=tests python -m history --duration 300`` runs every scenario
from the command line (``make chaos DURATION=...``); ``tests/faults/test_history.py``
has the checker's unit tests and a short run of each scenario.
"""
