"""TCP ports: the ports the settings name, checked when the settings are read, so a port out of
range is one `invalid setting` line, not a traceback from deep in a client; and the HTTP ports
the worker and the sink listen on, taken before either starts, so a port in use is one line too
(`failed: sink HTTP port 127.0.0.1:8080: Address already in use`, exit 3)."""

from __future__ import annotations

import os
import socket
from typing import Final
from urllib.parse import urlsplit

LOWEST_PORT: Final = 1
"""Port 0 asks the operating system for any free port when listening, and reaches nothing when
connecting: no setting takes it (the sink's `--port 0` is an option, not a setting)."""
HIGHEST_PORT: Final = 65535


class PortUnavailable(OSError):
    """A process's HTTP port cannot be listened on (in use, or not allowed)."""


def listen(host: str, port: int, what: str) -> socket.socket:
    """A socket listening on `host:port`, or PortUnavailable naming `what` listens there and
    why it cannot (`sink HTTP port 127.0.0.1:8080: Address already in use`)."""
    try:
        return socket.create_server((host, port))
    except OSError as error:
        why = os.strerror(error.errno) if error.errno else str(error)
        raise PortUnavailable(f"{what} port {host}:{port}: {why}") from None


def port_problem(port: int | str) -> str | None:
    """Why `port` (a number, or the text of an address) is not a port a setting may name, or
    None."""
    text = str(port)
    if text.isdigit() and LOWEST_PORT <= int(text) <= HIGHEST_PORT:
        return None
    return f"{text} is not a port ({LOWEST_PORT} to {HIGHEST_PORT})"


def _port_text(address: str) -> str:
    """The port part of `host:port` or `[v6]:port`; empty for a host alone or an IPv6 address
    without brackets (which names no port)."""
    if address.startswith("["):
        return address.partition("]")[2].removeprefix(":")
    return address.rpartition(":")[2] if address.count(":") == 1 else ""


def bootstrap_port_problems(bootstrap: str) -> list[str]:
    """Why the ports of a Kafka bootstrap list (`host:port,host:port`, `[v6]:port`, a host
    without a port taking Kafka's 9092) cannot be used, one line per address."""
    problems = []
    for address in (part.strip() for part in bootstrap.split(",")):
        port = _port_text(address)
        problem = port_problem(port) if port else None
        if problem is not None:
            problems.append(f"{address}: {problem}")
    return problems


def url_port_problem(url: str) -> str | None:
    """Why the port of a URL cannot be used, or None (a URL without one takes its scheme's).
    Never quotes the URL: it may carry a password."""
    port = _port_text(urlsplit(url).netloc.rpartition("@")[2])
    return port_problem(port) if port else None
