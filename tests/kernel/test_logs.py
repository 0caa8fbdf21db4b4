"""Log records carry their request's id, identity and route, as JSON lines or appended to the plain line."""

import io
import json
import logging

import pytest

from kernel import logs

pytestmark = pytest.mark.unit


def logger_to(stream: io.StringIO, formatter: logging.Formatter) -> logging.Logger:
    logger = logging.getLogger(f"test.logs.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(formatter)
    logger.handlers = [handler]
    return logger


def test_a_json_line_has_time_level_logger_message_and_the_requests_fields():
    stream = io.StringIO()
    logger = logger_to(stream, logs.JsonFormatter())
    with logs.request_context(request_id="req-1", identity="API key 1a2b3c4d", route="api/v1/search"):
        logger.info("searched %d chunks", 12, extra={"status": 200, "duration_ms": 4.2})
    line = json.loads(stream.getvalue())
    assert set(line) == {
        "time",
        "level",
        "logger",
        "message",
        "request_id",
        "identity",
        "route",
        "status",
        "duration_ms",
    }
    assert line["time"].endswith("+00:00")
    assert (line["level"], line["logger"], line["message"]) == ("INFO", logger.name, "searched 12 chunks")
    assert (line["request_id"], line["identity"], line["route"]) == ("req-1", "API key 1a2b3c4d", "api/v1/search")
    assert (line["status"], line["duration_ms"]) == (200, 4.2)


def test_outside_a_request_a_json_line_has_no_empty_request_fields_and_keeps_its_traceback():
    stream = io.StringIO()
    logger = logger_to(stream, logs.JsonFormatter())
    try:
        raise ValueError("broken")
    except ValueError:
        logger.exception("it failed")
    line = json.loads(stream.getvalue())
    assert set(line) == {"time", "level", "logger", "message", "exception"}
    assert "ValueError: broken" in line["exception"]
    assert "\n" not in stream.getvalue().rstrip("\n")  # one line, the traceback escaped inside it


def test_the_context_ends_with_the_request_and_what_is_learnt_meanwhile_is_added():
    stream = io.StringIO()
    logger = logger_to(stream, logs.JsonFormatter())
    with logs.request_context(request_id="req-2"):
        logs.context_update(identity="user alice")
        logger.info("inside")
    logger.info("after")
    inside, after = (json.loads(line) for line in stream.getvalue().splitlines())
    assert (inside["request_id"], inside["identity"]) == ("req-2", "user alice")
    assert "request_id" not in after and "identity" not in after


def test_a_plain_line_gets_the_request_id_appended_only_when_there_is_one():
    stream = io.StringIO()
    logger = logger_to(stream, logs.TextFormatter("%(levelname)s %(message)s"))
    logger.info("before")
    token = logs.context_enter(request_id="req-3", task_id="t-1", task_name="sources.tasks.root_index_task")
    logger.info("in the task")
    logs.context_leave(token)
    assert stream.getvalue().splitlines() == ["INFO before", "INFO in the task request_id=req-3"]


def test_celerys_own_formatter_is_kept_and_the_request_id_appended():
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("[celery] %(message)s"))
    logger = logging.getLogger("test.logs.celery")
    logger.handlers = [handler]
    logs.handlers_format(logger, log_format="text")
    logs.handlers_format(logger, log_format="text")  # Celery may set up twice: wrapped once
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "done", None, None)
    with logs.request_context(request_id="req-4"):
        handler.filter(record)
    assert handler.format(record) == "[celery] done request_id=req-4"
    logs.handlers_format(logger, log_format="json")
    assert json.loads(handler.format(record))["request_id"] == "req-4"


@pytest.mark.parametrize(
    "incoming",
    ["3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", "abc123", "trace:0af7651916cd43dd8448eb211c80319c/b7ad6b7169203331"],
)
def test_a_sane_incoming_request_id_is_kept(incoming):
    assert logs.request_id_accept(incoming) == incoming


@pytest.mark.parametrize("incoming", [None, "", "x" * 129, "has space", 'quote"d', "new\nline", "é"])
def test_anything_else_gets_a_new_request_id(incoming):
    new = logs.request_id_accept(incoming)
    assert new != incoming and len(new) == 32 and int(new, 16) >= 0
