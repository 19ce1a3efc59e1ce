"""fivespot/devcluster/netbridge.py: a program in a network namespace of its own binds a port the host
already holds, and still reaches the host's address through the relay (as GoKubeDownscaler,
whose health server binds :8081 hard-coded, reaches the local API server in the import test)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fivespot.devcluster.netbridge import HostRelay, isolated

pytestmark = pytest.mark.integration

PROGRAM = """\
import socket, sys
held = socket.socket(); held.bind(("0.0.0.0", int(sys.argv[1]))); held.listen(1)
with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10) as host:
    host.sendall(b"ping"); print(host.recv(64).decode())
"""


def test_a_program_in_its_own_namespace_binds_a_held_port_and_reaches_the_host(tmp_path: Path) -> None:
    held = socket.socket()
    held.bind(("0.0.0.0", 0))
    held.listen(1)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    address = server.getsockname()

    def answer() -> None:
        connection, _ = server.accept()
        with connection:
            connection.sendall(connection.recv(64) + b"-pong")

    threading.Thread(target=answer, daemon=True).start()
    relay = HostRelay(tmp_path / "relay.sock", address)
    try:
        done = subprocess.run(isolated([sys.executable, "-c", PROGRAM, str(held.getsockname()[1]),
                                        str(address[1])], relay, address),
                              capture_output=True, text=True, timeout=60)
    finally:
        relay.close()
        held.close()
        server.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ping-pong"
