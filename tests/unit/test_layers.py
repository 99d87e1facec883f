"""The layering the README states, read off the imports so that it cannot rot.

* ``model.py`` imports nothing of crawlfleet; ``policy/`` only the model, the errors, the URL
  rules (``urls.py``, on the vocabulary alone: session ids in URL shapes) and itself;
* nothing outside ``frontier/`` imports a backend (``open_frontier`` picks one);
* every room of the package (a root module or a sub-package) sits on one of :data:`FLOORS`,
  and no import reaches a higher floor: a request's walk goes down, never back up. Rooms on
  the same floor may import each other only one way (no cycle).

Imports inside functions count (they run); those under ``if TYPE_CHECKING:`` count too (a
type that must come from above is a sign the code sits on the wrong floor). A new room must be
given its floor here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "crawlfleet"

#: the floors, lowest first; a room may import rooms of its own floor or below
FLOORS: list[tuple[str, frozenset[str]]] = [
    ("the vocabulary", frozenset({"errors", "model", "cache"})),
    ("pure helpers and decisions", frozenset({"events", "urls", "policy", "selectors", "sitemap"})),
    ("the parts", frozenset({"request", "routes", "data"})),
    ("forms, the store and the fetchers", frozenset({"forms", "frontier", "fetch"})),
    ("the user's API and what watches", frozenset({"response", "spider", "__init__", "monitor"})),
    ("the demo shop", frozenset({"demo"})),
    ("settings", frozenset({"config"})),
    ("what leaves the machine", frozenset({"notify"})),
    ("a spider's way in", frozenset({"spiders"})),
    ("a job's way in, the execution plane", frozenset({"intake", "worker"})),
    ("crawl on one machine", frozenset({"local"})),
    ("the control plane", frozenset({"control"})),
    ("the commands", frozenset({"cli", "__main__"})),
]
FLOOR_OF = {room: i for i, (_, rooms) in enumerate(FLOORS) for room in rooms}
BACKENDS = ("crawlfleet.frontier.sqlite", "crawlfleet.frontier.postgres")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _imports() -> dict[str, set[str]]:
    """Every module of the package and the crawlfleet modules it imports."""
    found: dict[str, set[str]] = {}
    rooms = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    for path in sorted(PACKAGE.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "crawlfleet":  # a sub-module, or a name of the public API
                    names.update(
                        f"crawlfleet.{a.name}" if a.name in rooms else "crawlfleet.__init__"
                        for a in node.names
                    )
                else:
                    names.add(node.module)
        found[_module_name(path)] = {n for n in names if n.split(".")[0] == "crawlfleet"}
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_model_imports_nothing_of_crawlfleet() -> None:
    assert _imports()["crawlfleet.model"] == set()


def test_the_url_rules_import_only_the_vocabulary() -> None:
    # what lets policy/ use them and stay pure
    assert {_room(name) for name in _imports()["crawlfleet.urls"]} <= FLOORS[0][1]


def test_policy_imports_only_the_model_the_errors_the_url_rules_and_itself() -> None:
    allowed = ("crawlfleet.model", "crawlfleet.errors", "crawlfleet.urls", "crawlfleet.policy")
    wrong = {
        (module, name)
        for module, names in _imports().items()
        if module.startswith("crawlfleet.policy")
        for name in names
        if not name.startswith(allowed)
    }
    assert wrong == set()


def test_nothing_outside_the_frontier_imports_a_backend() -> None:
    wrong = {
        (module, name)
        for module, names in _imports().items()
        if not module.startswith("crawlfleet.frontier")
        for name in names
        if name.startswith(BACKENDS)
    }
    assert wrong == set()


def test_every_room_has_a_floor_and_no_import_runs_up() -> None:
    rooms = {_room(m) for m in _imports()}
    assert rooms - FLOOR_OF.keys() == set(), "give each new room its floor in FLOORS"
    upward = sorted(
        (module, name)
        for module, names in _imports().items()
        for name in names
        if FLOOR_OF[_room(name)] > FLOOR_OF[_room(module)]
    )
    assert upward == []


def test_rooms_import_each_other_one_way_only() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, names in _imports().items():
        for name in names:
            if _room(name) != _room(module):
                edges[_room(module)].add(_room(name))
    both_ways = sorted(
        (a, b) for a, targets in edges.items() for b in targets if a in edges.get(b, ())
    )
    assert both_ways == []


def test_the_layering_test_sees_an_upward_import() -> None:
    """The rule can fail: a worker module is on a higher floor than the frontier."""
    assert FLOOR_OF["worker"] > FLOOR_OF["frontier"]
    assert "crawlfleet.frontier.ports" in _imports()["crawlfleet.worker.loops"]
    assert FLOOR_OF[_room("crawlfleet.worker.loops")] > FLOOR_OF[_room("crawlfleet.frontier")]
