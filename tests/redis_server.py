"""Throwaway redis-server processes: the ones of the ferrolock.testing plugin."""

from ferrolock.testing import RedisServer, env_url, free_port

__all__ = ["RedisServer", "env_url", "free_port"]
