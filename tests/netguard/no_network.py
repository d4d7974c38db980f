"""Refuses every socket connection and name lookup that is not loopback, so no test can reach the internet.

Installed in the pytest process by conftest.py and in child processes (CLI tests) through
sitecustomize.py on PYTHONPATH.
"""
from __future__ import annotations

import ipaddress
import socket

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkBlocked(OSError):
    """A test tried to reach a non-loopback address."""


def _is_loopback_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: object) -> None:
    if sock.family == getattr(socket, "AF_UNIX", object()):
        return
    host = address[0] if isinstance(address, tuple) else address
    if not _is_loopback_host(host):
        raise NetworkBlocked(f"tests may not reach the network: connect to {address!r} refused")


def _connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)


def _connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    if host is not None and not _is_loopback_host(host):
        raise NetworkBlocked(f"tests may not resolve names: lookup of {host!r} refused")
    return _real_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    """Patch the socket module in this process."""
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]
