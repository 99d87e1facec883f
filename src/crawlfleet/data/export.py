"""Export records to JSONL, JSON (one array), CSV or Parquet, all or nothing.

Every format streams: rows are read once and memory stays bounded (a CSV header sample of 1,000
rows, a Parquet batch of 10,000). Output goes to ``path + ".tmp"`` and is renamed at the end, so
a failed export never leaves a half-written file under the real name.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from crawlfleet.data import jsonsafe
from crawlfleet.errors import UsageError
from crawlfleet.model import QuarantineRow, RecordRow


class _Deferred:
    """A module imported when first used: pyarrow costs ~25 MB and a tenth of a second that
    JSON and CSV output (and ``crawl -o``'s coordinator) do not need."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pa, pq = _Deferred("pyarrow"), _Deferred("pyarrow.parquet")

__all__ = ["FORMATS", "export_records"]

Format = Literal["jsonl", "json", "csv", "parquet"]
FORMATS: Final = ("jsonl", "json", "csv", "parquet")

CSV_SAMPLE: Final = 1_000
PARQUET_BATCH: Final = 10_000
_WARC_FIELDS: Final = ("warc_file", "warc_record_id", "warc_refers_to_file", "warc_refers_to")
_ROW_FIELDS: Final = frozenset({"key", "data", "errors", "url", "fetched_at", *_WARC_FIELDS})
_JSON_META: Final = {b"crawlfleet.encoding": b"json"}


def export_records(
    rows: Iterable[RecordRow | QuarantineRow | Mapping[str, Any]],
    fmt: Format,
    path: str | Path,
    *,
    provenance: bool = False,
) -> int:
    """Write the records' data to ``path`` as ``fmt``; returns how many rows were written.

    ``rows`` are ``RecordRow`` objects or mappings with the same fields (at least ``data``).
    With ``provenance``, columns ``_url``, ``_fetched_at`` (ISO 8601, UTC), ``_warc_file`` and
    ``_warc_record_id`` (the WARC record of the fetch) follow the data, then
    ``_warc_refers_to_file`` and ``_warc_refers_to``: for a page archived as a ``revisit`` (its
    bytes were the same as an earlier page's), the first capture, which holds the payload; empty
    otherwise. Quarantine rows (``QuarantineRow``, or mappings with
    ``errors``) export too: their errors as an ``_errors`` column, and data that is not a mapping
    as ``_data``. Raises ``UsageError`` when ``path`` cannot be written.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    writer = _WRITERS[fmt]
    tmp = Path(f"{path}.tmp")
    flat = (_flatten(row, provenance) for row in rows)
    try:
        count = writer(flat, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _remove(tmp)
        raise
    return count


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _flatten(
    row: RecordRow | QuarantineRow | Mapping[str, Any], provenance: bool
) -> dict[str, Any]:
    """One output row: the record's data, then its provenance columns if asked for."""
    if isinstance(row, RecordRow | QuarantineRow):
        fields: Mapping[str, Any] = {
            "data": row.data,
            "url": row.url,
            "fetched_at": row.fetched_at,
            **{name: getattr(row, name) for name in _WARC_FIELDS},
        }
        if isinstance(row, QuarantineRow):
            fields = {**fields, "errors": list(row.errors)}
    else:
        # Strict on shape: a plain record dict here would silently export only its "data" field.
        extra = set(row) - _ROW_FIELDS
        if "data" not in row or extra:
            raise ValueError(f"not a record row (needs 'data'; unexpected: {sorted(extra)})")
        fields = row
    data = fields["data"]
    out = dict(data) if isinstance(data, Mapping) else {"_data": data}
    if "errors" in fields:
        out["_errors"] = fields["errors"]
    if provenance:
        fetched_at = fields.get("fetched_at")
        out["_url"] = fields.get("url")
        out["_fetched_at"] = None if fetched_at is None else _iso(fetched_at)
        for name in _WARC_FIELDS:
            out[f"_{name}"] = fields.get(name)
    return out


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def _dumps(value: Any, *, ascii: bool = False) -> str:
    """Strict JSON: never a bare ``NaN`` or ``Infinity`` (null stands in, as pydantic writes
    them), ``ascii`` escapes what is not (a lone surrogate stays the same value, escaped)."""
    try:
        return json.dumps(
            value, ensure_ascii=ascii, separators=(",", ":"), default=str, allow_nan=False
        )
    except ValueError:  # NaN or an infinity, from a store written before they were refused
        value = jsonsafe.without_inf_nan(value)
        return json.dumps(value, ensure_ascii=ascii, separators=(",", ":"), default=str)


# --- JSONL --------------------------------------------------------------------------------------


def _write_jsonl(rows: Iterable[dict[str, Any]], tmp: Path) -> int:
    count = 0
    with open(tmp, "wb") as out:
        for row in rows:
            line = _dumps(row)
            try:
                out.write(line.encode() + b"\n")
            except UnicodeEncodeError:  # a lone surrogate: escaped JSON is still the same value
                out.write(_dumps(row, ascii=True).encode() + b"\n")
            count += 1
    return count


def _write_json(rows: Iterable[dict[str, Any]], tmp: Path) -> int:
    """One JSON array, a record a line."""
    count = 0
    with open(tmp, "wb") as out:
        out.write(b"[")
        for row in rows:
            try:
                line = _dumps(row).encode()
            except UnicodeEncodeError:
                line = _dumps(row, ascii=True).encode()
            out.write((b"\n" if count == 0 else b",\n") + line)
            count += 1
        out.write(b"\n]\n" if count else b"]\n")
    return count


# --- CSV ----------------------------------------------------------------------------------------


def _write_csv(rows: Iterable[dict[str, Any]], tmp: Path) -> int:
    """Header from the first 1,000 rows; a column first seen later is appended to the header at
    the end by rewriting the file once (rows are written as lists, so earlier rows stay prefixes).
    """
    iterator = iter(rows)
    sample = list(islice(iterator, CSV_SAMPLE))
    columns = _union_keys(sample)
    index = {name: i for i, name in enumerate(columns)}
    header_size = len(columns)
    count = 0
    with open(tmp, "w", newline="", encoding="utf-8", errors="surrogateescape") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in _chain(sample, iterator):
            for name in row:
                if name not in index:
                    index[name] = len(columns)
                    columns.append(name)
            cells = [""] * len(columns)
            for name, value in row.items():
                cells[index[name]] = _cell(value)
            writer.writerow(cells)
            count += 1
    if len(columns) > header_size:
        _widen_csv(tmp, columns)
    return count


def _chain(first: list[dict[str, Any]], rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from first
    yield from rest


def _union_keys(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | dict | list | tuple):
        return _dumps(value)
    return str(value)


def _widen_csv(tmp: Path, columns: list[str]) -> None:
    wide = tmp.with_name(tmp.name + ".wide")
    try:
        opts: dict[str, Any] = {"newline": "", "encoding": "utf-8", "errors": "surrogateescape"}
        with open(tmp, **opts) as src, open(wide, "w", **opts) as dst:
            reader, writer = csv.reader(src), csv.writer(dst)
            next(reader)
            writer.writerow(columns)
            for cells in reader:
                writer.writerow(cells + [""] * (len(columns) - len(cells)))
        os.replace(wide, tmp)
    finally:
        _remove(wide)


# --- Parquet ------------------------------------------------------------------------------------


def _write_parquet(rows: Iterable[dict[str, Any]], tmp: Path) -> int:
    sink = _ParquetSink(tmp)
    try:
        iterator = iter(rows)
        while batch := list(islice(iterator, PARQUET_BATCH)):
            sink.write(batch)
        sink.close()
    finally:
        sink.abort()
    return sink.count


class _ParquetSink:
    """A Parquet file whose schema comes from the first batch and widens when data demands.

    Column types are pyarrow's inference; a later batch that does not fit without loss (a new
    column, ints then floats, a string among numbers) widens the schema and the rows written so
    far are rewritten once under it. Values no single Arrow type holds become JSON text (the
    field is marked ``crawlfleet.encoding: json``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current = path  # the file being written; a rewrite moves to a sibling
        self.schema: pa.Schema | None = None
        self.writer: pq.ParquetWriter | None = None
        self.count = 0
        self.rewrites = 0

    def write(self, batch: list[dict[str, Any]]) -> None:
        if self.schema is None:
            self.schema = pa.schema(
                [_infer_field(n, _values(batch, n)) for n in _union_keys(batch)]
            )
        table = self._table(batch)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.current, self.schema)
        self.writer.write_table(table)
        self.count += len(batch)

    def close(self) -> None:
        if self.schema is None:  # no rows: still a valid, empty file
            self.schema = pa.schema([])
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.current, self.schema)
        self.writer.close()
        self.writer = None
        if self.current != self.path:
            os.replace(self.current, self.path)
            self.current = self.path

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.current != self.path:
            _remove(self.current)

    def _table(self, batch: list[dict[str, Any]]) -> pa.Table:
        """``batch`` under the schema, widened (and earlier rows rewritten) first if need be."""
        assert self.schema is not None
        names = list(self.schema.names)
        known = set(names)
        names += [n for n in _union_keys(batch) if n not in known]
        fields, arrays, widened = [], [], False
        for name in names:
            values = _values(batch, name)
            index = self.schema.get_field_index(name)
            old = self.schema.field(index) if index >= 0 else pa.field(name, pa.null())
            array = _fit(values, old)
            field = old
            if array is None or index < 0:
                field = _widen(old, values)
                array = _fit(values, field)
                widened = True
            assert array is not None
            fields.append(field)
            arrays.append(array)
        if widened:
            self._rewrite(pa.schema(fields))
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _rewrite(self, schema: pa.Schema) -> None:
        """Move to ``schema``: copy what was written so far, converted, into a new file."""
        old_path, old_writer = self.current, self.writer
        self.schema = schema
        if old_writer is None:  # nothing written yet
            return
        old_writer.close()
        self.rewrites += 1
        self.current = self.path.with_name(f"{self.path.name}.{self.rewrites}")
        self.writer = pq.ParquetWriter(self.current, schema)
        for record_batch in pq.ParquetFile(old_path).iter_batches():
            arrays = [_convert(record_batch, field) for field in schema]
            self.writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
        os.remove(old_path)


def _values(batch: list[dict[str, Any]], name: str) -> list[Any]:
    return [row.get(name) for row in batch]


def _is_json(field: pa.Field) -> bool:
    return bool(field.metadata and field.metadata.get(b"crawlfleet.encoding") == b"json")


def _json_field(name: str) -> pa.Field:
    return pa.field(name, pa.string(), metadata=_JSON_META)


def _json_array(values: list[Any]) -> pa.Array:
    return pa.array([None if v is None else _dumps(v) for v in values], pa.string())


def _infer(values: list[Any]) -> pa.Array | None:
    try:
        return pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _infer_field(name: str, values: list[Any]) -> pa.Field:
    array = _infer(values)
    return _json_field(name) if array is None else pa.field(name, array.type)


def _unify(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    try:
        schemas = [pa.schema([("x", a)]), pa.schema([("x", b)])]
        return pa.unify_schemas(schemas, promote_options="permissive").field(0).type
    except (pa.ArrowException, TypeError, ValueError):
        return None


def _fit(values: list[Any], field: pa.Field) -> pa.Array | None:
    """``values`` as ``field``'s type, or None when that would lose something.

    Never ``pa.array(values, type=...)``: it truncates 1.5 to 1 and drops unknown struct keys.
    """
    if _is_json(field):
        return _json_array(values)
    array = _infer(values)
    if array is None:
        return None
    if array.type == field.type:
        return array
    if _unify(field.type, array.type) != field.type:
        return None
    try:
        return array.cast(field.type)  # safe cast: raises rather than lose precision
    except (pa.ArrowException, OverflowError):
        return None


def _widen(old: pa.Field, values: list[Any]) -> pa.Field:
    array = _infer(values)
    unified = None if array is None or _is_json(old) else _unify(old.type, array.type)
    return _json_field(old.name) if unified is None else pa.field(old.name, unified)


def _convert(batch: pa.RecordBatch, field: pa.Field) -> pa.Array:
    """A column written earlier, converted to the widened ``field`` (null if it is new)."""
    index = batch.schema.get_field_index(field.name)
    if index < 0:
        return pa.nulls(batch.num_rows, field.type)
    column = batch.column(index)
    if column.type == field.type and _is_json(batch.schema.field(index)) == _is_json(field):
        return column
    if _is_json(field):
        return _json_array(column.to_pylist())
    return column.cast(field.type)


_WRITERS: Final[dict[str, Callable[[Iterable[dict[str, Any]], Path], int]]] = {
    "jsonl": _write_jsonl,
    "json": _write_json,
    "csv": _write_csv,
    "parquet": _write_parquet,
}
