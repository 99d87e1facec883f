"""The worker's descriptor limit: raised to the hard limit at start, a warning when too low."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from crawlfleet.worker.fds import needed, raise_nofile


@pytest.fixture
def nofile() -> Iterator[tuple[int, int]]:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield before
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_soft_limit_raised_to_the_hard_one(nofile: tuple[int, int]) -> None:
    _, hard = nofile
    if hard == resource.RLIM_INFINITY or hard < 512:
        pytest.fail(f"this test needs a finite hard limit of 512 or more, not {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    assert raise_nofile(64, 32) is None or hard < needed(64, 32)
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard


def test_a_hard_limit_too_low_for_the_concurrency__one_warning(nofile: tuple[int, int]) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile[0], nofile[1]))
    warning = raise_nofile(1_000_000_000, 32)
    assert warning is not None and "concurrency 1000000000" in warning
