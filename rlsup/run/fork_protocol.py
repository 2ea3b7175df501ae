"""The warm start's messages between the daemon and its fork server: JSON packets on a Unix socket pair."""
from __future__ import annotations

import json
import os
import socket

# What the server says: once, that it has imported what workers import (or why it could not); then, for each
# request, the pid it forked or why it would not; and, for each worker it forked, how it ended.
READY, FAILED, STARTED, REFUSED, EXITED = "ready", "failed", "started", "refused", "exited"
START = "start"  # the daemon's one request: fork a worker for this run, with this environment and cwd
FORK_SERVER_FLAG = "--fork-server"  # `python -m rlsup.worker --fork-server HOME` is the server
# A request carries the worker's whole environment: a few kilobytes in practice, a megabyte at the very most.
LARGEST_PACKET = 1 << 20


def channel_pair() -> tuple[socket.socket, socket.socket]:
    """Packets keep their bounds (no framing to get wrong) and may carry descriptors: the worker's log."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(channel: socket.socket, kind: str, descriptors: tuple[int, ...] = (), **fields) -> None:
    data = json.dumps({"kind": kind, **fields}).encode()
    if len(data) > LARGEST_PACKET:
        raise ValueError(f"a {kind} message of {len(data)} bytes is over the {LARGEST_PACKET}-byte limit")
    if descriptors:
        socket.send_fds(channel, [data], list(descriptors))
    else:
        channel.send(data)


def receive(channel: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the descriptors it carried; (None, []) once the other side has closed its end.
    Raises BlockingIOError on a non-blocking channel with nothing to read."""
    data, descriptors, _flags, _address = socket.recv_fds(channel, LARGEST_PACKET, 4)
    if not data:
        for descriptor in descriptors:
            os.close(descriptor)
        return None, []
    try:
        message = json.loads(data)
    except ValueError:
        message = None
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        for descriptor in descriptors:
            os.close(descriptor)
        return {"kind": "garbled"}, []
    return message, descriptors
