"""Runs the command blocks of a docs page as a reader would type them, and checks what they print.

The rules a page follows (docs/contributing/docs.md, "How the command blocks are run"): every
fenced `sh` block runs, in order, in one folder, each in `bash` with `set -euo pipefail`; what a
block exports and where it `cd`s carries over to the next, as in one terminal. A `text` block
right after an `sh` block is what that block prints: its lines must appear in the output in
order, each matching a whole line, `...` matching anything. A block's first line may say
`# exits N` (its last command must exit N, not 0), `# leave this running, until it prints "WORD"` (a terminal of its own: started in the
background, the next block waits for WORD, Ctrl-C at the end of the page, which must end it with
exit 0), `# not run by the tests: REASON`, or `# set these to yours` (its variables are set to
the test's values instead).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

BACKGROUND = re.compile(r'^# leave this running, until it prints "([^"]+)"')
SKIPPED = re.compile(r"^# not run by the tests: (\S.*)$")
EXITS = re.compile(r"^# exits (\d+)$")
SETTINGS = "# set these to yours"
SETTING = re.compile(r"^export ([A-Z_][A-Z0-9_]*)=")


@dataclass
class Block:
    """One `sh` block of a page and the output the page says it prints."""

    page: Path
    line: int
    code: str
    expected: list[str] = field(default_factory=list)

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0]

    @property
    def waits_for(self) -> str | None:
        found = BACKGROUND.match(self.first_line)
        return found.group(1) if found else None

    @property
    def exit_code(self) -> int:
        found = EXITS.match(self.first_line)
        return int(found.group(1)) if found else 0

    @property
    def skipped_because(self) -> str | None:
        found = SKIPPED.match(self.first_line)
        return found.group(1) if found else None

    @property
    def is_settings(self) -> bool:
        return self.first_line.strip() == SETTINGS

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's `sh` blocks, each with the `text` block that follows it, if one does."""
    found: list[Block] = []
    previous_was_sh = False
    for token in MarkdownIt("commonmark").parse(page.read_text()):
        if token.type != "fence":
            if token.type not in ("paragraph_open", "inline", "paragraph_close"):
                previous_was_sh = False
            continue
        language = token.info.strip()
        line = (token.map[0] + 1) if token.map else 0
        if language == "sh":
            found.append(Block(page, line, token.content))
            previous_was_sh = True
            continue
        if language == "text" and previous_was_sh and found:
            found[-1].expected = [l for l in token.content.split("\n") if l.strip()]
        previous_was_sh = False
    return found


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.rstrip().split("...")))


def unmatched(expected: list[str], output: str) -> list[str]:
    """The expected lines not found, in order, as whole lines of the output (`...`: anything)."""
    lines = [line.rstrip() for line in output.split("\n")]
    position = 0
    for index, wanted in enumerate(expected):
        pattern = _pattern(wanted)
        while position < len(lines) and not pattern.fullmatch(lines[position]):
            position += 1
        if position == len(lines):
            return expected[index:]
        position += 1
    return []


def as_a_terminal() -> None:
    """A block left running gets Ctrl-C as a terminal's shell would: with SIGINT at its default.
    A process started in the background by a non-interactive shell (a CI script's `cmd &`,
    `nohup`) has SIGINT ignored, and every child inherits that through exec; bash cannot trap a
    signal ignored on entry, so a page's `trap ... INT` would never run. Exec resets a handled
    signal to its default, so handling it here is enough."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class Background:
    """A block left running in a terminal of its own; its output is collected line by line."""

    def __init__(self, block: Block, process: subprocess.Popen[str]) -> None:
        self.block = block
        self.process = process
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            sys.stdout.write(f"  [{self.block.where}] {line}")
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, word: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(word in line for line in self.lines):
            if self.process.poll() is not None:
                raise AssertionError(f"{self.block.where}: exited {self.process.returncode} before "
                                     f"printing {word!r}:\n" + "\n".join(self.lines[-40:]))
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.block.where}: no {word!r} within {timeout_s:.0f} s:\n"
                                     + "\n".join(self.lines[-40:]))
            time.sleep(0.2)

    def interrupt(self, timeout_s: float = 120.0) -> int:
        """Ctrl-C, as a reader ends it; the exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise AssertionError(f"{self.block.where}: still running {timeout_s:.0f} s after Ctrl-C")
        self._reader.join(10)
        return self.process.returncode


@dataclass
class Session:
    """One reader's terminal(s) on one page: a folder, the environment, what runs in the background."""

    workdir: Path
    settings: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    """What the reader's machine has that the test must give (a git identity, say)."""
    timeout_s: float = 900.0
    background: list[Background] = field(default_factory=list)
    ran: list[tuple[Block, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = self.workdir / ".docs-session"
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "env.sh").write_text("")
        (self.state / "cwd").write_text(str(self.workdir))

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTEST_CURRENT_TEST")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return {**env, **self.env}

    def script(self, code: str, *, keep_state: bool) -> str:
        state = shlex.quote(str(self.state))
        save = (f"\ndeclare -px > {state}/env.sh.new && mv {state}/env.sh.new {state}/env.sh"
                f"\npwd > {state}/cwd") if keep_state else ""
        return (f"set -euo pipefail\nsource {state}/env.sh\ncd \"$(cat {state}/cwd)\"\n"
                f"{code}{save}\n")

    def run(self, block: Block) -> None:
        started = time.monotonic()
        if block.skipped_because is not None:
            return
        if block.is_settings:
            self._apply_settings(block)
            return
        word = block.waits_for
        if word is not None:
            as_a_terminal()
            process = subprocess.Popen(
                ["bash", "-c", self.script(block.code, keep_state=False)], env=self.environment(),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            running = Background(block, process)
            self.background.append(running)
            running.wait_for(word, self.timeout_s)
            self.ran.append((block, time.monotonic() - started))
            return
        code = block.code
        if block.exit_code:  # the last command's exit code is the block's; state is kept
            code = f"set +e\n{code}\nstatus=$?\nset -e\n[ $status = {block.exit_code} ]"
        result = subprocess.run(["bash", "-c", self.script(code, keep_state=True)],
                                env=self.environment(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=self.timeout_s)
        sys.stdout.write(f"$ [{block.where}]\n{block.code}{result.stdout}")
        if result.returncode != 0:
            raise AssertionError(f"{block.where}: exit other than {block.exit_code}:\n"
                                 f"{block.code}\n{result.stdout}")
        missing = unmatched(block.expected, result.stdout)
        if missing:
            raise AssertionError(f"{block.where}: the page says it prints {missing[0]!r}, not found "
                                 f"in order in:\n{result.stdout}")
        self.ran.append((block, time.monotonic() - started))

    def _apply_settings(self, block: Block) -> None:
        names = [m.group(1) for line in block.code.split("\n") if (m := SETTING.match(line))]
        if sorted(names) != sorted(self.settings):
            raise AssertionError(f"{block.where}: the page sets {names}, the test {sorted(self.settings)}")
        code = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in self.settings.items())
        subprocess.run(["bash", "-c", self.script(code, keep_state=True)], env=self.environment(),
                       check=True)

    def stop(self) -> None:
        """Ctrl-C in every background terminal; each must exit 0 and print what the page says."""
        failures = []
        for running in reversed(self.background):
            code = running.interrupt()
            if code != 0:
                failures.append(f"{running.block.where}: exit {code} after Ctrl-C:\n"
                                + "\n".join(running.lines[-40:]))
            missing = unmatched(running.block.expected, "\n".join(running.lines))
            if missing:
                failures.append(f"{running.block.where}: the page says it prints {missing[0]!r}")
        self.background.clear()
        if failures:
            raise AssertionError("\n".join(failures))


def run_page(page: Path, workdir: Path, settings: Mapping[str, str] | None = None, *,
             env: Mapping[str, str] | None = None, before: list[Block] | None = None) -> Session:
    """Every `sh` block of the page, in order, as one reader; returns the session (timings).
    `before`: blocks of another page the reader ran first, in the same folder (part 1 of a
    tutorial, say)."""
    session = Session(workdir, settings or {}, env or {})
    try:
        for block in [*(before or []), *blocks(page)]:
            session.run(block)
    finally:
        session.stop()
    for block, seconds in session.ran:
        print(f"{block.where}: {seconds:.1f} s")
    return session


def up_to_the_first_background_block(page: Path) -> list[Block]:
    """The page's blocks a reader runs before the first one left running."""
    found = blocks(page)
    first = next((i for i, block in enumerate(found) if block.waits_for is not None), len(found))
    return found[:first]


def pages_with_commands() -> list[Path]:
    """The pages whose commands the suite runs: the tutorial and every how-to guide."""
    pages = sorted((DOCS / "tutorial").glob("*.md")) + sorted((DOCS / "how-to").glob("*.md"))
    return [page for page in pages if blocks(page)]
