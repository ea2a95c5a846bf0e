"""The generated reference pages (docs/gen) list everything their source defines: every
reason code with its statuses, every REST operation and schema, every CLI command and
option, every config key, every metric, every built-in with its actions and policy keys.

What must be listed is read from the code independently of the generators
(reference_support.py); each check is also run against a generator broken on purpose, and
must then name what went missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.docs.reference_support import CHECKS, REPO, load_gen

AGREED = {f"reference/{name}.md" for name in ("reasons", "rest", "cli", "config", "metrics",
                                                "builtins")}


def test_every_agreed_reference_page_is_generated_and_checked() -> None:
    assert set(load_gen().PAGES) == AGREED == set(CHECKS)


def test_no_reference_page_is_committed() -> None:
    """A committed copy would go stale, and the build would quietly show the generated page
    in its place."""
    assert [uri for uri in AGREED if (REPO / "docs" / uri).exists()] == []


@pytest.mark.parametrize("uri", sorted(AGREED))
def test_reference_page_lists_everything_its_source_defines(uri: str) -> None:
    page = load_gen().PAGES[uri]()
    assert page.startswith("<!-- Generated from the code")
    assert CHECKS[uri](page) == []


def _drop_last(fn: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
    return lambda: fn()[:-1]


def _drop_a_config_key(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    def schema() -> dict[str, Any]:
        doc = fn()
        doc["$defs"]["SettingsConfig"]["properties"].popitem()
        return doc
    return schema


def _no_meanings(fn: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
    from dataclasses import replace

    return lambda: [replace(e, meaning="") for e in fn()]


def _no_statuses(fn: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: ({}, {})


# page -> (generator module, the function it reads its source through, how to break it,
#          what the check must then report)
BROKEN: dict[str, tuple[str, str, Callable[[Any], Any], str]] = {
    "reasons: a code left out": ("reasons", "entries", _drop_last, "reference/reasons.md"),
    "reasons: meanings left out": ("reasons", "entries", _no_meanings, "reference/reasons.md"),
    "reasons: statuses left out": ("reasons", "status_tables", _no_statuses,
                                   "reference/reasons.md"),
    "rest: an operation left out": ("rest", "operations",
                                    lambda fn: lambda doc: fn(doc)[:-1], "reference/rest.md"),
    "cli: a command left out": ("cli", "commands", _drop_last, "reference/cli.md"),
    "config: a key left out": ("config", "schema", _drop_a_config_key, "reference/config.md"),
    "metrics: a family left out": ("metrics", "families", _drop_last, "reference/metrics.md"),
    "builtins: a tool left out": ("builtins", "tools", _drop_last, "reference/builtins.md"),
    "builtins: docstrings left out": ("builtins", "describe", lambda fn: lambda s, m: s,
                                      "reference/builtins.md"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_generator_that_leaves_something_out_fails_its_check(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module_name, attr, breaker, uri = BROKEN[case]
    module = getattr(load_gen(), module_name)
    monkeypatch.setattr(module, attr, breaker(getattr(module, attr)))
    assert CHECKS[uri](load_gen().PAGES[uri]()) != []
