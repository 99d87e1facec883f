"""Shared-timer deadlines: expire like asyncio.timeout, let other cancellations through."""

from __future__ import annotations

import asyncio

import pytest

from crawlfleet.fetch.deadlines import Deadlines


async def test_expired_scope_raises_timeout_error() -> None:
    deadlines = Deadlines(0.05, resolution=0.01)
    with pytest.raises(TimeoutError), deadlines.scope():
        await asyncio.sleep(5)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    deadlines.close()


async def test_finished_scope_does_not_fire_later() -> None:
    deadlines = Deadlines(0.05, resolution=0.01)
    with deadlines.scope():
        await asyncio.sleep(0)
    await asyncio.sleep(0.1)  # past the deadline: nothing may be cancelled now
    deadlines.close()


async def test_deadlines_expire_in_order_and_only_when_due() -> None:
    # a wide margin between the short scope (0.05 s) and the deadline: a loaded machine's late
    # wake-up must not turn the short one into a timeout
    deadlines = Deadlines(0.6, resolution=0.01)

    async def wait(delay: float) -> str:
        await asyncio.sleep(delay)
        try:
            with deadlines.scope():
                await asyncio.sleep(0.05)
        except TimeoutError:
            return "timeout"
        return "ok"

    async def hang() -> str:
        try:
            with deadlines.scope():
                await asyncio.sleep(5)
        except TimeoutError:
            return "timeout"
        return "ok"

    assert list(await asyncio.gather(hang(), wait(0.02), hang())) == ["timeout", "ok", "timeout"]
    deadlines.close()


async def test_outside_cancellation_is_not_turned_into_a_timeout() -> None:
    deadlines = Deadlines(5.0)

    async def run() -> None:
        with deadlines.scope():
            await asyncio.sleep(5)

    task = asyncio.create_task(run())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadlines.close()
