"""The no-network guard itself: a test that reaches past loopback must fail."""
import socket
import subprocess
import sys

import pytest
from no_network import NetworkBlocked


def test_connect_to_public_address_is_refused() -> None:
    s = socket.socket()
    try:
        with pytest.raises(NetworkBlocked):
            s.connect(("93.184.216.34", 80))
    finally:
        s.close()


def test_name_lookup_is_refused() -> None:
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("example.com", 443)


def test_loopback_is_allowed() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.socket()
    try:
        c.connect(srv.getsockname())
    finally:
        c.close()
        srv.close()


def test_child_processes_are_guarded_too() -> None:
    code = "import socket; socket.create_connection(('8.8.8.8', 53), timeout=1)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "NetworkBlocked" in proc.stderr
