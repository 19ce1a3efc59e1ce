"""Run a program in a network namespace of its own that still reaches one TCP address of the
host at the same address: for a peer that binds a fixed port. GoKubeDownscaler's health server
binds `:8081`, hard-coded, and exits when it cannot, so without this only one could run on a
machine, and none beside anything else on 8081 (another test's, a benchmark's).

Two relays, joined by a unix socket (a file both namespaces see): `HostRelay`, in the caller,
accepts on the socket and connects to the host address (the local API server); inside the new
namespace (`unshare --net`, root), `python -m fivespot.devcluster.netbridge SOCKET HOST:PORT -- PROGRAM
ARGS...` brings loopback up, listens on HOST:PORT and relays each connection to the socket, and
runs PROGRAM, exiting with its status. The program's kubeconfig names the same address as
outside, and TLS is untouched: bytes are relayed, nothing is terminated.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

CHUNK: Final = 65536


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (sink, source):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _join(accepted: socket.socket, connect: socket.socket) -> None:
    for source, sink in ((accepted, connect), (connect, accepted)):
        threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _serve(listener: socket.socket, target: str | tuple[str, int]) -> None:
    """Each connection accepted, joined to a new one to `target` (a unix socket's path, or a
    TCP address)."""
    while True:
        try:
            accepted, _ = listener.accept()
        except OSError:
            return
        try:
            if isinstance(target, str):
                connect = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                connect.connect(target)
            else:
                connect = socket.create_connection(target, timeout=10)
                connect.settimeout(None)
        except OSError:
            accepted.close()
            continue
        _join(accepted, connect)


class HostRelay:
    """Connections to the unix socket `path`, relayed to the host's `address`."""

    def __init__(self, path: Path, address: tuple[str, int]) -> None:
        self.path = path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        threading.Thread(target=_serve, args=(self._listener, address), daemon=True).start()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self.path.unlink(missing_ok=True)


def isolated(argv: list[str], relay: HostRelay, address: tuple[str, int]) -> list[str]:
    """`argv` run in a network namespace of its own, reaching `address` through `relay`."""
    return ["unshare", "--net", "--", sys.executable, "-m", "fivespot.devcluster.netbridge", str(relay.path),
            f"{address[0]}:{address[1]}", "--", *argv]


def main(args: list[str]) -> int:
    """Inside the namespace: loopback up, HOST:PORT relayed to the socket, the program run."""
    path, address, separator, *program = args
    assert separator == "--" and program, "usage: SOCKET HOST:PORT -- PROGRAM ARGS..."
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    host, _, port = address.rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    child = subprocess.Popen(program)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
