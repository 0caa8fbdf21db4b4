"""Child processes of `make run`: started together, stopped together.

Each child gets PR_SET_PDEATHSIG, so even if the parent is killed with
SIGKILL the kernel stops the children: nothing is left running.
"""

import ctypes
import os
import signal
import subprocess
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    # Own process group: the terminal's Ctrl-C reaches only the supervisor,
    # which then stops the children in order.
    os.setpgrp()


class Supervisor:
    def __init__(self, *, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.children: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
        log.close()
        self.children[name] = process
        return process

    def poll_failed(self) -> tuple[str, int] | None:
        for name, process in self.children.items():
            if process.poll() is not None:
                return name, process.returncode
        return None

    def stop_all(self, timeout: float = 20.0) -> None:
        """SIGTERM every child (warm shutdown), then SIGKILL what is left."""
        for process in self.children.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.children.values():
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
