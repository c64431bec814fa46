#!/usr/bin/env python3
"""Generate src/fabricscope/sim/nccl_tuning.json: the constant tables of NCCL's tuning model, from
NCCL's source at one release.

Read from a git clone of https://github.com/NVIDIA/nccl at a tag (nothing is copied but the numbers
as written, the names that index them and the lines they stand on):
  * src/graph/tuning.cc: the initialisers of ``nvlsEfficiency``, ``ncclTunerConstantsDefaults``
    (one table per field) and ``treeCorrectionFactor``;
  * src/include/plugin/nccl_tuner.h: the index macros naming each row (``NCCL_ALGO_*``,
    ``NCCL_PROTO_*``, ``NCCL_HW_*``, ``NCCL_*_COMPCAP_IDX``) and the typedef of
    ``ncclTunerConstants_t``, whose struct (src/include/plugin/tuner/tuner_vN.h) gives the field
    order the positional initialiser follows (2.30). The field labels tuning.cc writes as comments
    must agree with that order; releases up to 2.29 name each field (``.llMaxBws = {``) instead;
  * ``#define`` constants the model needs from other files (``DEFINES``): the NVLS channel counts
    ``ncclNvlsTuning`` starts from (src/transport/nvls.cc) and ``NCCL_MAX_NVLS_ARITY``
    (src/include/device.h), each with its file and line.

Read this way: v2.28.3-1 to v2.30.7-1. Earlier releases have no ``ncclTunerConstants_t`` and are
refused, as is anything the parser cannot read (exit 2, saying what and where).

The rest of NCCL's tuning (protocol factors, the ring plateau, the network overhead, Blackwell's
NVLSTree channel tuning) is written inline in code, not declared: sim/tuning.py keeps those.

Usage: python scripts/gen_nccl_tuning.py --repo PATH_TO_NCCL_GIT --tag v2.30.7-1 [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import json
import operator
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_nccl_variables import git

OUT = Path(__file__).resolve().parents[1] / "src" / "fabricscope" / "sim" / "nccl_tuning.json"
SCHEMA = "fabricscope.nccl_tuning/v1"
TUNING = "src/graph/tuning.cc"
TUNER_H = "src/include/plugin/nccl_tuner.h"
STRUCT = "ncclTunerConstantsDefaults"  # split into its fields
ARRAYS = ("nvlsEfficiency", "treeCorrectionFactor")
# file -> the integer #defines read from it
DEFINES = {
    "src/transport/nvls.cc": ("NVLS_NCHANNELS_SM90", "NVLS_NCHANNELS_SM100", "NVLS_NCHANNELS_SM100_NVL"),
    "src/include/device.h": ("NCCL_MAX_NVLS_ARITY",),
}
INDICES = {  # index kind: the macro that names each position
    "algorithm": re.compile(r"#define\s+NCCL_ALGO_(\w+)\s+(\d+)\b"),
    "protocol": re.compile(r"#define\s+NCCL_PROTO_(\w+)\s+(\d+)\b"),
    "hw": re.compile(r"#define\s+NCCL_HW_(\w+)\s+(\d+)\b"),
    "compcap": re.compile(r"#define\s+NCCL_(\w+)_COMPCAP_IDX\s+(\d+)\b"),
}
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_FLOAT_SUFFIX = re.compile(r"((?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)[fF]\b")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def blank_comments(text: str) -> str:
    """The text with every comment replaced by spaces, newlines kept: offsets keep their line."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def number(expr: str) -> float:
    """One initialiser element: a literal (``0.85f``, ``.9``, ``14``) or arithmetic on literals
    (``2*141.0``); anything else (a name, a call) is refused."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"not a number: {expr!r}")

    try:
        return ev(ast.parse(_FLOAT_SUFFIX.sub(r"\1", expr.strip()), mode="eval").body)
    except SyntaxError:
        raise ValueError(f"not a number: {expr!r}") from None


Span = tuple[int, int, "str | None"]  # a child's '{' and '}' offsets, its designator (``.name =``)


def braces(code: str, start: int, spans: list[Span] | None = None) -> tuple[list, int]:
    """The nested lists of the brace initialiser whose '{' is at ``start`` (comments blanked), and
    the offset after its '}'. ``spans`` collects the direct children's spans."""
    assert code[start] == "{", code[start : start + 20]
    items: list = []
    i, token = start + 1, ""
    while i < len(code):
        ch = code[i]
        if ch == "{":
            designator = re.fullmatch(r"\s*\.(\w+)\s*=\s*", token)  # NCCL 2.29 and before
            if token.strip() and not designator:
                raise ValueError(f"unexpected {token.strip()!r} before '{{' on line {line_of(code, i)}")
            open_at, token = i, ""
            child, i = braces(code, i)
            items.append(child)
            if spans is not None:
                spans.append((open_at, i - 1, designator.group(1) if designator else None))
            continue
        if ch in ",}":
            if token.strip():
                items.append(number(token))
            token = ""
            if ch == "}":
                return items, i + 1
        else:
            token += ch
        i += 1
    raise ValueError(f"unclosed initialiser at offset {start}")


def declaration(code: str, name: str) -> re.Match:
    """``[static] [const] TYPE name[DIMS] = {`` in comment-blanked code."""
    found = re.search(rf"(?:static\s+)?(?:const\s+)?(\w+)\s+{name}\s*((?:\[[^\]]*\]\s*)*)=\s*\{{", code)
    if not found:
        raise ValueError(f"{TUNING}: no initialiser of {name}")
    return found


def shape(values: list | float) -> list[int]:
    """The dimensions of a rectangular nested list; a ragged one is refused."""
    if not isinstance(values, list):
        return []
    inner = {tuple(shape(v)) for v in values}
    if len(inner) != 1:
        raise ValueError(f"ragged table: {values}")
    return [len(values), *inner.pop()]


def constants_struct(tuner_h: str) -> str:
    """The versioned struct ``ncclTunerConstants_t`` names (``ncclTunerConstants_v5_t`` in 2.30)."""
    found = re.search(r"typedef\s+(\w+)\s+ncclTunerConstants_t\s*;", tuner_h)
    if not found:
        raise ValueError(f"{TUNER_H}: no typedef of ncclTunerConstants_t")
    return found.group(1)


def struct_fields(header: str, struct: str) -> list[tuple[str, str, list[str]]]:
    """(type, name, dimensions as written) of each field of ``typedef struct {...} struct;``."""
    body = re.search(rf"typedef\s+struct\s*\{{([^{{}}]*)\}}\s*{struct}\s*;", blank_comments(header))
    if not body:
        raise ValueError(f"no definition of {struct}")
    return [
        (kind, name, re.findall(r"\[(\w+)\]", dims))
        for kind, name, dims in re.findall(r"(\w+)\s+(\w+)\s*((?:\[\w+\]\s*)+);", body.group(1))
    ]


def indices(header: str) -> dict[str, list[str]]:
    """For each index kind, the macro names in position order (0, 1, ...), lower case."""
    out = {}
    for kind, pattern in INDICES.items():
        found = {int(pos): name.lower() for name, pos in pattern.findall(header)}
        if sorted(found) != list(range(len(found))) or not found:
            raise ValueError(f"{TUNER_H}: {kind} positions are not 0..n-1: {found}")
        out[kind] = [found[i] for i in range(len(found))]
    return out


def _labels(text: str, spans: list[Span], start: int) -> list[str | None]:
    """Each field's name as the initialiser writes it: its designator, else the ``// label``
    comment standing before its '{' (after the previous field)."""
    out, prev = [], start
    for open_at, close_at, designator in spans:
        words = re.findall(r"//\s*(\w+)\s*$", text[prev:open_at], re.M)
        out.append(designator or (words[-1] if words else None))
        prev = close_at
    return out


def table(c_name: str, c_type: str, dims: list[str], values: list, lines: tuple[int, int]) -> dict:
    return {
        "c_name": c_name,
        "c_type": c_type,
        "dims": dims,
        "shape": shape(values),
        "lines": list(lines),
        "values": values,
    }


def parse_tuning(text: str, fields: list[tuple[str, str, list[str]]]) -> dict[str, dict]:
    """Every table of tuning.cc (``ARRAYS`` and each field of ``STRUCT``), keyed by its C name."""
    code = blank_comments(text)
    tables = {}
    for name in ARRAYS:
        decl = declaration(code, name)
        values, end = braces(code, decl.end() - 1)
        dims = re.findall(r"\[([^\]]*)\]", decl.group(2))
        tables[name] = table(
            name, decl.group(1), dims, values, (line_of(code, decl.start()), line_of(code, end - 1))
        )
    decl = declaration(code, STRUCT)
    spans: list[Span] = []
    values, _ = braces(code, decl.end() - 1, spans)
    if len(values) != len(fields):
        raise ValueError(f"{STRUCT} has {len(values)} initialisers for {len(fields)} fields")
    by_name = {f[1]: f for f in fields}
    for i, (label, sub, (open_at, close_at, designator)) in enumerate(
        zip(_labels(text, spans, decl.end()), values, spans)
    ):
        # A designated field goes where its name says; a positional one where the struct says.
        kind, field, dims = by_name.get(label, fields[i]) if designator else fields[i]
        if label is not None and label != field:
            raise ValueError(f"{STRUCT}: the initialiser labelled {label} stands where {field} is")
        lines = (line_of(code, open_at), line_of(code, close_at))
        tables[field] = table(f"{STRUCT}.{field}", kind, dims, sub, lines)
    return tables


def defines(text: str, path: str, names: tuple[str, ...]) -> dict[str, dict]:
    """Each ``#define NAME <integer>`` of ``names`` in ``text``: its value, file and line; a name
    missing, defined twice or not an integer is refused."""
    code = blank_comments(text)
    out = {}
    for name in names:
        found = list(re.finditer(rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]+(\S[^\n]*?)[ \t]*$", code, re.M))
        if len(found) != 1:
            raise ValueError(f"{path}: {len(found)} definitions of {name} (want one)")
        if not re.fullmatch(r"\d+", found[0].group(1)):
            raise ValueError(f"{path}: {name} is {found[0].group(1)!r}, not an integer")
        out[name] = {"value": int(found[0].group(1)), "file": path, "line": line_of(code, found[0].start())}
    return out


def generate(repo: str, tag: str) -> dict:
    commit = git(repo, "rev-list", "-n", "1", tag).strip()
    tuner_h = git(repo, "show", f"{tag}:{TUNER_H}")
    struct = constants_struct(tuner_h)
    struct_h = git(repo, "grep", "-l", f"}} {struct};", tag, "--", "src/include").split()[0]
    struct_h = struct_h.split(":", 1)[1]  # git grep names TAG:PATH
    fields = struct_fields(git(repo, "show", f"{tag}:{struct_h}"), struct)
    return {
        "generator": "scripts/gen_nccl_tuning.py",
        "schema": SCHEMA,
        "source": {
            "repo": "NVIDIA/nccl",
            "tag": tag,
            "commit": commit,
            "file": TUNING,
            "headers": [TUNER_H, struct_h],
        },
        "indices": indices(tuner_h),
        "tables": parse_tuning(git(repo, "show", f"{tag}:{TUNING}"), fields),
        "defines": {
            name: d
            for path, names in DEFINES.items()
            for name, d in defines(git(repo, "show", f"{tag}:{path}"), path, names).items()
        },
    }


def dump(data: dict) -> str:
    """Indented JSON with each innermost list (a row of numbers, a list of names) on one line, so a release reads as a diff."""
    text = json.dumps(data, indent=1)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="a git clone (bare is fine) of NVIDIA/nccl")
    parser.add_argument("--tag", default="v2.30.7-1")
    parser.add_argument("--out", default=str(OUT))
    ns = parser.parse_args()
    try:
        data = generate(ns.repo, ns.tag)
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError) as exc:
        print(f"gen_nccl_tuning: {exc}", file=sys.stderr)
        return 2
    Path(ns.out).write_text(dump(data))
    counts = f"{len(data['tables'])} tables, {len(data['defines'])} defines"
    print(f"{ns.out}: {counts} from NCCL {ns.tag} ({data['source']['commit'][:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
