"""A command meant for the running instance says so when no `make run` serves the database it is about to write."""

import fcntl

import pytest

from rag_site.embedded import database_note, run_lock_held

pytestmark = pytest.mark.unit


def test_a_key_made_where_no_make_run_runs_says_where_it_goes(tmp_path):
    note = database_note(tmp_path, "rag_apikey")
    assert f"no `make run` is running from {tmp_path}" in note and "RAG_VAR_DIR" in note


def test_nothing_is_said_while_make_run_serves_that_directory(tmp_path):
    with open(tmp_path / "run.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what rag_run holds for its whole life
        assert run_lock_held(tmp_path)
        assert database_note(tmp_path, "rag_apikey") == ""
    assert not run_lock_held(tmp_path)  # let go: a probe never keeps the lock


def test_commands_that_only_read_or_measure_say_nothing(tmp_path):
    assert database_note(tmp_path, "rag_eval") == "" and database_note(tmp_path, "migrate") == ""
