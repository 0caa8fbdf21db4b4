import threading

import pytest

from sources.encoder_thread import BackgroundWork, WorkCancelled

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


def test_a_cancelled_work_stops_at_its_next_batch_and_the_next_job_s_work_runs():
    """A job cancelled while a batch embeds must not leave the one encoder thread computing vectors nobody reads."""
    started = threading.Event()

    def endless(report):
        started.set()
        while True:  # batch after batch, until the report says stop
            report(1)
            threading.Event().wait(0.001)

    abandoned = BackgroundWork(endless)
    assert started.wait(30)
    queued = BackgroundWork(lambda report: "never")  # behind it on the thread: dropped before it starts
    abandoned.cancel()
    queued.cancel()
    assert BackgroundWork(lambda report: "the next job's vectors").result() == "the next job's vectors"
    with pytest.raises(WorkCancelled):
        abandoned.result()
