import pytest

from retrieval.query_shape import QueryShape, name_words, query_shape
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
