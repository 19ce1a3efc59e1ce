"""A git server on loopback, over smart HTTP, for the GitOps engines to pull from.

Why HTTP and not `git daemon`: Flux's GitRepository accepts only http(s) and ssh URLs (its CRD's
pattern), so git:// is out; smart HTTP is spoken by both go-git (Flux) and the git CLI (Argo CD's
repo-server). It is git's own `git http-backend`, run as a CGI program per request from a small
threaded HTTP server: `http.server`'s CGI handler cannot be used, as it always answers 200 before
the program runs, where http-backend answers e.g. 404 for a missing repository in its `Status:`
header. Pushing over HTTP is allowed (`http.receivepack`), so a test can push as a user would.

Every request, and every error a request meets, goes to `access.log` under the root (with the
time it took): when an engine reports a failed fetch, that log says whether the request reached
this server and what it answered.
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import subprocess
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

GIT_TIMEOUT_S: Final = 120
BACKLOG: Final = 128
"""Connections the kernel holds until the server accepts them (socketserver's default is 5: past
it, a burst of engine fetches is reset or left to time out)."""


class GitServerError(RuntimeError):
    """git is missing, or a repository could not be made."""


def _git() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitServerError("the local git server needs git (`git http-backend`) on PATH")
    return found


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def log_message(self, format: str, *args: object) -> None:
        self.server.note(f"{self.address_string()} {format % args}")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        took = time.monotonic() - getattr(self, "_started", time.monotonic())
        self.log_message('"%s" %s %s %.3fs', self.requestline, str(code), str(size), took)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cgi(self) -> None:
        self._started = time.monotonic()
        url = urlsplit(self.path)
        body = self._body() if self.command == "POST" else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.receivepack",
            "GIT_CONFIG_VALUE_0": "true",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": "fivespot",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        done = subprocess.run([_git(), "http-backend"], input=body, env=env, capture_output=True,
                              timeout=GIT_TIMEOUT_S)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _ and b"\n\n" in done.stdout:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and status == 200:
            status, payload = 500, done.stderr
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.log = root, log
        self._log_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def note(self, line: str) -> None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        with self._log_lock, open(self.log, "a") as log:
            log.write(f"{stamp} {line}\n")

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket],
                     client_address: tuple[str, int] | str) -> None:
        self.note(f"{client_address} error:\n{traceback.format_exc()}")


class GitServer:
    """Bare repositories under `root`, served at http://127.0.0.1:PORT/NAME.git while started."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "the git server is not started"
        return int(self._server.server_address[1])

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    @property
    def log_path(self) -> Path:
        """Every request and every error the server met, a line each."""
        return self.root / "access.log"

    def log_tail(self, lines: int = 20, containing: str = "") -> str:
        """The last `lines` of the access log (those containing `containing`): what an engine's
        failed fetch looked like from here."""
        log = self.log_path
        found = [line for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
                 if containing in line]
        return "\n".join(found[-lines:])

    def start(self) -> "GitServer":
        self.root.mkdir(parents=True, exist_ok=True)
        _git()
        self._server = _Server(self.root, self.log_path)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="git-http")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def create(self, name: str, branch: str = "main") -> Path:
        """A new bare repository NAME.git (its default branch `branch`); its path."""
        path = self.root / f"{name}.git"
        done = subprocess.run([_git(), "init", "--bare", "--quiet", f"--initial-branch={branch}",
                               str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise GitServerError(f"git init --bare {path}: {done.stderr.strip()}")
        return path
