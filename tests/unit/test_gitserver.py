"""The loopback git server the GitOps engines fetch from (`fivespot.devcluster.gitserver`): a
burst of fetches is answered rather than reset, and every request and every error lands in its
access log, which is what a failed engine fetch is diagnosed from. It runs git itself, so these
tests need `git` on PATH and no cluster."""

from __future__ import annotations

import subprocess
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fivespot.devcluster import gitserver
from fivespot.devcluster.gitserver import GitServer

pytestmark = pytest.mark.unit

BURST = 96


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[GitServer, str]]:
    server = GitServer(tmp_path / "git").start()
    server.create("team")
    tree = tmp_path / "clone"
    ident = ("-c", "user.name=Platform Team", "-c", "user.email=platform@example.com")
    subprocess.run(["git", "init", "-q", "-b", "main", str(tree)], check=True)
    (tree / "README").write_text("team\n")
    subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tree), *ident, "commit", "-q", "-m", "first"], check=True)
    subprocess.run(["git", "-C", str(tree), "push", "-q", server.url("team"), "main"], check=True)
    try:
        yield server, server.url("team") + "/info/refs?service=git-upload-pack"
    finally:
        server.stop()


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
            return str(answer.status)
    except urllib.error.HTTPError as error:
        return str(error.code)
    except OSError as error:
        return type(error).__name__


def test_a_burst_of_engine_fetches_at_once_is_answered_and_none_is_reset(
        served: tuple[GitServer, str]) -> None:
    _, url = served
    results: Counter[str] = Counter()
    gate = threading.Barrier(BURST)

    def fetch() -> None:
        gate.wait()
        results[_get(url)] += 1

    threads = [threading.Thread(target=fetch) for _ in range(BURST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert results == {"200": BURST}, (results, gitserver.BACKLOG)


def test_each_request_is_logged_with_its_status_and_how_long_it_took(
        served: tuple[GitServer, str]) -> None:
    server, url = served
    assert _get(url) == "200"
    assert _get(server.url("missing") + "/info/refs?service=git-upload-pack") == "404"
    lines = server.log_tail(2).splitlines()
    assert len(lines) == 2, lines
    assert "GET /team.git/info/refs" in lines[0] and '" 200 ' in lines[0] and lines[0].endswith("s")
    assert "GET /missing.git/info/refs" in lines[1] and '" 404 ' in lines[1]
    assert server.log_tail(5, containing="/missing.git").count("\n") == 0


def test_a_request_that_fails_in_the_server_is_logged_with_its_traceback(
        served: tuple[GitServer, str], monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    server, url = served

    def broken() -> str:
        raise gitserver.GitServerError("git went away")

    monkeypatch.setattr(gitserver, "_git", broken)
    assert _get(url) in ("RemoteDisconnected", "ConnectionResetError", "URLError")
    logged = server.log_tail(40)
    assert "error:" in logged and "GitServerError: git went away" in logged, logged
    assert "git went away" not in capfd.readouterr().err
