"""Where the CPU of a crawl goes, per process, thread and step: py-spy's samples of every
thread of every process, weighed by the CPU the kernel counted for that thread.

    .venv/bin/pip install py-spy
    .venv/bin/python benchmarks/profile_cpu.py [--products 5000] [--tls] [--rate 100]
        [--raw FILE] [--queue postgresql://...]

Crawls the shop of ``bench_cpu.py`` once with ``crawlfleet crawl --workers 1`` under ``py-spy
record --subprocesses --threads --nonblocking`` (raw stacks) while reading each thread's CPU
seconds from ``/proc`` (py-spy's output names the thread of every sample by its id). Within
a thread, a step's share of its CPU is its share of the thread's samples that were not waiting
(a thread blocked on a queue or a condition is sampled now and then as it wakes); the table
gives milliseconds of CPU a page (requests nginx answered). ``--raw FILE`` re-reads the stacks
of an earlier run instead of crawling (its thread CPU saved beside it as ``FILE.threads.json``).

Steps are named by the frames a sample passes through (:data:`STEPS`, first match wins); a
sample that matches none is counted as ``other`` of its thread. The profile slows the crawl a
little (py-spy reads the processes' memory a hundred times a second): compare its shares, and
take CPU a page from ``bench_cpu.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_cpu import TreeWatch, _served, pg_queue, prepare, python_path, serving  # noqa: E402

#: (thread kind, step, frame substrings: any of them in the stack) in order; the first match
#: names a sample's step. Thread kinds: the worker's event loop, its callback thread, its store
#: thread, its WARC thread; the coordinator's.
STEPS: list[tuple[str, str, tuple[str, ...]]] = [
    ("loop", "start-up: imports, spider, store", ("_find_and_load", "JobContexts._load")),
    ("loop", "fetch: content decoding (gzip)", ("BodyDecoder.feed",)),
    ("loop", "fetch: HTTP client (aiohttp, caps)", ("HttpClient.fetch", "HttpFetcher.fetch")),
    ("loop", "pace slot, robots gate", ("PaceSlot.__call__", "RobotsGate.__call__")),
    ("loop", "snapshot: SHA-1 of the body", ("JobRuntime.content_hash",)),
    ("loop", "snapshot: WARC records (headers, ids)", ("Snapshot.__call__",)),
    ("loop", "classify (block tests)", ("Classify.__call__",)),
    ("loop", "parse: hand-off to the callback thread", ("Parse.__call__", "OffLoop.run")),
    ("loop", "sessions (pick, cookies)", ("Identities.", "_fold_session")),
    ("loop", "events and metrics", ("EventBus.emit", "WorkerMetrics", "verdict.py")),
    ("loop", "attempt: other steps", ("Pipeline.", "worker/attempt/")),
    ("loop", "report (loop side)", ("Worker._report", "Worker._flush", "_report_loop")),
    ("loop", "lease, heartbeat, stats, upkeep", ("Worker._lease", "_heartbeat_loop", "_stats")),
    ("loop", "store calls (loop side)", ("Frontier.", "run_in_executor", "to_thread")),
    ("loop", "event loop (uvloop, sockets)", ("Runner.run",)),
    ("parse", "parse: lexbor tree", ("Document.tree_for", "Document.lexbor")),
    ("parse", "parse: nesting bound", ("nesting.py",)),
    ("parse", "parse: links (select, resolve, dedup)", ("follow_all", "JobRuntime.link")),
    ("parse", "parse: records (extract, validate)", ("extract_product", "JobRuntime._record")),
    ("parse", "parse: spider, other", ("JobRuntime.process",)),
    ("parse", "parse: hand-off back", ("_deliver",)),
    ("store", "store: report transaction", ("report.<locals>.tx", "_complete", "_fail")),
    ("store", "store: lease", ("_lease",)),
    ("store", "store: checkpoint", ("_maybe_checkpoint",)),
    ("store", "store: other", ("Frontier.",)),
    ("warc", "WARC: gzip and digests", ("_frame",)),
    ("warc", "WARC: fsync", ("_sync",)),
    ("coord", "coordinator: progress polls", ("stats", "is_finished", "pool.check")),
    ("coord", "coordinator: records to -o", ("RecordTail", "finish_output")),
    ("coord", "coordinator: start-up", ("_find_and_load", "prepare", "submit", "load_spider")),
]


def _bare_steps() -> list[tuple[str, str, tuple[str, ...]]]:
    """The bare loop's steps, by the lines of ``bare_loop.py`` each runs (its one coroutine
    does everything: its steps are told apart by line, found by what the lines say)."""
    lines = (HERE / "bare_loop.py").read_text().splitlines()

    def at(*texts: str) -> tuple[str, ...]:
        found = [i + 1 for i, line in enumerate(lines) if any(t in line for t in texts)]
        return tuple(f"bare_loop.py:{n})" for n in found)

    start = next(i for i, line in enumerate(lines) if "tree.css(LINK_CSS)" in line) + 1
    end = next(i for i, line in enumerate(lines) if "record = extract(tree)" in line) + 1
    links = tuple(f"bare_loop.py:{n})" for n in range(start, end))
    records = at("record = extract(tree)", "model_validate", "json.dumps(record)")
    return [
        ("bare", "start-up: imports, spider", ("_find_and_load",)),
        ("bare", "fetch: content decoding (gzip)", ("decompress_sync", "DeflateBuffer")),
        ("bare", "fetch: HTTP client (aiohttp)", at("session.get(url)", "resp.read()")),
        ("bare", "parse: lexbor tree", at("LexborHTMLParser(body)")),
        ("bare", "parse: links (select, resolve, dedup)", links),
        ("bare", "parse: records (extract, validate)", records),
        ("bare", "event loop (uvloop, sockets)", ("Runner.run",)),
    ]


STEPS += _bare_steps()

#: the leaf frames of a thread waiting for work (kept out of its steps)
WAITING = (
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "_worker (concurrent/futures/thread.py:81)",
    "OffLoop._work (crawlfleet/worker/offloop.py:115)",
    "Queue.get (queue.py",
)


def thread_kind(proc: str, thread: str) -> str:
    if "bare_loop.py" in proc:
        return "bare"
    # crawl's one worker runs in its own process (``crawlfleet worker``) with
    # --worker-process, else in crawl's: its event loop is then crawl's main thread
    worker = " worker " in proc or "--worker-process" not in proc
    if not worker:
        return "coord"
    if thread == "MainThread":
        return "loop"
    if thread.startswith("crawlfleet-parse"):
        return "parse"
    if thread.startswith("crawlfleet-sqlite") or thread.startswith("crawlfleet-postgres"):
        return "store"
    if thread.startswith("warc"):
        return "warc"
    return "helper threads"


def read_stacks(path: Path) -> list[tuple[str, int, str, list[str], int]]:
    """py-spy's raw output: (process, thread id, thread name, frames root first, count)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        parts = stack.split(";")
        i, proc = 0, ""
        while i < len(parts) and parts[i].startswith("process "):
            proc, i = parts[i], i + 1
        if i >= len(parts):
            continue
        m = re.match(r"thread \((\d+)\)(?::\s*(.*))?", parts[i])
        if m is None:
            continue
        out.append((proc, int(m.group(1)), (m.group(2) or "").strip(), parts[i + 1 :], int(n)))
    return out


def step_of(kind: str, frames: list[str]) -> str:
    stack = ";".join(frames)
    for k, step, needles in STEPS:
        if (k == kind or (k == "loop" and kind == "helper threads")) and any(
            n in stack for n in needles
        ):
            return step
    if kind == "loop":  # crawl's own loop runs the coordinator's steps too
        for k, step, needles in STEPS:
            if (
                k == "coord"
                and step != "coordinator: start-up"
                and any(n in stack for n in needles)
            ):
                return step
    return f"{kind}: other"


def summarize(stacks: Path, cpu: dict[int, float], pages: int) -> None:
    samples: collections.Counter[tuple[int, str, str]] = collections.Counter()
    kinds: dict[int, str] = {}
    for proc, tid, name, frames, n in read_stacks(stacks):
        kinds[tid] = thread_kind(proc, name)
        if frames and any(frames[-1].startswith(w) for w in WAITING):
            continue
        samples[(tid, kinds[tid], step_of(kinds[tid], frames))] += n
    by_thread: collections.Counter[int] = collections.Counter()
    for (tid, _, _), n in samples.items():
        by_thread[tid] += n
    steps: collections.Counter[tuple[str, str]] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for (tid, kind, step), n in samples.items():
        steps[(kind, step)] += cpu.get(tid, 0.0) * n / by_thread[tid]
    cpu = {tid: c for tid, c in cpu.items() if tid in kinds}  # threads py-spy saw: the crawl's
    for tid, c in cpu.items():
        threads[kinds[tid]] += c
    total = sum(cpu.values())
    print(f"{pages} pages, {total:.2f} CPU s, {1000 * total / pages:.3f} ms a page\n")
    print("| thread | ms a page | share |")
    print("| --- | --- | --- |")
    for kind, c in threads.most_common():
        print(f"| {kind} | {1000 * c / pages:.3f} | {c / total:.0%} |")
    print("\n| thread | step | ms a page | share |")
    print("| --- | --- | --- | --- |")
    for (kind, step), c in sorted(steps.items(), key=lambda kv: (-threads[kv[0][0]], -kv[1])):
        if c / total >= 0.002:
            print(f"| {kind} | {step} | {1000 * c / pages:.3f} | {c / total:.1%} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--products", type=int, default=5000)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--rate", type=int, default=100, help="py-spy samples a second")
    p.add_argument("--raw", type=Path, help="summarize these stacks of an earlier run")
    p.add_argument("--queue", help="a PostgreSQL server: crawl with --queue (a schema of its own)")
    p.add_argument("--bare", action="store_true", help="profile the bare loop instead")
    p.add_argument("--out", type=Path, default=HERE / "out" / "profile.txt")
    args = p.parse_args(argv)
    if args.raw is not None:
        saved = json.loads(Path(str(args.raw) + ".threads.json").read_text())
        summarize(args.raw, {int(k): v for k, v in saved["cpu"].items()}, saved["pages"])
        return 0
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    site = prepare(args.products, args.tls)
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    crawl = [sys.executable, "-m", "crawlfleet", "crawl", str(HERE / "shop_spider.py")]
    crawl += ["--workers", "1", "-o", "out.jsonl"]
    if args.queue:
        crawl += ["--queue", pg_queue(args.queue, "profile")[0]]
    if args.bare:
        crawl = [sys.executable, str(HERE / "bare_loop.py"), "-o", "out.jsonl"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = [spy, "record", "--subprocesses", "--threads", "--nonblocking", "--format", "raw"]
    record += ["-r", str(args.rate), "-o", str(args.out), "--", *crawl]
    log = work / "access.log"
    with serving(site, "tls" if args.tls else "http", log) as (_, env):
        proc = subprocess.Popen(
            record,
            cwd=work,
            env=os.environ | env | python_path(),
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        with TreeWatch(proc.pid) as tree:
            proc.wait()
    pages = _served(log)
    cpu = {
        tid: c
        for p in tree.procs.values()
        if p.role != "main" and (b"crawlfleet" in p.cmdline or b"bare_loop" in p.cmdline)
        for tid, c in p.threads.items()
    }
    Path(str(args.out) + ".threads.json").write_text(json.dumps({"cpu": cpu, "pages": pages}))
    shutil.rmtree(work, ignore_errors=True)
    summarize(args.out, cpu, pages)
    print(f"\nstacks: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
