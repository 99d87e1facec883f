"""What a robots.txt says to one crawler (RFC 9309): pure parsing and matching, no I/O.

:func:`parse_robots` reads the file once for a product token and keeps only the rules that
apply to it; :meth:`RobotsRules.allowed` then answers per URL. The rules, as RFC 9309 (and
Google's reference parser, whose test suite this follows) has them:

* **Groups**: one or more ``user-agent`` lines, then the rules; a ``user-agent`` line after an
  ``allow``/``disallow`` line starts the next group. Other lines (``sitemap``,
  ``crawl-delay``, anything unknown) never end a group. Rules before the first ``user-agent``
  line apply to nobody. Lines are ``key: value`` (the key in any case, ``#`` starts a comment;
  a missing colon is read as one when the line is exactly two words, as Google does).
* **Which group**: the product token is the crawler's name, the user agent up to its first
  space or ``/`` (``crawlfleet/0.1 (+https://...)`` is ``crawlfleet``). A group applies when
  one of its ``user-agent`` values, up to its own first space or ``/``, is that token in any
  case: a whole-token match, never a substring (``User-agent: crawl`` is not ``crawlfleet``).
  Every group that names the token applies, merged; none does: every ``*`` group, merged; none
  of those either: everything is allowed.
* **Which rule**: the one whose pattern matches the most octets (``*`` any characters, ``$``
  at the end anchors it); ``allow`` wins a tie; no match, or an empty pattern, allows. Patterns
  are percent-encoded before comparison (UTF-8 octets escaped, hex upper-cased); URLs are
  compared as given (a crawl's URLs are already encoded), path, parameters and query.
* Google's extensions kept: ``.../index.html`` allowed also allows ``.../``; lines past
  16,663 bytes are cut there; a few misspelt keys (``useragent``, ``dissallow``...).

Written here rather than taken from protego: protego matches the user-agent as a substring at a
token boundary of the whole User-Agent header (so ``github`` or ``https`` groups apply to a
crawler that links its homepage) and re-encodes URLs before matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["RobotsRules", "parse_robots", "product_token"]

_USER_AGENT: Final = frozenset({"user-agent", "useragent", "user agent"})
_ALLOW: Final = frozenset({"allow"})
_DISALLOW: Final = frozenset(
    {"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
)
_CRAWL_DELAY: Final = frozenset({"crawl-delay", "crawl delay", "crawldelay"})
#: Google's parser keeps this many bytes of a line (its buffer is 8 x 2083 bytes)
_MAX_LINE: Final = 2083 * 8 - 1
_HEX: Final = "0123456789ABCDEFabcdef"
#: RFC 9309 lines end at CR, LF or CRLF (not at the other breaks str.splitlines knows)
_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


def product_token(user_agent: str) -> str:
    """The crawler's name in a User-Agent header, lower-cased: up to the first space or ``/``."""
    token = user_agent.strip()
    for sep in (" ", "\t", "/"):
        token = token.partition(sep)[0]
    return token.lower()


@dataclass(frozen=True, slots=True)
class _Rule:
    allow: bool
    priority: int  # octets of the encoded pattern: the longest match wins
    parts: tuple[str, ...]  # the pattern split at "*"
    anchored: bool  # ended with "$"

    def matches(self, path: str) -> bool:
        parts = self.parts
        first = parts[0]
        if not path.startswith(first):
            return False
        pos = len(first)
        if len(parts) == 1:
            return not self.anchored or pos == len(path)
        # "a*b*c": each literal found leftmost after the one before (leftmost is never worse),
        # so a hostile pattern of many "*" costs a find per part, not a backtracking search
        for part in parts[1:-1]:
            found = path.find(part, pos)
            if found < 0:
                return False
            pos = found + len(part)
        last = parts[-1]
        if self.anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return path.find(last, pos) >= 0


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """The rules of one robots.txt that apply to one product token (see the module docstring).

    ``crawl_delay``: the first ``Crawl-delay`` of the groups that apply (None: none set).
    """

    rules: tuple[_Rule, ...] = ()
    crawl_delay: float | None = None
    #: patterns without "*" or "$": a URL none of them starts is checked against the others only
    _plain: tuple[str, ...] = ()
    _special: tuple[_Rule, ...] = ()

    def allowed(self, url: str) -> bool:
        """Whether ``url`` (absolute, or a path) may be fetched under these rules."""
        if not self.rules:
            return True
        path = path_of(url)
        candidates = self.rules if path.startswith(self._plain) else self._special
        for rule in candidates:  # longest first, allow before disallow at equal length
            if rule.matches(path):
                return rule.allow
        return True


def path_of(url: str) -> str:
    """The part of ``url`` robots.txt rules match: path, parameters and query (``/`` if none),
    without the fragment."""
    url = url.partition("#")[0]
    start = url.find("://")
    if start >= 0:
        rest = url[start + 3 :]
    elif url.startswith("//"):
        rest = url[2:]
    elif url.startswith("/"):
        return url
    else:
        rest = url
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=-1)
    if cut < 0:
        return "/"
    return rest[cut:] if rest[cut] == "/" else "/" + rest[cut:]


def _encode(pattern: str) -> str:
    """A pattern as it is compared: non-ASCII as percent-encoded UTF-8, escapes upper-cased."""
    if pattern.isascii() and "%" not in pattern:
        return pattern
    out = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and pattern[i + 1 : i + 2] in _HEX and pattern[i + 2 : i + 3] in _HEX:
            out.append(pattern[i : i + 3].upper())
            i += 3
            continue
        out.append(char if char.isascii() else "".join(f"%{b:02X}" for b in char.encode()))
        i += 1
    return "".join(out)


def _rules_of(value: str, allow: bool) -> list[_Rule]:
    pattern = _encode(value)
    if not pattern:
        return []  # "Disallow:" with no value disallows nothing
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    rules = [_Rule(allow, len(pattern), tuple(body.split("*")), anchored)]
    if allow and body.endswith("/index.html") and "*" not in body:
        # Google: allowing a directory's index.html allows the directory itself
        directory = body.removesuffix("index.html")
        rules.append(_Rule(True, len(directory) + 1, (directory,), True))
    return rules


def _key_value(line: str) -> tuple[str, str] | None:
    line = line[:_MAX_LINE].partition("#")[0].strip()
    if not line:
        return None
    key, colon, value = line.partition(":")
    if not colon:
        words = line.split()
        if len(words) != 2:  # only "key value" reads as a missing colon
            return None
        key, value = words
    key = key.strip().lower()
    return (key, value.strip()) if key else None


def _agent_of(value: str) -> str:
    """A ``user-agent`` value's name: ``*``, or up to the first space or ``/``, lower-cased."""
    if value == "*" or value.startswith(("* ", "*\t")):
        return "*"
    return product_token(value)


@dataclass(slots=True)
class _Found:
    rules: list[_Rule]
    delay: float | None = None


def parse_robots(text: str, user_agent: str) -> RobotsRules:
    """The rules of robots.txt ``text`` that apply to the crawler ``user_agent`` (its product
    token is taken from it, see :func:`product_token`)."""
    token = product_token(user_agent)
    specific, general = _Found([]), _Found([])
    agents: set[str] = set()  # the current group's user-agent values
    closed = True  # the next user-agent line starts a new group
    named = False  # a group names our token: only such groups apply, even without rules
    for line in _LINE_BREAK.split(text.removeprefix("\ufeff")):
        parsed = _key_value(line)
        if parsed is None:
            continue
        key, value = parsed
        if key in _USER_AGENT:
            if closed:
                agents, closed = set(), False
            agent = _agent_of(value)
            agents.add(agent)
            named = named or (agent == token and bool(token))
            continue
        if not agents:
            continue  # before any user-agent line: applies to nobody
        hits = ((specific, bool(token) and token in agents), (general, "*" in agents))
        targets = [found for found, hit in hits if hit]
        if key in _ALLOW or key in _DISALLOW:
            closed = True
            for found in targets:
                found.rules.extend(_rules_of(value, key in _ALLOW))
        elif key in _CRAWL_DELAY:
            delay = _delay(value)
            for found in targets:
                if found.delay is None:
                    found.delay = delay
    return _finished(specific if named else general)


def _delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if 0 <= delay < float("inf") else None


def _finished(found: _Found) -> RobotsRules:
    rules = sorted(found.rules, key=lambda r: (r.priority, r.allow), reverse=True)
    plain = tuple(r.parts[0] for r in rules if len(r.parts) == 1 and not r.anchored)
    special = tuple(r for r in rules if len(r.parts) > 1 or r.anchored)
    return RobotsRules(tuple(rules), found.delay, plain, special)
