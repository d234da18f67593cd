"""What runs at the start of a process placed in a test host (tests/support/netns.py),
kept free of heavy imports so that such a process starts quickly: moving
into the host's network namespace, and the agent's loop, which runs the
test's code sent over a pipe."""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import traceback
from multiprocessing.connection import Connection

CLONE_NEWNET = 0x40000000


def enter(ns: str) -> None:
    """Moves the calling thread (at a process's start: the process, and every
    thread it starts later) into the network namespace `ns`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


def unix_connect(path: str, timeout: float) -> socket.socket:
    """A socket connected to the unix socket `path` (a server in a test
    host, as the test process reaches it: no cut reaches a unix socket)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError:
        s.close()
        raise
    return s


def serve(conn) -> None:
    """An agent (netns.Agent): runs each piece of code received on `conn` in
    one namespace of names, and sends back ("ok", the value of an
    expression, or None for statements) or ("err", class name, message,
    traceback); ends at None or the connection's end."""
    env: dict = {"__name__": "agent"}
    while True:
        try:
            code = conn.recv()
        except EOFError:
            return
        if code is None:
            return
        try:
            try:
                compiled = compile(code, "<agent>", "eval")
            except SyntaxError:
                exec(compile(code, "<agent>", "exec"), env)
                result = None
            else:
                result = eval(compiled, env)
            conn.send(("ok", result))
        except BaseException as e:  # told to the test, which raises it there
            conn.send(("err", type(e).__name__, str(e), traceback.format_exc()))


if __name__ == "__main__":
    # Started by netns.Agent inside its host: the connection is the descriptor in argv.
    serve(Connection(int(sys.argv[1])))
