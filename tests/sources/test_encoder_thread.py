import threading

import pytest

from sources.encoder_thread import BackgroundWork

pytestmark = pytest.mark.unit


def test_the_work_runs_on_the_encoder_thread_and_its_reports_reach_the_waiting_thread():
    ran_on, heard_on, heard = [], [], []

    def work(report):
        ran_on.append(threading.current_thread().name)
        for done in (4, 8, 9):
            report(done)
        return "vectors"

    result = BackgroundWork(work).result(lambda done: (heard.append(done), heard_on.append(threading.get_ident())))
    assert result == "vectors" and heard == [4, 8, 9]
    assert ran_on[0].startswith("rag-encoder")
    assert set(heard_on) == {threading.get_ident()}  # the job's callbacks write its row: never from the encoder


def test_an_error_on_the_encoder_thread_is_raised_to_the_waiting_thread_and_the_thread_serves_on():
    def failing(report):
        report(1)
        raise ValueError("out of memory")

    with pytest.raises(ValueError, match="out of memory"):
        BackgroundWork(failing).result()
    assert BackgroundWork(lambda report: 42).result() == 42
