"""Child processes of `make run`: started together, restarted when one
crashes, stopped together.

Each child gets PR_SET_PDEATHSIG, so even if the parent is killed with
SIGKILL the kernel stops the children: nothing is left running. A child that
exits on its own is started again after a delay that doubles with each crash
in a row (1 s, 2 s, 4 s ... 60 s), so a worker killed by the OOM killer comes
back at once while a child that cannot start (a port in use, a database that
is down) does not spin.
"""

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1

FIRST_DELAY = 1.0
MAX_DELAY = 60.0
# A child that stayed up this long was healthy: its next crash starts the
# delays from the first again. As long as the longest delay, so a child that
# crashes every few minutes never waits a minute to come back.
STABLE_AFTER = 60.0


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    # Own process group: the terminal's Ctrl-C reaches only the supervisor,
    # which then stops the children in order; and a crashed child's own
    # children (Celery's pool, gunicorn's workers) can be found and ended.
    os.setpgrp()


def restart_delay(crashes: int, *, first: float = FIRST_DELAY, cap: float = MAX_DELAY) -> float:
    """Seconds to wait before restarting a child after its ``crashes``-th crash in a row (1-based)."""
    return min(cap, first * 2 ** max(crashes - 1, 0))


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] | None
    process: subprocess.Popen
    started_at: float
    crashes_in_a_row: int = 0
    restarts: int = 0
    restart_at: float | None = None  # set while the child waits to be restarted


class Supervisor:
    def __init__(
        self,
        *,
        log_dir: Path,
        clock: Callable[[], float] = time.monotonic,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        stable_after: float = STABLE_AFTER,
    ) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.stable_after = stable_after
        self.children: dict[str, Child] = {}
        self.stopped = False

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``argv`` as child ``name``, with ``env`` (default: this process's) now and on every restart."""
        process = self._spawn(name, argv, env)
        self.children[name] = Child(name=name, argv=argv, env=env, process=process, started_at=self.clock())
        return process

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None) -> subprocess.Popen:
        log = open(self.log_path(name), "ab")  # noqa: SIM115 - the child owns it
        try:
            return subprocess.Popen(
                argv,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def check(self) -> list[str]:
        """Schedule a restart for each child that exited, restart those whose delay is over.

        Returns one line per child that exited, for the terminal.
        """
        if self.stopped:
            return []
        now = self.clock()
        lines = []
        for child in self.children.values():
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.process = self._spawn(child.name, child.argv, child.env)
                    child.started_at, child.restart_at = now, None
                continue
            code = child.process.poll()
            if code is None:
                continue
            _end_group(child.process.pid)
            if now - child.started_at >= self.stable_after:
                child.crashes_in_a_row = 0
            child.crashes_in_a_row += 1
            child.restarts += 1
            delay = restart_delay(child.crashes_in_a_row, first=self.first_delay, cap=self.max_delay)
            child.restart_at = now + delay
            lines.append(
                f"{child.name} exited with code {code}; restarting in {delay:g} s (restart {child.restarts}); "
                f"see {self.log_path(child.name)}"
            )
        return lines

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM every running child (warm shutdown), then SIGKILL what is left.

        A child waiting to be restarted is not started again (its group was
        ended when it exited).
        """
        if self.stopped:
            return
        self.stopped = True
        current = [child.process for child in self.children.values() if child.restart_at is None]
        for process in current:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in current:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            _end_group(process.pid)


def _end_group(group: int) -> None:
    """SIGKILL what is left of a child's process group once the child itself has exited.

    A child killed outright leaves its own children behind (Celery's pool
    process, gunicorn's workers holding the port); the replacement would
    otherwise start next to them. The group id is the child's pid, which Linux
    does not hand out again while a process of the group is left.
    """
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def process_stop(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM one child process (a warm shutdown), SIGKILL it if it has not exited after ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
