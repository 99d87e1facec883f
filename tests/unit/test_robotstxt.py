"""robots.txt groups and rules: the cases of Google's reference parser's test suite
(google/robotstxt, ``robots_test.cc``), written here as a table, plus crawlfleet's own.

Each case is one ``IsUserAgentAllowed(robots.txt, product token, URL)`` check of that suite;
its test's name says whether it is RFC 9309 behaviour (``ID_...``) or Google's own
(``GoogleOnly_...``). Every RFC-level case must pass; Google's own pass too but for the one
difference listed in ``DIFFERENCES``.
"""

from __future__ import annotations

import pytest

from crawlfleet.fetch.robotstxt import parse_robots, path_of, product_token

ROBOTS = {
    "GoogleOnly_SystemTest#1": "",
    "GoogleOnly_SystemTest#2": ("user-agent: FooBot\ndisallow: /\n"),
    "ID_LineSyntax_Line#1": ("foo: FooBot\nbar: /\n"),
    "ID_LineSyntax_Line#2": ("user-agent FooBot\ndisallow /\n"),
    "ID_LineSyntax_Groups#1": (
        "allow: /foo/bar/\n"
        "\n"
        "user-agent: FooBot\n"
        "disallow: /\n"
        "allow: /x/\n"
        "user-agent: BarBot\n"
        "disallow: /\n"
        "allow: /y/\n"
        "\n"
        "\n"
        "allow: /w/\n"
        "user-agent: BazBot\n"
        "\n"
        "user-agent: FooBot\n"
        "allow: /z/\n"
        "disallow: /\n"
    ),
    "ID_LineSyntax_Groups_OtherRules#1": (
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n"
    ),
    "ID_LineSyntax_Groups_OtherRules#2": (
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n"
    ),
    "ID_REPLineNamesCaseInsensitive#1": ("USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n"),
    "ID_REPLineNamesCaseInsensitive#2": ("user-agent: FooBot\nallow: /x/\ndisallow: /\n"),
    "ID_REPLineNamesCaseInsensitive#3": ("uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"),
    "ID_UserAgentValueCaseInsensitive#1": ("User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n"),
    "ID_UserAgentValueCaseInsensitive#2": ("User-Agent: foo bar\nAllow: /x/\nDisallow: /\n"),
    "ID_UserAgentValueCaseInsensitive#3": ("User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n"),
    "GoogleOnly_AcceptUserAgentUpToFirstSpace#1": (
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
    ),
    "ID_GlobalGroups_Secondary#1": ("user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"),
    "ID_GlobalGroups_Secondary#2": (
        "user-agent: FooBot\n"
        "allow: /\n"
        "user-agent: BarBot\n"
        "disallow: /\n"
        "user-agent: BazBot\n"
        "disallow: /\n"
    ),
    "ID_AllowDisallow_Value_CaseSensitive#1": ("user-agent: FooBot\ndisallow: /x/\n"),
    "ID_AllowDisallow_Value_CaseSensitive#2": ("user-agent: FooBot\ndisallow: /X/\n"),
    "ID_LongestMatch#1": ("user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n"),
    "ID_LongestMatch#2": ("user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n"),
    "ID_LongestMatch#3": ("user-agent: FooBot\ndisallow: \nallow: \n"),
    "ID_LongestMatch#4": ("user-agent: FooBot\ndisallow: /\nallow: /\n"),
    "ID_LongestMatch#5": ("user-agent: FooBot\ndisallow: /x\nallow: /x/\n"),
    "ID_LongestMatch#6": ("user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n"),
    "ID_LongestMatch#7": ("user-agent: FooBot\nallow: /page\ndisallow: /*.html\n"),
    "ID_LongestMatch#8": ("user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n"),
    "ID_LongestMatch#9": ("User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"),
    "ID_Encoding#1": (
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n"
    ),
    "ID_Encoding#2": ("User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n"),
    "ID_Encoding#3": ("User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n"),
    "ID_Encoding#4": ("User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n"),
    "ID_SpecialCharacters#1": ("User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n"),
    "ID_SpecialCharacters#2": ("User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n"),
    "ID_SpecialCharacters#3": (
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n"
    ),
    "GoogleOnly_IndexHTMLisDirectory#1": (
        "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n"
    ),
    "GoogleOnly_DocumentationChecks#1": ("user-agent: FooBot\ndisallow: /\nallow: /fish\n"),
    "GoogleOnly_DocumentationChecks#2": ("user-agent: FooBot\ndisallow: /\nallow: /fish*\n"),
    "GoogleOnly_DocumentationChecks#3": ("user-agent: FooBot\ndisallow: /\nallow: /fish/\n"),
    "GoogleOnly_DocumentationChecks#4": ("user-agent: FooBot\ndisallow: /\nallow: /*.php\n"),
    "GoogleOnly_DocumentationChecks#5": ("user-agent: FooBot\ndisallow: /\nallow: /*.php$\n"),
    "GoogleOnly_DocumentationChecks#6": ("user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n"),
    "GoogleOnly_DocumentationChecks#7": ("user-agent: FooBot\nallow: /p\ndisallow: /\n"),
    "GoogleOnly_DocumentationChecks#8": ("user-agent: FooBot\nallow: /folder\ndisallow: /folder\n"),
    "GoogleOnly_DocumentationChecks#9": ("user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n"),
    "GoogleOnly_DocumentationChecks#10": ("user-agent: FooBot\nallow: /$\ndisallow: /\n"),
}

CASES = [
    ("GoogleOnly_SystemTest", "GoogleOnly_SystemTest#1", "FooBot", "", True),
    ("GoogleOnly_SystemTest", "GoogleOnly_SystemTest#2", "", "", True),
    ("GoogleOnly_SystemTest", "GoogleOnly_SystemTest#2", "FooBot", "", False),
    ("GoogleOnly_SystemTest", "GoogleOnly_SystemTest#1", "", "", True),
    ("ID_LineSyntax_Line", "GoogleOnly_SystemTest#2", "FooBot", "http://foo.bar/x/y", False),
    ("ID_LineSyntax_Line", "ID_LineSyntax_Line#1", "FooBot", "http://foo.bar/x/y", True),
    ("ID_LineSyntax_Line", "ID_LineSyntax_Line#2", "FooBot", "http://foo.bar/x/y", False),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "FooBot", "http://foo.bar/x/b", True),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "FooBot", "http://foo.bar/z/d", True),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "FooBot", "http://foo.bar/y/c", False),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BarBot", "http://foo.bar/y/c", True),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BarBot", "http://foo.bar/w/a", True),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BarBot", "http://foo.bar/z/d", False),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BazBot", "http://foo.bar/z/d", True),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "FooBot", "http://foo.bar/foo/bar/", False),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BarBot", "http://foo.bar/foo/bar/", False),
    ("ID_LineSyntax_Groups", "ID_LineSyntax_Groups#1", "BazBot", "http://foo.bar/foo/bar/", False),
    (
        "ID_LineSyntax_Groups_OtherRules",
        "ID_LineSyntax_Groups_OtherRules#1",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "ID_LineSyntax_Groups_OtherRules",
        "ID_LineSyntax_Groups_OtherRules#1",
        "BarBot",
        "http://foo.bar/",
        False,
    ),
    (
        "ID_LineSyntax_Groups_OtherRules",
        "ID_LineSyntax_Groups_OtherRules#2",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "ID_LineSyntax_Groups_OtherRules",
        "ID_LineSyntax_Groups_OtherRules#2",
        "BarBot",
        "http://foo.bar/",
        False,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#1",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#2",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#3",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#1",
        "FooBot",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#2",
        "FooBot",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_REPLineNamesCaseInsensitive",
        "ID_REPLineNamesCaseInsensitive#3",
        "FooBot",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#1",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#2",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#3",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#1",
        "Foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#2",
        "Foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#3",
        "Foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#1",
        "foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#2",
        "foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#3",
        "foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#1",
        "foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#2",
        "foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "ID_UserAgentValueCaseInsensitive",
        "ID_UserAgentValueCaseInsensitive#3",
        "foo",
        "http://foo.bar/a/b",
        False,
    ),
    (
        "GoogleOnly_AcceptUserAgentUpToFirstSpace",
        "GoogleOnly_AcceptUserAgentUpToFirstSpace#1",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "GoogleOnly_AcceptUserAgentUpToFirstSpace",
        "GoogleOnly_AcceptUserAgentUpToFirstSpace#1",
        "Foo Bar",
        "http://foo.bar/x/y",
        False,
    ),
    ("ID_GlobalGroups_Secondary", "GoogleOnly_SystemTest#1", "FooBot", "http://foo.bar/x/y", True),
    (
        "ID_GlobalGroups_Secondary",
        "ID_GlobalGroups_Secondary#1",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "ID_GlobalGroups_Secondary",
        "ID_GlobalGroups_Secondary#1",
        "BarBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_GlobalGroups_Secondary",
        "ID_GlobalGroups_Secondary#2",
        "QuxBot",
        "http://foo.bar/x/y",
        True,
    ),
    (
        "ID_AllowDisallow_Value_CaseSensitive",
        "ID_AllowDisallow_Value_CaseSensitive#1",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "ID_AllowDisallow_Value_CaseSensitive",
        "ID_AllowDisallow_Value_CaseSensitive#2",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    ("ID_LongestMatch", "ID_LongestMatch#1", "FooBot", "http://foo.bar/x/page.html", False),
    ("ID_LongestMatch", "ID_LongestMatch#2", "FooBot", "http://foo.bar/x/page.html", True),
    ("ID_LongestMatch", "ID_LongestMatch#2", "FooBot", "http://foo.bar/x/", False),
    ("ID_LongestMatch", "ID_LongestMatch#3", "FooBot", "http://foo.bar/x/page.html", True),
    ("ID_LongestMatch", "ID_LongestMatch#4", "FooBot", "http://foo.bar/x/page.html", True),
    ("ID_LongestMatch", "ID_LongestMatch#5", "FooBot", "http://foo.bar/x", False),
    ("ID_LongestMatch", "ID_LongestMatch#5", "FooBot", "http://foo.bar/x/", True),
    ("ID_LongestMatch", "ID_LongestMatch#6", "FooBot", "http://foo.bar/x/page.html", True),
    ("ID_LongestMatch", "ID_LongestMatch#7", "FooBot", "http://foo.bar/page.html", False),
    ("ID_LongestMatch", "ID_LongestMatch#7", "FooBot", "http://foo.bar/page", True),
    ("ID_LongestMatch", "ID_LongestMatch#8", "FooBot", "http://foo.bar/x/page.html", True),
    ("ID_LongestMatch", "ID_LongestMatch#8", "FooBot", "http://foo.bar/x/y.html", False),
    ("ID_LongestMatch", "ID_LongestMatch#9", "FooBot", "http://foo.bar/x/page", True),
    ("ID_LongestMatch", "ID_LongestMatch#9", "FooBot", "http://foo.bar/y/page", False),
    (
        "ID_Encoding",
        "ID_Encoding#1",
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
        True,
    ),
    ("ID_Encoding", "ID_Encoding#2", "FooBot", "http://foo.bar/foo/bar/%E3%83%84", True),
    ("ID_Encoding", "ID_Encoding#2", "FooBot", "http://foo.bar/foo/bar/ツ", False),
    ("ID_Encoding", "ID_Encoding#3", "FooBot", "http://foo.bar/foo/bar/%E3%83%84", True),
    ("ID_Encoding", "ID_Encoding#3", "FooBot", "http://foo.bar/foo/bar/ツ", False),
    ("ID_Encoding", "ID_Encoding#4", "FooBot", "http://foo.bar/foo/bar/baz", False),
    ("ID_Encoding", "ID_Encoding#4", "FooBot", "http://foo.bar/foo/bar/%62%61%7A", True),
    (
        "ID_SpecialCharacters",
        "ID_SpecialCharacters#1",
        "FooBot",
        "http://foo.bar/foo/bar/quz",
        False,
    ),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#1", "FooBot", "http://foo.bar/foo/quz", True),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#1", "FooBot", "http://foo.bar/foo//quz", True),
    (
        "ID_SpecialCharacters",
        "ID_SpecialCharacters#1",
        "FooBot",
        "http://foo.bar/foo/bax/quz",
        True,
    ),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#2", "FooBot", "http://foo.bar/foo/bar", False),
    (
        "ID_SpecialCharacters",
        "ID_SpecialCharacters#2",
        "FooBot",
        "http://foo.bar/foo/bar/qux",
        True,
    ),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#2", "FooBot", "http://foo.bar/foo/bar/", True),
    (
        "ID_SpecialCharacters",
        "ID_SpecialCharacters#2",
        "FooBot",
        "http://foo.bar/foo/bar/baz",
        True,
    ),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#3", "FooBot", "http://foo.bar/foo/bar", True),
    ("ID_SpecialCharacters", "ID_SpecialCharacters#3", "FooBot", "http://foo.bar/foo/quz", False),
    (
        "GoogleOnly_IndexHTMLisDirectory",
        "GoogleOnly_IndexHTMLisDirectory#1",
        "foobot",
        "http://foo.com/allowed-slash/",
        True,
    ),
    (
        "GoogleOnly_IndexHTMLisDirectory",
        "GoogleOnly_IndexHTMLisDirectory#1",
        "foobot",
        "http://foo.com/allowed-slash/index.htm",
        False,
    ),
    (
        "GoogleOnly_IndexHTMLisDirectory",
        "GoogleOnly_IndexHTMLisDirectory#1",
        "foobot",
        "http://foo.com/allowed-slash/index.html",
        True,
    ),
    (
        "GoogleOnly_IndexHTMLisDirectory",
        "GoogleOnly_IndexHTMLisDirectory#1",
        "foobot",
        "http://foo.com/anyother-url",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fish",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fish.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fish/salmon.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fishheads",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fishheads/yummy.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/fish.html?id=anything",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/Fish.asp",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/catfish",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#1",
        "FooBot",
        "http://foo.bar/?id=fish",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fish",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fish.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fish/salmon.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fishheads",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fishheads/yummy.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/fish.html?id=anything",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/Fish.bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/catfish",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#2",
        "FooBot",
        "http://foo.bar/?id=fish",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish/",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish/salmon",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish/?salmon",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish/salmon.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish/?id=anything",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/fish.html",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#3",
        "FooBot",
        "http://foo.bar/Fish/Salmon.html",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/filename.php",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/folder/filename.php",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/folder/filename.php?parameters",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar//folder/any.php.file.html",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/filename.php/",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/index?f=filename.php/",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/php/",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/index?php",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#4",
        "FooBot",
        "http://foo.bar/windows.PHP",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/filename.php",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/folder/filename.php",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/filename.php?parameters",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/filename.php/",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/filename.php5",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/php/",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/filename?php",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar/aaaphpaaa",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#5",
        "FooBot",
        "http://foo.bar//windows.PHP",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#6",
        "FooBot",
        "http://foo.bar/bar",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#6",
        "FooBot",
        "http://foo.bar/fish.php",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#6",
        "FooBot",
        "http://foo.bar/fishheads/catfish.php?parameters",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#6",
        "FooBot",
        "http://foo.bar/Fish.PHP",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#7",
        "FooBot",
        "http://example.com/page",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#8",
        "FooBot",
        "http://example.com/folder/page",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#9",
        "FooBot",
        "http://example.com/page.htm",
        False,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#10",
        "FooBot",
        "http://example.com/",
        True,
    ),
    (
        "GoogleOnly_DocumentationChecks",
        "GoogleOnly_DocumentationChecks#10",
        "FooBot",
        "http://example.com/page.html",
        False,
    ),
]


def _line_too_long_cases() -> list[tuple[str, str, str, str, bool]]:
    # Google keeps 8 x 2083 bytes of a line: a rule past that is cut, and what is left of it
    # still matches.
    max_line = 2083 * 8
    allow, disallow = "allow: ", "disallow: "
    longline = "/x/" + "a" * (max_line - len("/x/") - len(disallow) + 1 - len("/x/"))
    cut = "user-agent: FooBot\n" + disallow + longline + "/qux\n"
    length = max_line - len("/x/") - len(allow) + 1 - len("/x/")
    long_a, long_b = "/x/" + "a" * length, "/x/" + "b" * length
    both = f"user-agent: FooBot\ndisallow: /\n{allow}{long_a}/qux\n{allow}{long_b}/qux\n"
    name = "GoogleOnly_LineTooLong"
    return [
        (name, cut, "FooBot", "http://foo.bar/fux", True),
        (name, cut, "FooBot", f"http://foo.bar{longline}/fux", False),
        (name, both, "FooBot", "http://foo.bar/", False),
        (name, both, "FooBot", f"http://foo.bar{long_a}/qux", True),
        (name, both, "FooBot", f"http://foo.bar{long_b}/fux", True),
    ]


#: Google's own cases crawlfleet answers otherwise, on purpose, and its answer:
#: the crawler's side is a User-Agent header, whose product token ends at the first space or
#: "/" ("Foo Bar" is the crawler "foo"); Google's matcher takes the name as given.
DIFFERENCES = {("GoogleOnly_AcceptUserAgentUpToFirstSpace", "Foo Bar"): True}

ALL = [(t, ROBOTS[r], agent, url, want) for t, r, agent, url, want in CASES]
ALL += _line_too_long_cases()
RFC_LEVEL = [case for case in ALL if case[0].startswith("ID_")]
GOOGLE_ONLY = [case for case in ALL if case[0].startswith("GoogleOnly_")]


def _id(case: tuple[str, str, str, str, bool]) -> str:
    return f"{case[0]}-{case[2]}-{case[3][:60]}"


def test_the_table_holds_every_case_of_the_suite() -> None:
    assert (len(ALL), len(RFC_LEVEL), len(GOOGLE_ONLY)) == (145, 72, 73)


@pytest.mark.parametrize("case", RFC_LEVEL, ids=_id)
def test_rfc_9309_cases(case: tuple[str, str, str, str, bool]) -> None:
    _, robots, agent, url, allowed = case
    assert parse_robots(robots, agent).allowed(url) is allowed


@pytest.mark.parametrize("case", GOOGLE_ONLY, ids=_id)
def test_google_only_cases(case: tuple[str, str, str, str, bool]) -> None:
    test, robots, agent, url, allowed = case
    expected = DIFFERENCES.get((test, agent), allowed)
    assert parse_robots(robots, agent).allowed(url) is expected


DEFAULT_UA = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"


@pytest.mark.parametrize(
    ("group", "applies"),
    [
        ("crawlfleet", True),
        ("CrawlFleet", True),
        ("crawlfleet/2.0", True),
        ("crawlfleet extra words", True),
        # words of the User-Agent header that are not its product token
        ("crawl", False),
        ("github", False),
        ("https", False),
        ("0.1", False),
        ("crawlfleet-beta", False),
        ("fleet", False),
    ],
)
def test_a_group_applies_to_the_product_token_only(group: str, applies: bool) -> None:
    robots = f"User-agent: *\nAllow: /\n\nUser-agent: {group}\nDisallow: /\n"
    assert parse_robots(robots, DEFAULT_UA).allowed("https://shop.test/p") is not applies


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        (DEFAULT_UA, "crawlfleet"),
        ("Mozilla/5.0 (compatible)", "mozilla"),
        ("FooBot", "foobot"),
        ("  Foo Bar ", "foo"),
        ("", ""),
    ],
)
def test_product_token(user_agent: str, token: str) -> None:
    assert product_token(user_agent) == token


def test_crawl_delay_comes_from_the_group_that_applies_and_does_not_end_it() -> None:
    robots = (
        "User-agent: *\nCrawl-delay: 9\nDisallow: /a\n\n"
        "User-agent: crawlfleet\nCrawl-delay: 4\nUser-agent: other\nDisallow: /b\n"
    )
    ours = parse_robots(robots, DEFAULT_UA)
    assert (ours.crawl_delay, ours.allowed("http://h/a"), ours.allowed("http://h/b")) == (
        4.0,
        True,
        False,
    )
    other = parse_robots(robots, "other/2")  # one group with ours: the Crawl-delay ended nothing
    assert (other.crawl_delay, other.allowed("http://h/b")) == (None, False)
    anyone = parse_robots(robots, "somebot/1")
    assert (anyone.crawl_delay, anyone.allowed("http://h/a")) == (9.0, False)


def test_a_pattern_of_many_wildcards_is_matched_without_backtracking() -> None:
    rules = parse_robots("User-agent: *\nDisallow: /" + "*a" * 200 + "*b$\n", "x")
    assert rules.allowed("http://h/" + "a" * 5000)  # no "b" at the end: quickly allowed
    assert not rules.allowed("http://h/" + "a" * 300 + "b")


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("", "/"),
        ("http://www.example.com", "/"),
        ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("example.com?a", "/?a"),
        ("example.com/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
        ("/a", "/a"),
    ],
)
def test_path_of(url: str, path: str) -> None:
    assert path_of(url) == path
