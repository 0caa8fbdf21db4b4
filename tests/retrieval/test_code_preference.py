from dataclasses import replace

import pytest

from retrieval.candidates import Scored
from retrieval.code_preference import code_preferred, is_asset
from retrieval.query_shape import QueryShape, asks, query_shape

pytestmark = pytest.mark.unit

CSS = Scored(1, 0.60, 1, "static/admin/css/changelists.css", "", "text")
USES = Scored(2, 0.55, 1, "views/main.py", "ChangeList.get_queryset", "python")
DEFINES = Scored(3, 0.52, 1, "views/main.py", "ChangeList.get_filters", "python")


def preferred(query: str, order=(CSS, USES, DEFINES)) -> list[int]:
    shape = query_shape(query)
    return [
        item.chunk_id
        for item in code_preferred(
            order,
            query=query,
            shape=shape,
            definition=0.1,
            asset=0.8,
            asked=shape == QueryShape.QUESTION and asks(query),
        )
    ]


def test_a_question_about_code_puts_the_defining_chunk_before_the_stylesheet():
    assert preferred("how does the admin build changelist filters") == [3, 2, 1]


def test_a_one_word_name_a_question_asks_about_earns_no_bonus():
    # Issue 42: "how does a task retry" is about tasks; the class Task is its subject, not its answer. A description
    # ("Retry the task", a docstring's first sentence) names what the code does: + 0.1.
    task = Scored(1, 0.50, 1, "app/task.py", "Task", "python")
    nearer = Scored(2, 0.53, 1, "app/trace.py", "", "python")
    assert preferred("Retry the task", (task, nearer))[0] == 1
    assert preferred("how does a task retry", (task, nearer))[0] == 2
    assert preferred("how does a task retry", (replace(task, symbol="retry_task"), nearer))[0] == 1  # two words


def test_a_question_about_styles_keeps_the_stylesheet_first():
    assert preferred("the css of the changelist filters")[0] == 1


def test_a_bare_name_puts_its_definition_first():
    assert preferred("get_filters")[0] == 3


def test_prose_without_code_is_left_in_its_order():
    notes = [Scored(1, 0.6, 1, "notes.txt"), Scored(2, 0.5, 1, "more.txt")]
    assert preferred("how are filters built", notes) == [1, 2]


@pytest.mark.parametrize(
    ("path", "asset"),
    [("a/b.css", True), ("x.min.js", True), ("data.json", True), ("main.py", False), ("app.js", False)],
)
def test_assets_are_styles_markup_and_data(path, asset):
    assert is_asset(path) == asset


def test_no_order_stays_empty():
    assert code_preferred([], query="x", shape=QueryShape.SYMBOL, definition=0.1, asset=0.8) == []
