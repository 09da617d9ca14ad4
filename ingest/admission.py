"""Admission control of the OTLP/HTTP edge: a quick 503 + Retry-After while too many connections wait.

gunicorn's sync workers (the deployed shape, docker-compose.yml) take one request at a time from
the listening socket they share; what arrives beyond their capacity waits in the kernel's accept
queue, which no worker sees. Without a bound, twice the sustainable rate (bench/overload.py,
docs/benchmarks.md#overload-and-faults-benchoverloadpy) grew that queue past the exporters'
10 s timeout within seconds: most senders timed out, the workers went on writing requests
whose senders had gone (and would resend them), and the successes fell to a fifth of what
the server sustains.

So before it authenticates, reads or decodes anything, a request looks at the accept queue of
the socket it came through (Linux: TCP_INFO of the listening socket, whose tcpi_unacked is the
queue's length). Above settings.INGEST_MAX_QUEUE waiting connections it is answered 503 with
Retry-After, which costs the worker a millisecond or two instead of a whole write, so the queue
drains and the requests admitted are those of senders still waiting. Queued connections wait
about INGEST_MAX_QUEUE × (one request's time) / workers.

Only where the server hands the connection to the application (gunicorn's environ
"gunicorn.socket") and the platform tells the queue length (Linux); elsewhere every request is
admitted. INGEST_MAX_QUEUE = 0 turns the bound off.
"""

from __future__ import annotations

import logging
import os
import socket
import struct

from django.conf import settings

logger = logging.getLogger(__name__)

# struct tcp_info: 8 one-byte fields, then u32 rto, ato, snd_mss, rcv_mss, unacked, sacked, …;
# for a listening socket unacked is the accept queue's length and sacked its limit (the backlog).
_TCP_INFO_BYTES = 32
_UNACKED_OFFSET = 24

# (pid, local address) -> this process's duplicate of the listening socket (None: not found).
# Keyed by pid: gunicorn binds before it forks its workers, and each finds its own copy.
_listeners: dict[tuple[int, object], socket.socket | None] = {}


def queue_length(client: socket.socket) -> int | None:
    """Connections waiting in the accept queue of the socket `client` was accepted on, or None
    when that cannot be told."""
    try:
        address = client.getsockname()
    except OSError:
        return None
    key = (os.getpid(), address)
    if key not in _listeners:
        _listeners[key] = _find_listener(address)
    listener = _listeners[key]
    if listener is None:
        return None
    try:
        info = listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
    except OSError:
        return None
    return struct.unpack_from("<I", info, _UNACKED_OFFSET)[0]


def _find_listener(address) -> socket.socket | None:
    """This process's listening TCP socket bound to `address`, duplicated (the server keeps its own)."""
    if not hasattr(socket, "TCP_INFO"):
        return None
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return None
    for fd in fds:
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            candidate = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if (
                candidate.type == socket.SOCK_STREAM
                and candidate.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                and candidate.getsockname() == address
            ):
                return candidate
        except OSError:
            pass
        candidate.close()
    logger.info("ingest: no listening socket found for %s; admission control is off in this process", address)
    return None


def refusal_wait(environ: dict) -> int:
    """0 when the request may go on, else the seconds of Retry-After of its 503."""
    limit = settings.INGEST_MAX_QUEUE
    client = environ.get("gunicorn.socket")
    if limit <= 0 or not isinstance(client, socket.socket):
        return 0
    waiting = queue_length(client)
    if waiting is None or waiting <= limit:
        return 0
    return settings.INGEST_RETRY_AFTER_SECONDS


def refusal_message() -> str:
    return (
        f"the server is over capacity (more than {settings.INGEST_MAX_QUEUE} requests waiting, "
        "TOOLWATCH_INGEST_MAX_QUEUE); retry shortly"
    )
