"""Every way a page's URL is joined is the WHATWG URL parser's: links, POST links, form actions,
``response.urljoin`` and ``<base href>``. The cases are those of WHATWG's URL test data
(``urltestdata.json``) whose result is an http(s) URL, written here as a table of ``(input,
base, href)``; ``base`` None: the input is absolute."""

from __future__ import annotations

import html

import pytest

from crawlfleet.request import Request
from crawlfleet.response import Response
from crawlfleet.urls import join, request_identity

WHATWG_JOINS = [
    ("http://example\t.\norg", "http://example.org/foo/bar", "http://example.org/"),
    (
        "http://user:pass@foo:21/bar;par?b#c",
        "http://example.org/foo/bar",
        "http://user:pass@foo:21/bar;par?b#c",
    ),
    ("https://test:@test", None, "https://test@test/"),
    ("https://:@test", None, "https://test/"),
    ("http:foo.com", "http://example.org/foo/bar", "http://example.org/foo/foo.com"),
    ("\t   :foo.com   \n", "http://example.org/foo/bar", "http://example.org/foo/:foo.com"),
    (" foo.com  ", "http://example.org/foo/bar", "http://example.org/foo/foo.com"),
    ("http://f:21/ b ? d # e ", "http://example.org/foo/bar", "http://f:21/%20b%20?%20d%20#%20e"),
    ("http://f:/c", "http://example.org/foo/bar", "http://f/c"),
    ("http://f:0/c", "http://example.org/foo/bar", "http://f:0/c"),
    ("http://f:00000000000000/c", "http://example.org/foo/bar", "http://f:0/c"),
    ("http://f:00000000000000000000080/c", "http://example.org/foo/bar", "http://f/c"),
    ("http://f:\n/c", "http://example.org/foo/bar", "http://f/c"),
    ("", "http://example.org/foo/bar", "http://example.org/foo/bar"),
    ("  \t", "http://example.org/foo/bar", "http://example.org/foo/bar"),
    (":foo.com/", "http://example.org/foo/bar", "http://example.org/foo/:foo.com/"),
    (":foo.com\\", "http://example.org/foo/bar", "http://example.org/foo/:foo.com/"),
    (":", "http://example.org/foo/bar", "http://example.org/foo/:"),
    (":a", "http://example.org/foo/bar", "http://example.org/foo/:a"),
    (":/", "http://example.org/foo/bar", "http://example.org/foo/:/"),
    (":\\", "http://example.org/foo/bar", "http://example.org/foo/:/"),
    (":#", "http://example.org/foo/bar", "http://example.org/foo/:#"),
    ("#", "http://example.org/foo/bar", "http://example.org/foo/bar#"),
    ("#/", "http://example.org/foo/bar", "http://example.org/foo/bar#/"),
    ("#\\", "http://example.org/foo/bar", "http://example.org/foo/bar#\\"),
    ("#;?", "http://example.org/foo/bar", "http://example.org/foo/bar#;?"),
    ("?", "http://example.org/foo/bar", "http://example.org/foo/bar?"),
    ("/", "http://example.org/foo/bar", "http://example.org/"),
    (":23", "http://example.org/foo/bar", "http://example.org/foo/:23"),
    ("/:23", "http://example.org/foo/bar", "http://example.org/:23"),
    ("\\x", "http://example.org/foo/bar", "http://example.org/x"),
    ("\\\\x\\hello", "http://example.org/foo/bar", "http://x/hello"),
    ("::", "http://example.org/foo/bar", "http://example.org/foo/::"),
    ("::23", "http://example.org/foo/bar", "http://example.org/foo/::23"),
    ("http://a:b@c:29/d", "http://example.org/foo/bar", "http://a:b@c:29/d"),
    ("http://\xe9@\xe9", None, "http://%C3%A9@xn--9ca/"),
    ("http://\xe9@example.com", None, "http://%C3%A9@example.com/"),
    ("http::@c:29", "http://example.org/foo/bar", "http://example.org/foo/:@c:29"),
    ("http://&a:foo(b]c@d:2/", "http://example.org/foo/bar", "http://&a:foo(b%5Dc@d:2/"),
    ("http://::@c@d:2", "http://example.org/foo/bar", "http://:%3A%40c@d:2/"),
    ("http://foo.com:b@d/", "http://example.org/foo/bar", "http://foo.com:b@d/"),
    ("http://foo.com/\\@", "http://example.org/foo/bar", "http://foo.com//@"),
    ("http:\\\\foo.com\\", "http://example.org/foo/bar", "http://foo.com/"),
    ("http:\\\\a\\b:c\\d@foo.com\\", "http://example.org/foo/bar", "http://a/b:c/d@foo.com/"),
    ("http://a:b@c\\", None, "http://a:b@c/"),
    ("//foo/bar", "http://example.org/foo/bar", "http://foo/bar"),
    ("http://foo/path;a??e#f#g", "http://example.org/foo/bar", "http://foo/path;a??e#f#g"),
    ("http://foo/abcd?efgh?ijkl", "http://example.org/foo/bar", "http://foo/abcd?efgh?ijkl"),
    ("http://foo/abcd#foo?bar", "http://example.org/foo/bar", "http://foo/abcd#foo?bar"),
    ("[61:24:74]:98", "http://example.org/foo/bar", "http://example.org/foo/[61:24:74]:98"),
    ("http:[61:27]/:foo", "http://example.org/foo/bar", "http://example.org/foo/[61:27]/:foo"),
    ("http://[2001::1]", "http://example.org/foo/bar", "http://[2001::1]/"),
    ("http://[::127.0.0.1]", "http://example.org/foo/bar", "http://[::7f00:1]/"),
    ("http://[0:0:0:0:0:0:13.1.68.3]", "http://example.org/foo/bar", "http://[::d01:4403]/"),
    ("http://[2001::1]:80", "http://example.org/foo/bar", "http://[2001::1]/"),
    ("http:/example.com/", "http://example.org/foo/bar", "http://example.org/example.com/"),
    ("http:/", "http://example.com/", "http://example.com/"),
    ("https:/example.com/", "http://example.org/foo/bar", "https://example.com/"),
    ("http:example.com/", "http://example.org/foo/bar", "http://example.org/foo/example.com/"),
    ("https:example.com/", "http://example.org/foo/bar", "https://example.com/"),
    ("/a/b/c", "http://example.org/foo/bar", "http://example.org/a/b/c"),
    ("/a/ /c", "http://example.org/foo/bar", "http://example.org/a/%20/c"),
    ("/a%2fc", "http://example.org/foo/bar", "http://example.org/a%2fc"),
    ("/a/%2f/c", "http://example.org/foo/bar", "http://example.org/a/%2f/c"),
    ("#\u03b2", "http://example.org/foo/bar", "http://example.org/foo/bar#%CE%B2"),
    ("http://example.com/././foo", None, "http://example.com/foo"),
    ("http://example.com/./.foo", None, "http://example.com/.foo"),
    ("http://example.com/foo/.", None, "http://example.com/foo/"),
    ("http://example.com/foo/./", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar/..", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar/../", None, "http://example.com/foo/"),
    ("http://example.com/foo/..bar", None, "http://example.com/foo/..bar"),
    ("http://example.com/foo/bar/../ton", None, "http://example.com/foo/ton"),
    ("http://example.com/foo/bar/../ton/../../a", None, "http://example.com/a"),
    ("http://example.com/foo/../../..", None, "http://example.com/"),
    ("http://example.com/foo/../../../ton", None, "http://example.com/ton"),
    ("http://example.com/foo/%2e", None, "http://example.com/foo/"),
    ("http://example.com/foo/%2e%2", None, "http://example.com/foo/%2e%2"),
    ("http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", None, "http://example.com/%2e.bar"),
    ("http://example.com////../..", None, "http://example.com//"),
    ("http://example.com/foo/bar//../..", None, "http://example.com/foo/"),
    ("http://example.com/foo/bar//..", None, "http://example.com/foo/bar/"),
    ("http://example.com/foo", None, "http://example.com/foo"),
    ("http://example.com/%20foo", None, "http://example.com/%20foo"),
    ("http://example.com/foo%", None, "http://example.com/foo%"),
    ("http://example.com/foo%2", None, "http://example.com/foo%2"),
    ("http://example.com/foo%2zbar", None, "http://example.com/foo%2zbar"),
    ("http://example.com/foo%2\xc2\xa9zbar", None, "http://example.com/foo%2%C3%82%C2%A9zbar"),
    ("http://example.com/foo%41%7a", None, "http://example.com/foo%41%7a"),
    ("http://example.com/foo\t\x91%91", None, "http://example.com/foo%C2%91%91"),
    ("http://example.com/foo%00%51", None, "http://example.com/foo%00%51"),
    ("http://example.com/(%28:%3A%29)", None, "http://example.com/(%28:%3A%29)"),
    ("http://example.com/%3A%3a%3C%3c", None, "http://example.com/%3A%3a%3C%3c"),
    ("http://example.com/foo\tbar", None, "http://example.com/foobar"),
    ("http://example.com\\\\foo\\\\bar", None, "http://example.com//foo//bar"),
    (
        "http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd",
        None,
        "http://example.com/%7Ffp3%3Eju%3Dduvgw%3Dd",
    ),
    ("http://example.com/@asdf%40", None, "http://example.com/@asdf%40"),
    (
        "http://example.com/\u4f60\u597d\u4f60\u597d",
        None,
        "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD",
    ),
    ("http://example.com/\u2025/foo", None, "http://example.com/%E2%80%A5/foo"),
    ("http://example.com/\ufeff/foo", None, "http://example.com/%EF%BB%BF/foo"),
    (
        "http://example.com/\u202e/foo/\u202d/bar",
        None,
        "http://example.com/%E2%80%AE/foo/%E2%80%AD/bar",
    ),
    ("http://www.google.com/foo?bar=baz#", None, "http://www.google.com/foo?bar=baz#"),
    (
        "http://www.google.com/foo?bar=baz# \xbb",
        None,
        "http://www.google.com/foo?bar=baz#%20%C2%BB",
    ),
    ("http://www.google.com", None, "http://www.google.com/"),
    ("http://192.0x00A80001", None, "http://192.168.0.1/"),
    ("http://www/foo%2Ehtml", None, "http://www/foo%2Ehtml"),
    ("http://www/foo/%2E/html", None, "http://www/foo/html"),
    ("http://%25DOMAIN:foobar@foodomain.com/", None, "http://%25DOMAIN:foobar@foodomain.com/"),
    ("http:\\\\www.google.com\\foo", None, "http://www.google.com/foo"),
    ("http://foo:80/", None, "http://foo/"),
    ("http://foo:81/", None, "http://foo:81/"),
    ("https://foo:443/", None, "https://foo/"),
    ("https://foo:80/", None, "https://foo:80/"),
    ("http:/example.com/", None, "http://example.com/"),
    ("https:/example.com/", None, "https://example.com/"),
    ("http:example.com/", None, "http://example.com/"),
    ("https:example.com/", None, "https://example.com/"),
    ("https://example.com/aaa/bbb/%2e%2e?query", None, "https://example.com/aaa/?query"),
    ("http:@www.example.com", None, "http://www.example.com/"),
    ("http:/@www.example.com", None, "http://www.example.com/"),
    ("http://@www.example.com", None, "http://www.example.com/"),
    ("http:a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http:/a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http://a:b@www.example.com", None, "http://a:b@www.example.com/"),
    ("http://@pple.com", None, "http://pple.com/"),
    ("http::b@www.example.com", None, "http://:b@www.example.com/"),
    ("http:/:b@www.example.com", None, "http://:b@www.example.com/"),
    ("http://:b@www.example.com", None, "http://:b@www.example.com/"),
    ("http:a:@www.example.com", None, "http://a@www.example.com/"),
    ("http:/a:@www.example.com", None, "http://a@www.example.com/"),
    ("http://a:@www.example.com", None, "http://a@www.example.com/"),
    ("http://www.@pple.com", None, "http://www.@pple.com/"),
    ("http://:@www.example.com", None, "http://www.example.com/"),
    ("/", "http://www.example.com/test", "http://www.example.com/"),
    ("/test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    (".", "http://www.example.com/test", "http://www.example.com/"),
    ("..", "http://www.example.com/test", "http://www.example.com/"),
    ("test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("./test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("../test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("../aaa/test.txt", "http://www.example.com/test", "http://www.example.com/aaa/test.txt"),
    ("../../test.txt", "http://www.example.com/test", "http://www.example.com/test.txt"),
    ("\u4e2d/test.txt", "http://www.example.com/test", "http://www.example.com/%E4%B8%AD/test.txt"),
    ("http://www.example2.com", "http://www.example.com/test", "http://www.example2.com/"),
    ("//www.example2.com", "http://www.example.com/test", "http://www.example2.com/"),
    ("http://ExAmPlE.CoM", "http://other.com/", "http://example.com/"),
    ("http://GOO\u200b\u2060\ufeffgoo.com", "http://other.com/", "http://googoo.com/"),
    ("\x00\x1b\x04\x12 http://example.com/\x1f \r ", None, "http://example.com/"),
    ("http://www.foo\u3002bar.com", "http://other.com/", "http://www.foo.bar.com/"),
    ("https://x/\ufffd?\ufffd#\ufffd", None, "https://x/%EF%BF%BD?%EF%BF%BD#%EF%BF%BD"),
    ("http://a.b.c.xn--pokxncvks", None, "http://a.b.c.xn--pokxncvks/"),
    ("http://10.0.0.xn--pokxncvks", None, "http://10.0.0.xn--pokxncvks/"),
    ("http://a.b.c.XN--pokxncvks", None, "http://a.b.c.xn--pokxncvks/"),
    ("http://a.b.c.Xn--pokxncvks", None, "http://a.b.c.xn--pokxncvks/"),
    ("http://10.0.0.XN--pokxncvks", None, "http://10.0.0.xn--pokxncvks/"),
    ("http://10.0.0.xN--pokxncvks", None, "http://10.0.0.xn--pokxncvks/"),
    ("http://\uff27\uff4f.com", "http://other.com/", "http://go.com/"),
    ("http://\u4f60\u597d\u4f60\u597d", "http://other.com/", "http://xn--6qqa088eba/"),
    ("https://fa\xdf.ExAmPlE/", None, "https://xn--fa-hia.example/"),
    ("http://%30%78%63%30%2e%30%32%35%30.01", "http://other.com/", "http://192.168.0.1/"),
    ("http://%30%78%63%30%2e%30%32%35%30.01%2e", "http://other.com/", "http://192.168.0.1/"),
    (
        "http://\uff10\uff38\uff43\uff10\uff0e\uff10\uff12\uff15\uff10\uff0e\uff10\uff11",
        "http://other.com/",
        "http://192.168.0.1/",
    ),
    ("http://./", None, "http://./"),
    ("http://../", None, "http://../"),
    (
        "http://foo:\U0001f4a9@example.com/bar",
        "http://other.com/",
        "http://foo:%F0%9F%92%A9@example.com/bar",
    ),
    ("http://\U0001f600x@host/", None, "http://%F0%9F%98%80x@host/"),
    ("http://a:\U0001f600x@host/", None, "http://a:%F0%9F%98%80x@host/"),
    ("http://\U0001f600@host/", None, "http://%F0%9F%98%80@host/"),
    ("https://localhost?q=\U0001f525", None, "https://localhost/?q=%F0%9F%94%A5"),
    ("https://localhost#\U0001f525", None, "https://localhost/#%F0%9F%94%A5"),
    (
        "https://@test@test@example:800/",
        "http://doesnotmatter/",
        "https://%40test%40test@example:800/",
    ),
    ("https://@@@example", "http://doesnotmatter/", "https://%40%40@example/"),
    (
        "http://`{}:`{}@h/`{}?`{}",
        "http://doesnotmatter/",
        "http://%60%7B%7D:%60%7B%7D@h/%60%7B%7D?`{}",
    ),
    ("http://host/?'", None, "http://host/?%27"),
    ("/some/path", "http://user@example.org/smth", "http://user@example.org/some/path"),
    ("", "http://user:pass@example.org:21/smth", "http://user:pass@example.org:21/smth"),
    (
        "/some/path",
        "http://user:pass@example.org:21/smth",
        "http://user:pass@example.org:21/some/path",
    ),
    ("http://ho\tst/", None, "http://host/"),
    ("http://ho\nst/", None, "http://host/"),
    ("http://ho\rst/", None, "http://host/"),
    ("http://!\"$&'()*+,-.;=_`{}~/", None, "http://!\"$&'()*+,-.;=_`{}~/"),
    ("https://%e2%98%83", None, "https://xn--n3h/"),
    (
        "http://127.0.0.1:10100/relative_import.html",
        None,
        "http://127.0.0.1:10100/relative_import.html",
    ),
    ("http://facebook.com/?foo=%7B%22abc%22", None, "http://facebook.com/?foo=%7B%22abc%22"),
    ("https://localhost:3000/jqueryui@1.2.3", None, "https://localhost:3000/jqueryui@1.2.3"),
    (
        "h\tt\nt\rp://h\to\ns\rt:9\t0\n0\r0/p\ta\nt\rh?q\tu\ne\rry#f\tr\na\rg",
        None,
        "http://host:9000/path?query#frag",
    ),
    ("?a=b&c=d", "http://example.org/foo/bar", "http://example.org/foo/bar?a=b&c=d"),
    ("??a=b&c=d", "http://example.org/foo/bar", "http://example.org/foo/bar??a=b&c=d"),
    ("http:", "http://example.org/foo/bar", "http://example.org/foo/bar"),
    ("http://foo.bar/baz?qux#foo\x08bar", None, "http://foo.bar/baz?qux#foo%08bar"),
    ('http://foo.bar/baz?qux#foo"bar', None, "http://foo.bar/baz?qux#foo%22bar"),
    ("http://foo.bar/baz?qux#foo<bar", None, "http://foo.bar/baz?qux#foo%3Cbar"),
    ("http://foo.bar/baz?qux#foo>bar", None, "http://foo.bar/baz?qux#foo%3Ebar"),
    ("http://foo.bar/baz?qux#foo`bar", None, "http://foo.bar/baz?qux#foo%60bar"),
    ("http://1.2.3.4/", "http://other.com/", "http://1.2.3.4/"),
    ("http://1.2.3.4./", "http://other.com/", "http://1.2.3.4/"),
    ("http://192.168.257", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.168.257.", "http://other.com/", "http://192.168.1.1/"),
    ("http://192.168.257.com", "http://other.com/", "http://192.168.257.com/"),
    ("http://256", "http://other.com/", "http://0.0.1.0/"),
    ("http://256.com", "http://other.com/", "http://256.com/"),
    ("http://999999999", "http://other.com/", "http://59.154.201.255/"),
    ("http://999999999.", "http://other.com/", "http://59.154.201.255/"),
    ("http://999999999.com", "http://other.com/", "http://999999999.com/"),
    ("http://10000000000.com", "http://other.com/", "http://10000000000.com/"),
    ("http://4294967295", "http://other.com/", "http://255.255.255.255/"),
    ("http://0xffffffff", "http://other.com/", "http://255.255.255.255/"),
    ("https://0x.0x.0", None, "https://0.0.0.0/"),
    ("https://0x.0x.0x.0x", None, "https://0.0.0.0/"),
    ("https://00.00.00.00", None, "https://0.0.0.0/"),
    ("https://0000000000000000000000000000000000000000177.0.0.1", None, "https://127.0.0.1/"),
    ("http://[1:0::]", "http://example.net/", "http://[1::]/"),
    ("http://0x7f.0.0.0x7g", None, "http://0x7f.0.0.0x7g/"),
    ("http://0X7F.0.0.0X7G", None, "http://0x7f.0.0.0x7g/"),
    ("http://[0:1:0:1:0:1:0:1]", None, "http://[0:1:0:1:0:1:0:1]/"),
    ("http://[1:0:1:0:1:0:1:0]", None, "http://[1:0:1:0:1:0:1:0]/"),
    ('http://example.org/test?"', None, "http://example.org/test?%22"),
    ("http://example.org/test?#", None, "http://example.org/test?#"),
    ("http://example.org/test?<", None, "http://example.org/test?%3C"),
    ("http://example.org/test?>", None, "http://example.org/test?%3E"),
    ("http://example.org/test?\u2323", None, "http://example.org/test?%E2%8C%A3"),
    ("http://example.org/test?%23%23", None, "http://example.org/test?%23%23"),
    ("http://example.org/test?%GH", None, "http://example.org/test?%GH"),
    ("http://example.org/test?a#%EF", None, "http://example.org/test?a#%EF"),
    ("http://example.org/test?a#%GH", None, "http://example.org/test?a#%GH"),
    ("http://example.org/test?a#b\x00c", None, "http://example.org/test?a#b%00c"),
    ("#link", "https://example.org/##link", "https://example.org/#link"),
    (
        "https://www.example.com/path{\x7fpath.html?query'\x7f=query#fragment<\x7ffragment",
        None,
        "https://www.example.com/path%7B%7Fpath.html?query%27%7F=query#fragment%3C%7Ffragment",
    ),
    ("https://user:pass[\x7f@foo/bar", "http://example.org", "https://user:pass%5B%7F@foo/bar"),
    ("http://foo.09..", None, "http://foo.09../"),
    ("https://x/\x00y", None, "https://x/%00y"),
    ("https://x/?\x00y", None, "https://x/?%00y"),
    ("https://x/?#\x00y", None, "https://x/?#%00y"),
    ("https://x/\uffffy", None, "https://x/%EF%BF%BFy"),
    ("https://x/?\uffffy", None, "https://x/?%EF%BF%BFy"),
    ("https://x/?#\uffffy", None, "https://x/?#%EF%BF%BFy"),
    ('https://example.com/"quoted"', None, "https://example.com/%22quoted%22"),
    ("https://a%C2%ADb/", None, "https://ab/"),
    ("https://xn--/", None, "https://xn--/"),
    ("///test", "http://example.org/", "http://test/"),
    ("///\\//\\//test", "http://example.org/", "http://test/"),
    ("///example.org/path", "http://example.org/", "http://example.org/path"),
    ("///example.org/../path", "http://example.org/", "http://example.org/path"),
    ("///example.org/../../", "http://example.org/", "http://example.org/"),
    ("///example.org/../path/../../", "http://example.org/", "http://example.org/"),
    ("///example.org/../path/../../path", "http://example.org/", "http://example.org/path"),
    ("/\\/\\//example.org/../path", "http://example.org/", "http://example.org/path"),
]

BODY = b"a=1"
JOINED = [case for case in WHATWG_JOINS if case[1] is not None]
#: inputs HTML would change before a form's action reaches the URL parser (NUL, CR, controls)
IN_HTML = [c for c in JOINED if not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in c[0])]


def _id(case: tuple[str, str | None, str]) -> str:
    return repr(case[0])[:40]


def test_the_table_holds_every_http_case_of_the_data() -> None:
    assert (len(WHATWG_JOINS), len(JOINED)) == (247, 114)


@pytest.mark.parametrize("case", WHATWG_JOINS, ids=_id)
def test_a_post_link_is_joined_as_a_browser_joins_it(case: tuple[str, str | None, str]) -> None:
    given, base, href = case
    request = Request(given, base=base, method="POST", body=BODY)
    assert (
        request_identity(request.url, "POST", BODY)[:2] == request_identity(href, "POST", BODY)[:2]
    )


@pytest.mark.parametrize("case", JOINED, ids=_id)
def test_links_urljoin_and_base_href_join_as_a_browser_does(case: tuple[str, str, str]) -> None:
    given, base, href = case
    expected = request_identity(href)[:2]
    assert request_identity(Request(given, base=base).url)[:2] == expected
    page = Response(base, 200, {"content-type": "text/html"}, b"<p>x</p>")
    assert request_identity(page.urljoin(given))[:2] == expected
    assert request_identity(join(base, given))[:2] == expected


@pytest.mark.parametrize("case", IN_HTML, ids=_id)
def test_a_form_action_is_joined_as_a_browser_joins_it(case: tuple[str, str, str]) -> None:
    given, base, href = case
    form = f'<form method="post" action="{html.escape(given)}"><input name="a" value="1"></form>'
    page = Response(base, 200, {"content-type": "text/html"}, form.encode())
    request = page.follow_form()
    assert (
        request_identity(request.url, "POST", request.body)[:2]
        == (request_identity(href, "POST", BODY)[:2])
    )


def test_a_base_href_is_joined_as_a_browser_joins_it() -> None:
    page = Response(
        "http://example.org/foo/bar",
        200,
        {"content-type": "text/html"},
        b'<base href="///cdn.example/x/"><a href="y">y</a>',
    )
    assert page.base_url == "http://cdn.example/x/"
    assert [r.url for r in page.follow_all("a")] == ["http://cdn.example/x/y"]
