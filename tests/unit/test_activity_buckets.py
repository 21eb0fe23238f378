"""The activity chart's bucketing (``app.views.bucket_index``): a transition stamped in the same
millisecond as the look is counted in the newest bucket. It was dropped, so a replay made just
before a look (an operator's usual sequence) was missing from the chart on SQLite now and then."""

from __future__ import annotations

from jobtrail.app.views import bucket_index


def test_the_bucket_at_now_itself_is_the_newest() -> None:
    assert bucket_index(12, 12) == 11


def test_inside_and_outside_the_window() -> None:
    assert [bucket_index(b, 12) for b in (0, 5, 11)] == [0, 5, 11]
    assert bucket_index(-1, 12) is None and bucket_index(13, 12) is None
