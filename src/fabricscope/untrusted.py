"""Documents that users and peers hand us: YAML without aliases, and a cap on nesting.

A YAML alias (``*name``) repeats the node its anchor (``&name``) marks: nine levels of nine
aliases each fit in 800 bytes and make 9^9 values for whoever walks or validates the result (the
"billion laughs"; `doctor --expect`, the documented NHC check, ran out of memory on one). Nothing
fabricscope reads (manifests, topology files) needs one, so the loader here refuses the first
anchor or alias, naming its line. Deep nesting (``[[[[...``) ends recursive code (PyYAML's
composer, json's decoder, any walk of the result) with RecursionError; both loaders cap it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import yaml

MAX_DEPTH = 64  # a doctor document of the fixture hosts nests 7 levels, a manifest 3


_JSON_SPECIAL = re.compile(rb'[\[\]{}"\\]')


class DocumentError(ValueError):
    """A document nests deeper than :data:`MAX_DEPTH`."""


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing anchors and aliases and nesting past MAX_DEPTH."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML leaves it untyped
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            what = (
                f"alias *{event.anchor}" if isinstance(event, yaml.AliasEvent) else f"anchor &{event.anchor}"
            )
            raise yaml.composer.ComposerError(
                None, None, f"{what}: YAML anchors and aliases are not accepted", event.start_mark
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def yaml_compose(text: str) -> yaml.Node | None:
    """The node tree of one YAML document (with line marks); raises yaml.YAMLError."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def yaml_load(text: str) -> Any:
    """``yaml.safe_load`` without anchors, aliases or deep nesting; raises yaml.YAMLError."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_construct(node: yaml.Node | None) -> Any:
    """The Python value of a tree from :func:`yaml_compose` (so a caller parses once)."""
    if node is None:
        return None
    loader = _NoAliasLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def json_load(data: str | bytes) -> Any:
    """``json.loads`` that says "nested too deeply" instead of raising RecursionError, and caps
    nesting at MAX_DEPTH; raises json.JSONDecodeError, UnicodeDecodeError or DocumentError."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if json_nesting_depth(raw) > MAX_DEPTH:  # before decoding: the same answer on every Python
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(data)
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    check_depth(value)
    return value


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise DocumentError if lists and dicts in ``value`` nest deeper than ``limit`` (walked
    without recursion, so any depth is measured safely)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise DocumentError(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def json_nesting_depth(body: bytes, max_depth: int = MAX_DEPTH) -> int:
    """Deepest ``[``/``{`` nesting outside JSON strings, in one linear pass.

    Checked before decoding: a 60 KB ``[[[[...`` would otherwise make ``json.loads`` recurse
    thousands of levels deep (how deep it may go before failing differs between Python versions).
    A document with at most ``max_depth`` brackets skips the scan.
    """
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return 0
    depth = deepest = 0
    in_string = False
    escaped_at = -1
    for match in _JSON_SPECIAL.finditer(body):
        pos, char = match.start(), match.group()
        if in_string:
            if pos == escaped_at:
                continue
            if char == b"\\":
                escaped_at = pos + 1
            elif char == b'"':
                in_string = False
        elif char == b'"':
            in_string = True
        elif char in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest
