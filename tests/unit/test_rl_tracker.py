"""The gold tracker's proxy scorer: an empty sample (a collapsed policy's answer) gets no reward and is never sent,
so the run that shows the collapse does not end on the server's 422."""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardsmith.data.schema import Turn
from rewardsmith.rl.tracker import _row_means, served_proxy


class _Client:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def rewards(self, prompts: list[Any], responses: list[str], rater: Any = None, standard: Any = None) -> list[float]:
        assert all(r.strip() for r in responses), "an empty response reached the server"
        self.sent += responses
        return [float(len(r)) for r in responses]


def test_empty_samples_get_nan_and_are_not_sent() -> None:
    client = _Client()
    turns = (Turn("user", "hi"),)
    scores = served_proxy(client)([(turns, "abc"), (turns, "  "), (turns, "hello")])
    assert client.sent == ["abc", "hello"]
    np.testing.assert_array_equal(scores, [3.0, np.nan, 5.0])
    # A prompt's mean leaves its empty samples out; a prompt with none scored has no mean.
    np.testing.assert_array_equal(_row_means(np.array([[3.0, np.nan], [np.nan, np.nan]])), [3.0, np.nan])
