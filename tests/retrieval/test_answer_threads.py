"""A cited answer holds a web thread while the model writes: with a chat model, each web process gets threads for
answers on top of the searches' (measured by `rag_bench answers`)."""

import pytest

from rag_site.management.commands.rag_run import web_command

pytestmark = pytest.mark.unit


def test_with_a_chat_model_each_web_process_gets_threads_for_answers(settings):
    settings.RAG_WEB_THREADS, settings.RAG_ANSWER_STREAMS = 4, 8
    assert "--threads=12" in web_command(python="python", bind="127.0.0.1:1", answers=True)
    assert "--threads=4" in web_command(python="python", bind="127.0.0.1:1", answers=False)
    settings.RAG_LLM_BASE_URL = "http://127.0.0.1:1/v1"
    assert "--threads=12" in web_command(python="python", bind="127.0.0.1:1")  # the default: whether one is set
