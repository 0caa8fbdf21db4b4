"""`make run`'s supervisor restarts a child that exits, waiting longer after
each crash in a row, and stops everything, with real child processes. The
clock is the test's, so no test waits for a delay to pass."""

import os
import signal
import sys

import psutil
import pytest

from rag_site.supervisor import Supervisor, restart_delay
from tests.conftest import wait_for

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def supervisor(tmp_path, clock):
    supervisor = Supervisor(log_dir=tmp_path / "log", clock=clock)
    yield supervisor
    supervisor.stop_all(timeout=5)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_restart_delay_doubles_up_to_the_cap():
    assert [restart_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_a_crashing_child_is_restarted_with_growing_delays(supervisor, clock):
    first = supervisor.start("job", python("raise SystemExit(3)"))
    first.wait(timeout=30)
    assert supervisor.check() == [
        f"job exited with code 3; restarting in 1 s (restart 1); see {supervisor.log_path('job')}"
    ]

    clock.now += 0.5
    assert supervisor.check() == []
    assert supervisor.children["job"].process is first  # not yet: the delay is not over

    clock.now += 0.5
    supervisor.check()
    second = supervisor.children["job"].process
    assert second.pid != first.pid
    second.wait(timeout=30)
    assert supervisor.check()[0].startswith("job exited with code 3; restarting in 2 s (restart 2)")

    clock.now += 2
    supervisor.check()
    supervisor.children["job"].process.wait(timeout=30)
    assert supervisor.check()[0].startswith("job exited with code 3; restarting in 4 s (restart 3)")


def test_a_child_that_stayed_up_is_restarted_after_the_first_delay_again(supervisor, clock):
    supervisor.start("job", python("raise SystemExit(1)")).wait(timeout=30)
    supervisor.check()
    clock.now += 1
    supervisor.check()
    supervisor.children["job"].process.wait(timeout=30)
    clock.now += 61  # it ran (as far as the supervisor knows) for over a minute
    assert supervisor.check()[0].startswith("job exited with code 1; restarting in 1 s (restart 2)")


def test_a_killed_child_takes_its_own_children_with_it(supervisor):
    # A parent that starts a grandchild and waits, as Celery does with its pool.
    parent = supervisor.start(
        "worker",
        python(
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
        ),
    )
    grandchild = wait_for(lambda: psutil.Process(parent.pid).children(), what="the grandchild")[0]
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=30)
    assert supervisor.check()[0].startswith("worker exited with code -9; restarting in 1 s (restart 1)")
    wait_for(
        lambda: not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE,
        timeout=30,
        what="the orphaned grandchild to be killed",
    )


def test_stop_all_stops_running_children_and_restarts_nothing(supervisor, clock):
    running = supervisor.start("web", python("import time; time.sleep(600)"))
    supervisor.start("beat", python("raise SystemExit(2)")).wait(timeout=30)
    supervisor.check()
    supervisor.stop_all(timeout=10)
    assert running.returncode == -signal.SIGTERM
    clock.now += 120
    assert supervisor.check() == []
    assert supervisor.children["beat"].process.returncode == 2  # never started again


def test_a_restarted_child_gets_the_environment_it_was_started_with(supervisor, clock):
    # The front's and web's settings (FRONT_*, RAG_TRUST_PROXY_HEADERS) must survive a crash.
    code = "import os; raise SystemExit(7 if os.environ.get('FRONT_SITE') == 'http://:1' else 1)"
    first = supervisor.start("front", python(code), env={**os.environ, "FRONT_SITE": "http://:1"})
    first.wait(timeout=30)
    assert supervisor.check()[0].startswith("front exited with code 7")

    clock.now += 1
    supervisor.check()
    second = supervisor.children["front"].process
    assert second.pid != first.pid
    assert second.wait(timeout=30) == 7
