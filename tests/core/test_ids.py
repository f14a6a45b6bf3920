from __future__ import annotations

import pytest

from fleet import InvalidMark, InvalidWorkerId, parse_mark, validate_worker_id


@pytest.mark.parametrize("good", ["a", "w1", "fix-paths", "a.b_c-d", "0", "x" * 64])
def test_valid_ids(good: str) -> None:
    assert validate_worker_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", "A", "-a", ".a", "../x", "a/b", "a b", "x" * 65, "é", "a\n", "_a"]
)
def test_invalid_ids_are_one_line_errors(bad: str) -> None:
    with pytest.raises(InvalidWorkerId) as info:
        validate_worker_id(bad)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_marks_round_trip() -> None:
    assert str(parse_mark("w1@12")) == "w1@12"
    quiet = parse_mark("w1@7q")
    assert quiet.quiet and quiet.seq == 7 and quiet.worker == "w1"


@pytest.mark.parametrize("bad", ["w1", "w1@", "w1@x", "@3", "W@1", "w1@01", "w1@3qq", "w1@-1"])
def test_bad_marks(bad: str) -> None:
    with pytest.raises(InvalidMark):
        parse_mark(bad)
