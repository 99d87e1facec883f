"""Finding spiders: load a Spider class from a file path or ``package.module:Class``, or find one
by its ``name`` in a directory of spider files or a package of spider modules (``--spiders``)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crawlfleet.errors import ConfigError, SpiderLoadError
from crawlfleet.model import Job
from crawlfleet.spider import Spider

_FILE_LOCK = threading.RLock()


def load_spider(ref: str, *, name: str | None = None) -> type[Spider]:
    """Load a Spider class from ``path/to/spider.py[:Class]`` or ``package.module:Class``."""
    target, _, cls_name = ref.partition(":") if not _is_windows_path(ref) else (ref, "", "")
    module = _load_module(target)
    candidates = _spiders_of(module)
    if cls_name:
        candidates = [c for c in candidates if c.__name__ == cls_name]
    if name:
        candidates = [c for c in candidates if c.name == name] or candidates
    if not candidates:
        what = f"class {cls_name!r}" if cls_name else "Spider subclass"
        raise SpiderLoadError(f"{target}: no {what} found")
    if len(candidates) > 1:
        names = ", ".join(sorted(c.__name__ for c in candidates))
        raise SpiderLoadError(f"{target}: several spiders ({names}); name one as {target}:Class")
    spider = candidates[0]
    if not spider.name:
        raise SpiderLoadError(f"{target}: spider {spider.__name__} has no name")
    return spider


def find_spider(name: str, where: str) -> type[Spider]:
    """The spider whose ``name`` attribute is ``name``, in ``where``: a directory (every ``*.py``
    file in it) or an importable module or package (the module, or every module of the package).

    Raises :class:`SpiderLoadError` ("no spider named 'x' in DIR") when none or several match;
    files that fail to import are skipped and named in that error.
    """
    found: dict[type[Spider], None] = {}
    broken: list[str] = []
    for module in _modules_in(where, broken):
        for obj in _spiders_of(module):
            if obj.name == name:
                found[obj] = None
    if len(found) == 1:
        return next(iter(found))
    if found:
        names = ", ".join(sorted(f"{c.__module__}.{c.__name__}" for c in found))
        raise SpiderLoadError(f"several spiders named {name!r} in {where}: {names}")
    extra = f" (could not import: {'; '.join(broken)})" if broken else ""
    raise SpiderLoadError(f"no spider named {name!r} in {where}{extra}")


def _spiders_of(module: Any) -> list[type[Spider]]:
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Spider)
        and obj is not Spider
        and obj.__module__ == module.__name__
    ]


def _modules_in(where: str, broken: list[str]) -> list[Any]:
    directory = Path(where)
    if directory.is_dir():
        modules = []
        for path in sorted(directory.glob("*.py")):
            try:
                modules.append(_load_file(path.resolve()))
            except SpiderLoadError as exc:
                broken.append(str(exc))
        return modules
    if "/" in where or where.endswith(".py"):
        raise SpiderLoadError(f"spider directory {where} does not exist")
    try:
        top = importlib.import_module(where)
    except ImportError as exc:
        raise SpiderLoadError(f"cannot import spider module {where}: {exc}") from None
    modules = [top]
    for info in pkgutil.walk_packages(getattr(top, "__path__", []), prefix=where + "."):
        try:
            modules.append(importlib.import_module(info.name))
        except Exception as exc:  # one broken module must not hide the others' spiders
            broken.append(f"{info.name}: {type(exc).__name__}: {exc}".splitlines()[0])
    return modules


def _is_windows_path(ref: str) -> bool:
    return len(ref) > 2 and ref[1] == ":" and ref[2] in "\\/"


def _load_module(target: str) -> Any:
    if target.endswith(".py") or "/" in target or Path(target).exists():
        path = Path(target)
        if not path.is_file():
            raise SpiderLoadError(f"spider file {target} does not exist")
        return _load_file(path.resolve())
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise SpiderLoadError(f"cannot import spider module {target}: {exc}") from None


def _load_file(path: Path) -> Any:
    # a worker loads jobs in threads: a second thread must not see a half-executed module
    with _FILE_LOCK:
        return _load_file_locked(path)


def _load_file_locked(path: Path) -> Any:
    # one module name per file path, so two spider files called spider.py do not collide
    mod_name = "crawlfleet_spider_" + hashlib.blake2b(str(path).encode(), digest_size=6).hexdigest()
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise SpiderLoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        line = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise SpiderLoadError(f"{path}: failed to import: {line}") from None
    return module


def spider_ref(ref: str) -> str:
    """The reference stored in a job: file paths made absolute, module refs kept."""
    target, sep, cls_name = ref.partition(":")
    if target.endswith(".py") or Path(target).is_file():
        return str(Path(target).resolve()) + (sep + cls_name if cls_name else "")
    return ref


#: keys of a job's stored settings, set at submit time and applied by every worker's loader:
#: the spider's ``name`` (how ``--spiders`` finds it), its arguments (``crawl -a name=value``:
#: keyword arguments of its ``__init__``) and the job's settings (``-s KEY=VALUE``: applied
#: over the spider's ``custom_settings``)
SPIDER_NAME = "spider_name"
SPIDER_ARGS = "spider_args"
JOB_SETTINGS = "custom_settings"
#: spider attributes a job may override (the demo points its spider at its own server)
_OVERRIDABLE = ("start_urls", "allowed_domains")


def load_job_spider(job: Job, spiders: str | None) -> type[Spider]:
    """A job's spider, configured as the job was submitted (:func:`configure`).

    With ``spiders`` (a worker's ``--spiders``), the spider is found there by its name (stored at
    submit time; the job's name for jobs that predate it): the stored reference is a path on the
    submitting machine. Without it, the stored reference is loaded as it is.
    """
    name = job.settings.get(SPIDER_NAME)
    if spiders:
        spider_cls = find_spider(str(name or job.name), spiders)
    else:
        spider_cls = load_spider(job.spider, name=name)
    return configure(spider_cls, job.settings)


def configure(spider_cls: type[Spider], settings: Mapping[str, Any]) -> type[Spider]:
    """``spider_cls`` as a job runs it: a subclass with the job's overrides (``start_urls``,
    ``allowed_domains``), its settings (``custom_settings`` and the job's ``-s``, the keys that
    are spider attributes set as attributes: ``DOWNLOAD_DELAY`` becomes ``domain_rate``...) and
    its arguments bound to ``__init__`` (so ``spider_cls()`` gets them, as in Scrapy).

    Raises :class:`~crawlfleet.errors.ConfigError` (one line) for a setting that does not map.
    """
    from crawlfleet.config.custom_settings import split_custom_settings

    attrs: dict[str, Any] = {k: settings[k] for k in _OVERRIDABLE if k in settings}
    job_custom = settings.get(JOB_SETTINGS) or {}
    custom = {**spider_cls.custom_settings, **job_custom}
    try:
        attrs.update(split_custom_settings(custom).attributes)
    except ConfigError as exc:
        raise ConfigError(f"spider {spider_cls.name or spider_cls.__name__}: {exc}") from None
    if job_custom:
        attrs["custom_settings"] = custom
    args = dict(settings.get(SPIDER_ARGS) or {})
    if args:
        attrs["__init__"] = _bind_args(spider_cls, args)
        attrs["spider_args"] = args
    if not attrs:
        return spider_cls
    attrs.setdefault("__module__", spider_cls.__module__)
    attrs["__qualname__"] = spider_cls.__qualname__
    return type(spider_cls.__name__, (spider_cls,), attrs)


def _bind_args(spider_cls: type[Spider], args: Mapping[str, Any]) -> Any:
    init = spider_cls.__init__

    def __init__(self: Spider, *a: Any, **kw: Any) -> None:
        init(self, *a, **{**args, **kw})

    return __init__


def spider_instance(spider_cls: type[Spider]) -> Spider:
    """``spider_cls()`` (arguments bound by :func:`configure`), its errors as one line: a
    spider whose ``__init__`` refuses its arguments or raises is refused at start."""
    try:
        return spider_cls()
    except TypeError as exc:
        given = ", ".join(getattr(spider_cls, "spider_args", {})) or "none"
        raise SpiderLoadError(
            f"spider {spider_cls.__name__} cannot be created with arguments ({given}): {exc}"
        ) from None
    except Exception as exc:
        line = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise SpiderLoadError(f"spider {spider_cls.__name__}.__init__ failed: {line}") from None
