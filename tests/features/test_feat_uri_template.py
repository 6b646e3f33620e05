"""Unit tests of mcp_sync.server.uri_template.UriTemplate (RFC 6570 as far as MCP needs it)."""

from __future__ import annotations

import pytest

from mcp_sync.server.uri_template import UriTemplate


# -- simple {var} -----------------------------------------------------------------------------
def test_simple_variable_match_and_expand():
    t = UriTemplate("users://{id}/profile")
    assert t.is_template and t.variables == ["id"]
    assert t.match("users://42/profile") == {"id": "42"}
    assert t.expand(id=42) == "users://42/profile"


def test_simple_variable_does_not_cross_slash_or_match_empty():
    t = UriTemplate("users://{id}/profile")
    assert t.match("users://4/2/profile") is None
    assert t.match("users:///profile") is None
    assert t.match("users://42/profile/extra") is None
    assert t.match("users://42/profil") is None
    assert t.match("other://42/profile") is None


def test_simple_expansion_percent_encodes_reserved_characters_and_match_decodes():
    t = UriTemplate("notes://{title}")
    uri = t.expand(title="a b/c?d#é")
    assert uri == "notes://a%20b%2Fc%3Fd%23%C3%A9"
    assert t.match(uri) == {"title": "a b/c?d#é"}


def test_multiple_variables_in_path():
    t = UriTemplate("repo://{owner}/{repo}/issues/{number}")
    assert t.variables == ["owner", "repo", "number"]
    assert t.match("repo://octo/hello%20world/issues/7") == {
        "owner": "octo",
        "repo": "hello world",
        "number": "7",
    }
    assert (
        t.expand(owner="octo", repo="hello world", number=7) == "repo://octo/hello%20world/issues/7"
    )
    assert t.match("repo://octo/issues/7") is None


def test_several_values_in_one_expression():
    t = UriTemplate("point://{x,y}")
    assert t.match("point://1,2") == {"x": "1", "y": "2"}
    assert t.expand(x=1, y=2) == "point://1,2"
    assert t.match("point://1") is None


def test_percent_decoding_of_multibyte_utf8():
    t = UriTemplate("city://{name}")
    assert t.match("city://S%C3%A3o%20Paulo") == {"name": "São Paulo"}
    assert t.expand(name="São Paulo") == "city://S%C3%A3o%20Paulo"


# -- reserved {+var} --------------------------------------------------------------------------
def test_reserved_expansion_spans_slashes():
    t = UriTemplate("file:///{+path}")
    assert t.match("file:///home/user/notes.txt") == {"path": "home/user/notes.txt"}
    assert t.match("file:///") is None


def test_reserved_expansion_keeps_reserved_characters_and_pct_triplets():
    t = UriTemplate("file:///{+path}")
    # reserved characters pass through, a space is encoded, an existing %41 stays
    assert t.expand(path="a/b c:d@e!f;g=h,i&j%41") == "file:///a/b%20c:d@e!f;g=h,i&j%41"
    assert UriTemplate("x://{+p}").expand(p="100%") == "x://100%25"


def test_reserved_variable_followed_by_literal_backtracks():
    t = UriTemplate("file:///{+path}/meta")
    assert t.match("file:///a/b/c.txt/meta") == {"path": "a/b/c.txt"}
    assert t.match("file:///a/b/c.txt") is None


# -- query {?a,b} / {&b} ----------------------------------------------------------------------
def test_query_parameters_are_optional_and_in_any_order():
    t = UriTemplate("weather://{city}/forecast{?days,units}")
    assert t.variables == ["city", "days", "units"]
    assert t.match("weather://Paris/forecast") == {"city": "Paris"}
    assert t.match("weather://Paris/forecast?days=3") == {"city": "Paris", "days": "3"}
    assert t.match("weather://Paris/forecast?units=metric&days=3") == {
        "city": "Paris",
        "days": "3",
        "units": "metric",
    }


def test_query_ignores_unknown_parameters_and_decodes_values():
    t = UriTemplate("search://items{?q}")
    assert t.match("search://items?q=a%20b%26c&page=2") == {"q": "a b&c"}
    # "+" is not form-encoding here: it stays a plus
    assert t.match("search://items?q=a+b") == {"q": "a+b"}
    assert t.match("search://items?q=") == {"q": ""}


def test_query_expand_leaves_out_missing_values_and_round_trips():
    t = UriTemplate("weather://{city}/forecast{?days,units}")
    assert t.expand(city="Paris") == "weather://Paris/forecast"
    assert t.expand(city="Paris", units="metric") == "weather://Paris/forecast?units=metric"
    uri = t.expand(city="New York", days=3, units="a&b")
    assert uri == "weather://New%20York/forecast?days=3&units=a%26b"
    assert t.match(uri) == {"city": "New York", "days": "3", "units": "a&b"}


def test_query_continuation_expression():
    t = UriTemplate("list://items{?page}{&size}")
    assert t.match("list://items?page=2&size=10") == {"page": "2", "size": "10"}
    assert t.expand(page=2, size=10) == "list://items?page=2&size=10"
    # the continuation starts the query when the first expression expanded to nothing
    assert t.expand(size=10) == "list://items?size=10"
    assert t.match(t.expand(size=10)) == {"size": "10"}
    fixed = UriTemplate("list://items?kind=all{&size}")
    assert fixed.match("list://items?kind=all&size=5") == {"size": "5"}
    assert fixed.expand(size=5) == "list://items?kind=all&size=5"


def test_query_on_a_template_without_query_does_not_match():
    assert UriTemplate("users://{id}").match("users://42?x=1") is None


# -- path segment {/var}, label {.var}, fragment, path parameters --------------------------
def test_path_segment_expression():
    t = UriTemplate("docs://root{/section}")
    assert t.match("docs://root/intro") == {"section": "intro"}
    assert t.expand(section="a b") == "docs://root/a%20b"
    assert t.match("docs://root/intro/more") is None
    two = UriTemplate("docs://root{/a,b}")
    assert two.match("docs://root/x/y") == {"a": "x", "b": "y"}
    assert two.expand(a="x", b="y") == "docs://root/x/y"


def test_label_expression():
    t = UriTemplate("file://report{.ext}")
    assert t.match("file://report.json") == {"ext": "json"}
    assert t.expand(ext="txt") == "file://report.txt"
    assert t.match("file://report") is None
    greedy = UriTemplate("file://{name}{.ext}")
    assert greedy.match("file://archive.tar.gz") == {"name": "archive.tar", "ext": "gz"}


def test_fragment_expression():
    t = UriTemplate("doc://{id}{#section}")
    assert t.match("doc://7#part/2") == {"id": "7", "section": "part/2"}
    assert t.expand(id=7, section="part/2") == "doc://7#part/2"


def test_path_style_parameters():
    t = UriTemplate("map://{area}{;x,y}")
    assert t.expand(area="a", x=1, y=2) == "map://a;x=1;y=2"
    assert t.expand(area="a", x=1) == "map://a;x=1"
    assert t.expand(area="a", x="") == "map://a;x"
    assert t.match("map://a;x=1;y=2") == {"area": "a", "x": "1", "y": "2"}
    assert t.match("map://a;x") == {"area": "a", "x": ""}
    assert t.match("map://a") == {"area": "a"}


def test_prefix_and_explode_modifiers_are_accepted():
    t = UriTemplate("tag://{name:3}")
    assert t.variables == ["name"]
    assert t.expand(name="abcdef") == "tag://abc"
    assert UriTemplate("p://{/parts*}").variables == ["parts"]


# -- fixed URIs and invalid templates ----------------------------------------------------------
def test_fixed_uri_is_not_a_template_and_matches_exactly():
    t = UriTemplate("config://app")
    assert not t.is_template and t.variables == []
    assert t.match("config://app") == {}
    assert t.match("config://apps") is None
    assert t.match("config://ap") is None
    assert t.expand() == "config://app"


def test_regex_characters_in_literals_are_literal():
    t = UriTemplate("x://a.b+c(d)/{id}")
    assert t.match("x://a.b+c(d)/1") == {"id": "1"}
    assert t.match("x://aXb+c(d)/1") is None


@pytest.mark.parametrize(
    "template",
    [
        "x://{a-b}",
        "x://{}",
        "x://{a",
        "x://a}",
        "x://{a}/{a}",
        "x://{?q}/more",
        "x://{?q}{id}",
        "x://{__query}",
    ],
)
def test_invalid_templates_raise_value_error(template):
    with pytest.raises(ValueError):
        UriTemplate(template)


def test_expand_without_a_required_variable_raises_key_error():
    with pytest.raises(KeyError):
        UriTemplate("users://{id}").expand()
