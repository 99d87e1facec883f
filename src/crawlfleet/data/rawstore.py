"""Where raw snapshots (WARC files) go: a directory, or an S3-compatible object store.

::

    store = open_raw_store("s3://bucket/crawls/raw", s3_endpoint="http://minio:9000",
                           spool=".crawlfleet/spool")
    store.open()                          # checks the bucket; starts the uploader thread
    warc = store.writer("shop-host-1", max_size=1 << 30, gzip_level=1)
    ref = warc.write(...)
    store.locate(ref.file)                # "s3://bucket/crawls/raw/shop-host-1-….warc.gz"
    warc.close()
    store.close()                         # uploads what is left, stops the thread

A directory store is :class:`~crawlfleet.data.warc.WarcWriter` as it is: files stay where it
writes them and a record's ``warc_file`` is the file's base name.

The S3 store lets workers on many machines share one raw store. The writer works unchanged in a
local spool directory (``flush`` stays a local fsync, so acknowledging a lease never waits for
the network); a background thread uploads every *closed* file (rolled at ``max_size``, or closed
when the worker stops) to ``prefix/NAME``, retrying with backoff, and deletes the local copy only
after the upload succeeded. A record's ``warc_file`` names the object (``s3://bucket/prefix/NAME``);
the object exists once its file is closed and uploaded, and until then the file is in the spool.
Closed files found in the spool at start (left by a worker that died) are uploaded too.

A store that stops answering (refused, cut, the bucket gone) is noticed by a failed upload (an
upload that fails while a HEAD of the bucket fails too) or, with nothing to upload, by a HEAD
every :data:`PROBE_EVERY` seconds; :attr:`S3Store.fault` then says why, the files wait in the
spool, and the thread asks again every ``poll`` until the store answers (the worker stops
leasing meanwhile: :mod:`crawlfleet.worker.faults`). Credentials come from boto3's usual sources
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, instance roles) and are never
printed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crawlfleet.data.warc import CLOSED_SUFFIX, WarcWriter, recover
from crawlfleet.errors import ConfigError, RawStoreUnavailable, StoreError
from crawlfleet.urls import mask_credentials

__all__ = ["DirectoryStore", "RawStore", "S3Location", "S3Store", "open_raw_store"]

log = logging.getLogger("crawlfleet.rawstore")

#: attempts per upload before the file is left for the next pass (backoff 0.5 s, 1 s, 2 s, …)
UPLOAD_ATTEMPTS = 5
#: how long ``close`` keeps trying to upload what is left before it gives up (seconds)
CLOSE_DEADLINE = 120.0
#: seconds between two HEADs of the bucket while nothing is due to upload: a store that went
#: away is noticed before the next file closes
PROBE_EVERY = 10.0


class RawStore(Protocol):
    """A raw store: hands out WARC writers and names where their files end up."""

    def open(self, *, wait: bool = False) -> None:
        """Get ready (an error when the store cannot work). ``wait``: a store that does not
        answer now is no error; :attr:`fault` says so until it does."""
        ...

    def writer(self, prefix: str, *, max_size: int, gzip_level: int) -> WarcWriter: ...
    def locate(self, file: str) -> str:
        """What a record's provenance calls the WARC file ``file`` (a writer's base name)."""
        ...

    @property
    def fault(self) -> RawStoreUnavailable | None:
        """Why the store takes no files now (None while it does)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class S3Location:
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    @classmethod
    def parse(cls, url: str) -> S3Location:
        rest = url.removeprefix("s3://")
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ConfigError(f"raw store {url!r} names no bucket: use s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"


def check_raw_url(url: str) -> None:
    """Refuse a raw store URL no store can serve (a directory path is always fine)."""
    if url.startswith("s3://"):
        S3Location.parse(url)
    elif "://" in url:
        raise ConfigError(
            f"unsupported raw store {mask_credentials(url)!r}: use a directory or s3://bucket/prefix"
        )


def open_raw_store(url: str, *, s3_endpoint: str = "", spool: str = "") -> RawStore:
    """The raw store ``url`` names (not opened yet): a directory path, or ``s3://bucket/prefix``."""
    check_raw_url(url)
    if url.startswith("s3://"):
        return S3Store(S3Location.parse(url), Path(spool or ".crawlfleet/spool"), s3_endpoint)
    return DirectoryStore(Path(url))


class DirectoryStore:
    """WARC files in a directory (shared by a fleet only through a shared file system)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __repr__(self) -> str:
        return f"<DirectoryStore {self.directory}>"

    def open(self, *, wait: bool = False) -> None:
        """Close the WARC files dead writers left open (see :func:`recovered`)."""
        recovered(self.directory)

    def writer(self, prefix: str, *, max_size: int, gzip_level: int) -> WarcWriter:
        return WarcWriter(self.directory, prefix=prefix, max_size=max_size, gzip_level=gzip_level)

    def locate(self, file: str) -> str:
        return file

    @property
    def fault(self) -> RawStoreUnavailable | None:
        return None  # a full disk shows as the writers' errors

    def close(self) -> None:
        pass


class S3Store:
    """WARC files spooled locally and uploaded, once closed, to an S3-compatible bucket."""

    def __init__(
        self,
        location: S3Location,
        spool: Path,
        endpoint: str = "",
        *,
        poll: float = 1.0,
        probe_every: float = PROBE_EVERY,
        client: Any = None,
    ) -> None:
        self.location = location
        self.spool = spool
        self.endpoint = endpoint
        self.poll = poll
        self.probe_every = probe_every
        self._client = client
        self._prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._fault: RawStoreUnavailable | None = None  # set and cleared by the uploader
        self._answered = 0.0  # monotonic time the store last answered
        self.uploaded = 0

    def __repr__(self) -> str:
        where = f" via {mask_credentials(self.endpoint)}" if self.endpoint else ""
        return f"<S3Store {self.location}{where} spool={self.spool}>"

    # -- lifecycle ------------------------------------------------------------------------------

    def open(self, *, wait: bool = False) -> None:
        """Connect and check the bucket (one clear error if it is missing or not allowed); the
        WARC files dead writers left open in the spool are closed, then uploaded with the rest.
        ``wait`` (a worker): a store that does not answer (unreachable, cut, a 5xx) is no error,
        :attr:`fault` says so until it does; a refusal (4xx: no bucket, not allowed) still is."""
        self.spool.mkdir(parents=True, exist_ok=True)
        recovered(self.spool)
        if self._client is None:
            self._client = _make_client(self.endpoint)
        try:
            self._client.head_bucket(Bucket=self.location.bucket)
        except Exception as exc:  # botocore's errors share no useful base class
            if not wait or _refused(exc):
                raise StoreError(f"cannot use raw store {self.location}: {_line(exc)}") from None
            self._fault = RawStoreUnavailable(f"raw store {self.location} is away: {_line(exc)}")
        self._answered = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="raw-uploader", daemon=True)
        self._thread.start()

    @property
    def fault(self) -> RawStoreUnavailable | None:
        return self._fault

    def probe(self) -> RawStoreUnavailable | None:
        """Ask the store now (a HEAD of the bucket); :attr:`fault` follows the answer."""
        try:
            self._client.head_bucket(Bucket=self.location.bucket)
        except Exception as exc:  # botocore's errors share no useful base class
            if self._fault is None:
                log.info("raw store %s is away: %s", self.location, _line(exc))
            self._fault = RawStoreUnavailable(f"raw store {self.location} is away: {_line(exc)}")
            return self._fault
        self._answered = time.monotonic()
        if self._fault is not None:
            log.info("raw store %s answers again", self.location)
            self._fault = None
        return None

    def writer(self, prefix: str, *, max_size: int, gzip_level: int) -> WarcWriter:
        with self._lock:
            self._prefixes.add(prefix)
        return WarcWriter(self.spool, prefix=prefix, max_size=max_size, gzip_level=gzip_level)

    def locate(self, file: str) -> str:
        return self.location.url(file)

    def close(self) -> None:
        """Upload every closed file left in the spool, then stop. Close the writers first."""
        if self._thread is None:
            return
        self._stopping.set()
        self._wake.set()
        self._thread.join()
        self._thread = None
        deadline = time.monotonic() + CLOSE_DEADLINE
        left = self._pass(mine_only=True)
        while left and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self._pass(mine_only=True)
        if left:
            log.error(
                "%d WARC files could not be uploaded to %s; they stay in %s and are uploaded "
                "by the next worker that uses this spool",
                len(left),
                self.location,
                self.spool,
            )
        self._client.close()

    # -- uploading ------------------------------------------------------------------------------

    def _run(self) -> None:
        mine_only = False  # the first pass also takes the leftovers of a worker that died
        while not self._stopping.is_set():
            try:
                self._tick(mine_only=mine_only)
            except OSError as exc:  # the spool vanished or is unreadable: try again later
                log.warning("cannot read spool %s: %s", self.spool, exc)
            mine_only = True
            self._wake.wait(self.poll)
            self._wake.clear()

    def _tick(self, *, mine_only: bool) -> None:
        """One look: while the store is away only a HEAD (until it answers), else an upload
        pass, and a HEAD when the store said nothing for ``probe_every`` seconds."""
        if self._fault is not None and self.probe() is not None:
            return
        self._pass(mine_only=mine_only)
        if self._fault is None and time.monotonic() - self._answered >= self.probe_every:
            self.probe()

    def _pass(self, *, mine_only: bool) -> list[Path]:
        """Upload the closed files in the spool; returns those left (all the rest once the
        store turns out to be away: they wait for it)."""
        with self._lock:
            prefixes = tuple(p + "-" for p in self._prefixes)
        paths = [
            path
            for path in sorted(self.spool.glob("*" + CLOSED_SUFFIX))
            if not mine_only or path.name.startswith(prefixes)
        ]
        for i, path in enumerate(paths):
            if not self._upload(path) and self._fault is not None:
                return paths[i:]
        return [path for path in paths if path.exists()]

    def _upload(self, path: Path) -> bool:
        key = self.location.key(path.name)
        for attempt in range(UPLOAD_ATTEMPTS):
            try:
                self._client.upload_file(
                    str(path),
                    self.location.bucket,
                    key,
                    ExtraArgs={"ContentType": "application/warc"},
                )
            except FileNotFoundError:
                return True  # another worker sharing this spool uploaded it
            except Exception as exc:
                if self.probe() is not None:  # the store, not this file: it waits for the store
                    return False
                if attempt == UPLOAD_ATTEMPTS - 1 or self._stopping.wait(0.5 * 2**attempt):
                    log.warning("upload of %s failed: %s", path.name, _line(exc))
                    return False
                continue
            path.unlink(missing_ok=True)
            self._answered = time.monotonic()
            self.uploaded += 1
            return True
        return False


def recovered(directory: Path) -> list[str]:
    """Close the ``.open`` WARC files in ``directory`` that no live writer holds (a worker
    killed mid-file: its own, or another's), under the names their records carry
    (:func:`crawlfleet.data.warc.recover`); one line says how many."""
    if not directory.is_dir():
        return []
    try:
        files = recover(directory)
    except OSError as exc:  # unreadable, or a full disk: the writers will say so
        log.warning("cannot recover the open WARC files in %s: %s", directory, _line(exc))
        return []
    if files:
        log.warning("closed %d WARC files left open by dead workers in %s", len(files), directory)
    return files


def _make_client(endpoint: str) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ConfigError("an s3:// raw store needs boto3: pip install 'crawlfleet[s3]'") from None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10)
    return boto3.client("s3", endpoint_url=endpoint or None, region_name=region, config=config)


def _refused(exc: BaseException) -> bool:
    """Whether the store answered ``exc`` with a refusal of the request itself (HTTP 4xx: no
    such bucket, access denied): a configuration to fix, not an outage to wait out."""
    response = getattr(exc, "response", None)  # botocore's ClientError
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if response else None
    return isinstance(status, int) and 400 <= status < 500


def _line(exc: BaseException) -> str:
    text = mask_credentials(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
