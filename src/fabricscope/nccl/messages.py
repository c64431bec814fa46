"""NCCL's own words: the catalogue of every WARN and INFO message NCCL (2.18-2.30), PyTorch's
ProcessGroupNCCL, aws-ofi-nccl, libfabric's efa provider and nccl-rdma-sharp-plugins print, with
where each is printed and what the code does next; and the matcher that finds a log line's entry.

The catalogue is data (``data/messages.json``), generated from the projects' sources by
scripts/gen_nccl_messages.py (its docstring gives the method). Each entry: ``id`` (stable while the
format is), ``project``, ``level`` (warn/info), ``format`` (printf), ``subsystems`` (INFO flags),
``args`` (the printf arguments as written), ``file``/``line`` (at the newest release that prints
it), ``next`` (``returns_error``, ``falls_back``, ``goes_on``, ``aborts``), ``why`` (the statement
that decided ``next``), ``since``/``until`` (releases; ``until`` null: still printed; for PyTorch
``since`` and ``commit`` name the commit read).

Matching is by the format's first literal word, then its regular expression anchored at the start
of the text, so it costs one dict lookup for text no entry starts with; entries that start with a
conversion (``%s:%d -> %d``) are tried only where their longest literal piece occurs.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any, NamedTuple

NEXT_ACTIONS = ("returns_error", "falls_back", "goes_on", "aborts")
_CONVERSION = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|L|z|j|t)?([diouxXeEfgGcspn%])")
_FIRST_WORD = re.compile(r"[^\s%]+")
_WORD = re.compile(
    r"[A-Za-z_]{4,}"
)  # the words a line is indexed by for entries that start with a conversion


class Message(NamedTuple):
    """One catalogue entry (a named tuple: 3,826 of them are built when the catalogue loads)."""

    id: str
    project: str
    level: str
    format: str
    subsystems: tuple[str, ...]
    args: tuple[str, ...]
    file: str
    line: int
    next: str
    why: str
    since: str
    until: str | None

    @property
    def where(self) -> str:
        return f"{self.project} {self.file}:{self.line}"


def _pattern(conv: str) -> str:
    if conv in "diu":
        return r"-?\d+"
    if conv in "oxXp":
        return r"(?:0x)?[0-9a-fA-F]+|\(nil\)"
    if conv in "eEfgG":
        return r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
    if conv == "c":
        return r"."
    return r".*?"  # %s and anything else


def format_regex(fmt: str) -> re.Pattern[str]:
    """The printf format as a regular expression matching what it prints (``%s`` lazily); leading
    blanks are optional (PyTorch's ``" failure detected ..."`` follows a prefix the reader peels)."""
    out, pos = [r"\s*" if fmt[:1].isspace() else ""], 0
    fmt = fmt.lstrip()
    for m in _CONVERSION.finditer(fmt):
        out.append(re.escape(fmt[pos : m.start()]))
        out.append("%" if m.group(5) == "%" else f"(?:{_pattern(m.group(5))})")
        pos = m.end()
    out.append(re.escape(fmt[pos:].rstrip()))
    return re.compile("".join(out), re.S)


def literal_size(fmt: str) -> int:
    """Characters of the format that are not conversions: how specific a match on it is."""
    return len(_CONVERSION.sub("", fmt).strip())


class Catalogue:
    """The messages, indexed for matching."""

    def __init__(self, data: dict[Any, Any]) -> None:
        self.schema: str = data["schema"]
        self.sources: dict[Any, Any] = data["sources"]
        self.messages: dict[str, Message] = {}
        self._by_word: dict[str, list[Message]] = {}
        self._wild: dict[str, list[tuple[str, Message]]] = {}  # a word of the anchor -> (anchor, entry)
        self._regex: dict[str, re.Pattern[str]] = {}
        self._anchors: dict[str, str] = {}
        size: dict[str, int] = {}
        for raw in data["messages"]:
            msg = Message(
                raw["id"],
                raw["project"],
                raw["level"],
                raw["format"],
                tuple(raw["subsystems"]),
                tuple(raw["args"]),
                raw["file"],
                raw["line"],
                raw["next"],
                raw["why"],
                raw["since"],
                raw["until"],
            )
            self.messages[msg.id] = msg
            size[msg.id] = literal_size(msg.format)
            if size[msg.id] < 6:
                continue  # "%s", "%s: %s": matches anything, says nothing
            word = _FIRST_WORD.match(msg.format)
            if word is not None and word.start() == 0:
                self._by_word.setdefault(word.group(0), []).append(msg)
            else:
                pieces = [p for p in _CONVERSION.split(msg.format)[::6] if p]
                anchor = max(pieces, key=len, default="").strip()
                words = _WORD.findall(anchor)
                if len(anchor) >= 5 and words:
                    self._wild.setdefault(max(words, key=len), []).append((anchor, msg))
        for group in self._by_word.values():
            group.sort(key=lambda m: -size[m.id])
        self._size = size

    def anchor(self, msg: Message) -> str:
        """The format's longest literal piece: text without it cannot match (checked before compiling)."""
        anchor = self._anchors.get(msg.id)
        if anchor is None:
            anchor = self._anchors[msg.id] = max(_CONVERSION.split(msg.format)[::6], key=len).strip()
        return anchor

    def regex(self, msg: Message) -> re.Pattern[str]:
        pattern = self._regex.get(msg.id)
        if pattern is None:
            pattern = self._regex[msg.id] = format_regex(msg.format)
        return pattern

    def match(self, text: str, projects: tuple[str, ...] | None = None) -> Message | None:
        """The most specific entry whose format prints ``text`` (from its start), or None."""
        word = _FIRST_WORD.match(text)
        if word is not None:
            for msg in self._by_word.get(word.group(0), ()):
                if (
                    (projects is None or msg.project in projects)
                    and self.anchor(msg) in text
                    and self.regex(msg).match(text)
                ):
                    return msg
        wild = self._wild
        candidates = [am for w in set(_WORD.findall(text)) if w in wild for am in wild[w]]
        for anchor, msg in sorted(candidates, key=lambda am: -self._size[am[1].id]):
            if (
                anchor in text
                and (projects is None or msg.project in projects)
                and self.regex(msg).search(text)
            ):
                return msg
        return None

    def find(self, project: str, text: str) -> list[Message]:
        """Entries of ``project`` whose format contains ``text`` (for rules naming their messages)."""
        return [m for m in self.messages.values() if m.project == project and text in m.format]


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    """The catalogue shipped with the package (read once)."""
    text = resources.files("fabricscope.nccl").joinpath("data/messages.json").read_text(encoding="utf-8")
    return Catalogue(json.loads(text))
