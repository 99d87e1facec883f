"""Chromium's processes, read from /proc: memory, and the sweep of browsers left by dead workers.

How a browser is tied to its worker. The worker talks to Playwright's driver over pipes, and
the driver launches Chromium as the leader of a new process group, talking to it over a pipe as
well. When the worker dies, even by ``kill -9``, the driver reads end-of-file, kills the
browser's process group and exits; when the driver dies, Chromium reads end-of-file on its pipe
and exits. A browser that is wedged (stopped, or stuck in a kernel call) does neither, so:

* every browser is launched with ``CRAWLFLEET_BROWSER_OWNER=<pid>:<start>:<token>`` in its
  environment (the worker's pid and kernel start time, which no later process can share, and a
  per-pool token), and registered in a small file in the runtime directory (the browser's
  process group and profile directory);
* a pool starting up sweeps: processes carrying the variable whose owner is gone are killed
  (with their process group), and the profile directories of dead owners' registrations are
  removed. Processes of live owners, and anything not carrying the variable, are never touched.

What is left after a driver killed with SIGKILL: an empty ``playwright-artifacts-*`` directory
in the temporary directory (Playwright names nothing that would tie it to its browser), and,
under an init that does not reap (some containers' PID 1), zombie entries of the killed
processes, which hold no memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

OWNER_ENV = "CRAWLFLEET_BROWSER_OWNER"
PROFILE_PREFIX = "playwright_chromiumdev_profile-"
"""How Playwright names the temporary profile of a launched browser."""
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_OWNER_PREFIX = OWNER_ENV.encode() + b"="


@dataclass(frozen=True, slots=True)
class Proc:
    """One process, from ``/proc/PID/stat``."""

    pid: int
    state: str
    """``R``, ``S``, ``D``, ``T`` (stopped), ``Z`` (exited, not yet reaped), ..."""
    ppid: int
    pgid: int
    start: int
    """Start time in clock ticks since boot: (pid, start) names a process for good."""
    rss: int
    """Resident set size in bytes."""
    cpu: float
    """CPU seconds used so far, user and system (its exited children's not counted)."""


def read_proc(pid: int) -> Proc | None:
    """The process ``pid``, or None if it is gone or a zombie (or not readable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain anything, spaces and ")" included.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if not fields or fields[0] == b"Z":
        return None  # exited: it holds no memory and cannot be killed any more
    try:
        return Proc(
            pid=pid,
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            start=int(fields[19]),
            rss=int(fields[21]) * _PAGE_SIZE,
            cpu=(int(fields[11]) + int(fields[12])) / _CLOCK_TICKS,
        )
    except (IndexError, ValueError):
        return None


def pids() -> Iterator[int]:
    """Every process id in /proc."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def all_procs() -> list[Proc]:
    return [p for p in map(read_proc, pids()) if p is not None]


def descendants(root: int, procs: Iterable[Proc] | None = None) -> list[Proc]:
    """``root`` and every process below it."""
    table = list(all_procs() if procs is None else procs)
    children: dict[int, list[Proc]] = {}
    by_pid = {p.pid: p for p in table}
    for p in table:
        children.setdefault(p.ppid, []).append(p)
    found = [by_pid[root]] if root in by_pid else []
    stack = list(children.get(root, ()))
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children.get(p.pid, ()))
    return found


def tree_rss(root: int) -> int:
    """Summed RSS of ``root`` and all its descendants (shared pages counted in each)."""
    return sum(p.rss for p in descendants(root))


def tree_memory(root: int) -> Memory:
    """Summed memory of ``root`` and all its descendants (see :class:`Memory`)."""
    total = Memory(0, 0)
    for p in descendants(root):
        mem = memory_of(p.pid)
        if mem is not None:
            total = total + mem
    return total


def group(pgid: int, procs: Iterable[Proc] | None = None) -> list[Proc]:
    """The live members of process group ``pgid``."""
    return [p for p in (all_procs() if procs is None else procs) if p.pgid == pgid]


@dataclass(frozen=True, slots=True)
class Memory:
    """Resident memory of some processes, summed over them, in bytes."""

    rss: int
    """VmRSS: counts the pages of the binary and its libraries once in every process, so a
    browser's twenty processes sum to about three times what they hold."""
    anon: int
    """RssAnon + RssShmem: the memory the processes allocated (heaps, shared memory), without
    file-backed pages. Close to their PSS (see :func:`pss`), at a hundredth of its cost."""

    def __add__(self, other: Memory) -> Memory:
        return Memory(self.rss + other.rss, self.anon + other.anon)


_STATUS_KEYS = {b"VmRSS": 0, b"RssAnon": 1, b"RssShmem": 2}


def memory_of(pid: int) -> Memory | None:
    """The resident memory of ``pid`` (from ``/proc/PID/status``), None if it is gone."""
    values = [0, 0, 0]
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                key, _, rest = line.partition(b":")
                index = _STATUS_KEYS.get(key)
                if index is not None:
                    values[index] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return Memory(rss=values[0], anon=values[1] + values[2])


def group_memory(pid: int, start: int) -> Memory | None:
    """The summed memory of the browser ``pid``'s process group, None if none is left."""
    total: Memory | None = None
    for p in browser_group(pid, start):
        mem = memory_of(p.pid)
        if mem is not None:
            total = mem if total is None else total + mem
    return total


def pss(pid: int) -> int:
    """Proportional set size of ``pid`` in bytes (shared pages divided among their users)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# -- ownership ---------------------------------------------------------------------------------


def owner_marker(token: str) -> str:
    """The value of ``OWNER_ENV`` for browsers this process launches."""
    me = read_proc(os.getpid())
    start = me.start if me is not None else 0
    return f"{os.getpid()}:{start}:{token}"


def owner_alive(marker: str) -> bool:
    """True if the process named by ``marker`` still runs (same pid and start time)."""
    try:
        pid_text, start_text, _token = marker.split(":", 2)
        pid, start = int(pid_text), int(start_text)
    except ValueError:
        return True  # not ours to judge: never kill on a marker we cannot read
    proc = read_proc(pid)
    return proc is not None and proc.start == start


def marker_of(pid: int) -> str | None:
    """The ``OWNER_ENV`` value in the environment of ``pid``, if it has one."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_OWNER_PREFIX):
            return entry[len(_OWNER_PREFIX) :].decode("ascii", "replace")
    return None


def tagged(procs: Iterable[Proc] | None = None) -> list[tuple[Proc, str]]:
    """Every process that carries an owner marker, with its marker."""
    found = []
    for p in all_procs() if procs is None else procs:
        marker = marker_of(p.pid)
        if marker is not None:
            found.append((p, marker))
    return found


def find_browser(marker: str) -> Proc | None:
    """The browser process launched with ``marker``: the group leader carrying it."""
    for p, m in tagged():
        if m == marker and p.pid == p.pgid:
            return p
    return None


def profile_dir(pid: int) -> str | None:
    """The ``--user-data-dir`` on the command line of ``pid``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return None
    for arg in args:
        if arg.startswith(b"--user-data-dir="):
            return arg.split(b"=", 1)[1].decode(errors="replace")
    return None


# -- registrations ------------------------------------------------------------------------------


def runtime_dir(configured: str | None) -> Path:
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / "crawlfleet-browsers"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@dataclass(frozen=True, slots=True)
class Registration:
    """A running browser, as written to the runtime directory."""

    path: Path
    marker: str
    browser_pid: int
    browser_start: int
    profile: str | None

    @classmethod
    def write(
        cls, directory: Path, marker: str, browser: Proc, profile: str | None
    ) -> Registration:
        path = directory / (marker.replace(":", "-") + ".json")
        data = {"owner": marker, "pid": browser.pid, "start": browser.start, "profile": profile}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
        return cls(path, marker, browser.pid, browser.start, profile)

    @classmethod
    def read(cls, path: Path) -> Registration | None:
        try:
            data = json.loads(path.read_text())
            return cls(path, data["owner"], int(data["pid"]), int(data["start"]), data["profile"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


# -- the sweep ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SweepReport:
    killed: tuple[int, ...]
    """Process ids killed (dead owners' browsers and what was left of their groups)."""
    removed: tuple[str, ...]
    """Profile directories removed."""


def sweep_orphans(directory: Path, *, wait: float = 3.0) -> SweepReport:
    """Kill the browsers of dead owners and remove their profiles (see the module docstring)."""
    procs = all_procs()
    victims: set[int] = set()
    profiles: set[str] = set()
    for p, marker in tagged(procs):
        if not owner_alive(marker):
            victims.update(m.pid for m in (group(p.pgid, procs) if p.pid == p.pgid else [p]))
            profiles.add(profile_dir(p.pid) or "")
    for path in directory.glob("*.json"):
        reg = Registration.read(path)
        if reg is None or owner_alive(reg.marker):
            continue
        victims.update(m.pid for m in _registered_group(reg, procs))
        profiles.add(reg.profile or "")
        reg.remove()
    for pid in sorted(victims):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(victims, wait)
    removed = tuple(sorted(d for d in profiles if _remove_profile(d)))
    return SweepReport(killed=tuple(sorted(victims)), removed=removed)


def _registered_group(reg: Registration, procs: list[Proc]) -> list[Proc]:
    return browser_group(reg.browser_pid, reg.browser_start, procs)


def browser_group(pid: int, start: int, procs: Iterable[Proc] | None = None) -> list[Proc]:
    """What is left of the process group of the browser ``pid`` (started at ``start``).

    A group id stays in use while any member lives, so members of a group whose leader is
    gone are still that browser's; a live leader must be the very process launched.
    """
    table = list(all_procs() if procs is None else procs)
    leader = next((p for p in table if p.pid == pid), None)
    if leader is not None and leader.start != start:
        return []
    return group(pid, table)


def kill_browser(pid: int, start: int, *, wait: float = 3.0) -> list[int]:
    """SIGKILL what is left of a browser's process group; returns the pids killed."""
    members = [p.pid for p in browser_group(pid, start)]
    for member in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)
    _wait_gone(set(members), wait)
    return members


def _wait_gone(victims: set[int], wait: float) -> None:
    deadline = time.monotonic() + wait
    while victims and time.monotonic() < deadline:
        victims = {pid for pid in victims if read_proc(pid) is not None}
        if victims:
            time.sleep(0.02)


def _remove_profile(directory: str) -> bool:
    """Remove a Playwright temporary profile (only directories named like one)."""
    path = Path(directory)
    if not directory or not path.name.startswith(PROFILE_PREFIX) or not path.is_dir():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()
