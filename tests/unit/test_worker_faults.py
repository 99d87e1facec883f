"""Which errors are the worker's own machine's (disk full, out of files), not the page's."""

from __future__ import annotations

import errno

import pytest

from crawlfleet.monitor.alerts import AlertRules, evaluate
from crawlfleet.notify.payloads import fleet_alert_body, headline
from crawlfleet.worker.faults import local_fault


def _caused(outer: BaseException, inner: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("exc", "local"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError(errno.EMFILE, "Too many open files"), True),
        (OSError(errno.ENFILE, "Too many open files in system"), True),
        (_caused(RuntimeError("flush failed"), OSError(errno.ENOSPC, "full")), True),
        (OSError(errno.ECONNRESET, "reset by peer"), False),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), False),
        (OSError("no errno"), False),
        (ValueError("a bug"), False),
    ],
)
def test_local_fault__only_the_machines_resources(exc: BaseException, local: bool) -> None:
    assert (local_fault(exc) is not None) is local


def test_local_fault__a_cycle_of_causes_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    assert local_fault(a) is None


def test_evaluate__a_worker_with_a_local_fault_fires_its_alert() -> None:
    alerts = evaluate(AlertRules(), local_faults=["host-1"])
    assert [(a.rule, a.subject) for a in alerts] == [("worker_local_fault", "host-1")]
    assert "host-1 stopped leasing" in alerts[0].message


def test_fleet_alert_body__no_run_and_a_subject_in_its_headline() -> None:
    body = fleet_alert_body("k", "worker_local_fault", "host-1", "full", value=1, threshold=0, at=5)
    assert (body["job"], body["run"], body["event"]) == (None, None, "alert")
    assert headline(body) == "[critical] host-1: worker_local_fault — full"
