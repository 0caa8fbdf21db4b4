import pytest

from retrieval.query_shape import QueryShape, asks, name_words, query_shape
from retrieval.vector_feedback import Feedback, feedback_for

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("query", "shape"),
    [
        ("get_object_or_404", QueryShape.IDENTIFIER),
        ("ChangeList.get_filters", QueryShape.IDENTIFIER),
        ("HttpServerConfig", QueryShape.IDENTIFIER),
        ("get_filters()", QueryShape.IDENTIFIER),
        ("F", QueryShape.SYMBOL),
        ("pagination", QueryShape.SYMBOL),
        ("how does the admin build changelist filters", QueryShape.QUESTION),
        ('Traceback (most recent call last):\n  File "app.py", line 3, in <module>', QueryShape.TRACE),
        ("  at com.example.Main.run(Main.java:12)\n  at java.lang.Thread.run(Thread.java:1)", QueryShape.TRACE),
        (" ".join(["word"] * 31), QueryShape.LONG),
    ],
)
def test_a_query_is_told_by_its_shape(query, shape):
    assert query_shape(query) == shape


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        ("how does the admin build changelist filters", True),
        ("Where is the retry delay computed", True),
        ("if I pass a countdown to a chord, does it delay the header", True),
        ("the worker logs 'Received unregistered task', is a result stored?", True),
        ("Returns the default stream encoding if not found.", False),
        ("Checks if a given encoding is ascii.", False),
        ("however the header is parsed", False),
    ],
)
def test_a_question_a_person_asks_is_told_from_a_description(query, asked):
    assert asks(query) == asked


def test_name_words_are_whole_and_split():
    assert name_words("ChangeList.get_filters") == {"changelist", "change", "list", "get_filters", "get", "filters"}


@pytest.mark.parametrize(
    ("query", "moved"),
    [
        ("what is the boiling point of water at altitude", True),
        ("word " * 40, True),
        ("get_object_or_404", False),
        ("F", False),
        ('Traceback (most recent call last):\n  File "x.py", line 1', False),
    ],
)
def test_only_questions_and_long_texts_get_feedback(query, moved):
    assert (feedback_for(query, enabled=True) is not None) == moved
    assert feedback_for(query, enabled=False) is None


def test_feedback_weights_are_checked():
    with pytest.raises(ValueError, match="beta"):
        Feedback(k=10, beta=0.0)
