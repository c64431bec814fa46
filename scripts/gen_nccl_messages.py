#!/usr/bin/env python3
"""Generate src/fabricscope/nccl/data/messages.json: every WARN and INFO message NCCL (and the parts
users run with it) can print, with where it is printed and what the code does next.

Read from git clones (bare is fine) at release tags; nothing is copied but the format strings,
the names of the printf arguments, the file:line and the statement that decides what comes next:

* NVIDIA/nccl, every tag from v2.18 to v2.30 (``WARN(fmt, ...)``, ``INFO(FLAGS, fmt, ...)``,
  ``INFO_LOC``; TRACE is left out: it is compiled out of release builds);
* aws/aws-ofi-nccl (``NCCL_OFI_WARN``/``NCCL_OFI_INFO``, printed with the "NET/OFI " prefix);
* Mellanox/nccl-rdma-sharp-plugins (NCCL's own WARN/INFO);
* ofiwg/libfabric's efa provider (``EFA_WARN``/``EFA_INFO``/``FI_WARN(&efa_prov, ...)``);
* pytorch/pytorch's ProcessGroupNCCL, NCCLUtils and torch/distributed/distributed_c10d.py
  (``--pytorch DIR``: a partial checkout, ``DIR/<tag-or-commit>/torch/...``, one directory per
  commit, since the repository is too large to clone here; ``DIR/ORDER`` lists the commits oldest
  first, ``DIR/<commit>/PARTIAL`` names files copied only in part; ``--pytorch-keep FILE`` keeps
  the commits of an earlier catalogue that DIR lacks, as they were read). The C++ messages are string
  concatenations (``LOG(...) <<``, ``TORCH_CHECK``, ``c10::str``), so the literal pieces are kept
  with ``%s`` for every expression between them; the Python ones are ``raise X(...)``,
  ``warnings.warn`` and ``logger.<level>`` calls. Each entry records the ``commit`` it was read at.

What the code does next (``next``) is a heuristic over the statements that follow the call, up to
the end of its block (at most ``WINDOW`` statements), first match wins:

1. ``falls_back``: the message itself, or the next INFO/WARN in the window, says NCCL goes another
   way ("instead", "fall back", "falling back", "disabling", "using internal", "will not use" ...);
2. ``aborts``: ``abort()`` / ``exit(``;
3. ``returns_error``: ``return ncclXxxError`` (the code is kept), ``return res``-like variables,
   ``ret = ncclXxx; goto``, ``goto fail|exit|out|error|cleanup``, ``throw``, ``return -1|false|NULL``,
   ``TORCH_CHECK_WITH(DistBackendError``, a call inside an ``NCCLCHECK``-style macro body;
4. ``goes_on``: ``return ncclSuccess``, ``continue``, ``break``, or nothing of the above.

It reads code, not runtime: a ``returns_error`` message's error may still be caught by a caller that
falls back (the reader judges a chain by the last ``file:line -> code`` it sees, see docs/nccl.md).

Usage: python scripts/gen_nccl_messages.py --nccl PATH [--ofi PATH] [--sharp PATH]
       [--libfabric PATH] [--pytorch DIR [--pytorch-keep FILE]] [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_nccl_variables import git, macro_args  # the same call-argument splitter

OUT = Path(__file__).resolve().parents[1] / "src" / "fabricscope" / "nccl" / "data" / "messages.json"
SCHEMA = "fabricscope.nccl_messages/v1"
SOURCE_SUFFIXES = (".cc", ".c", ".cpp", ".cu", ".h", ".hpp", ".cuh")
WINDOW = 6  # statements read after a call to decide what the code does next
NCCL_TAGS = re.compile(r"v2\.(1[89]|2\d|30)\.\d+-1\Z")
OFI_TAGS = ("v1.7.4-aws", "v1.9.2-aws", "v1.13.2-aws", "v1.16.3", "v1.21.1")
SHARP_TAGS = ("v2.1.0",)
LIBFABRIC_TAGS = ("v1.22.0", "v2.6.0")


@dataclass(frozen=True)
class Macro:
    level: str  # "warn" | "info"
    fmt_arg: int  # index of the format argument
    flags_arg: int | None  # index of the subsystem flags argument


@dataclass(frozen=True)
class Project:
    name: str
    repo: str  # owner/name on GitHub
    scanned: tuple[str, ...]  # path prefixes
    macros: dict[str, Macro]
    prefix: str = ""  # what the logging macro puts before the format


NCCL_MACROS = {"WARN": Macro("warn", 0, None), "INFO": Macro("info", 1, 0), "INFO_LOC": Macro("info", 1, 0)}
PROJECTS = {
    "nccl": Project(
        "nccl", "NVIDIA/nccl", ("src/", "plugins/", "ext-net/", "ext-tuner/", "ext-profiler/"), NCCL_MACROS
    ),
    "ofi": Project(
        "aws-ofi-nccl",
        "aws/aws-ofi-nccl",
        ("src/", "include/"),
        {
            "NCCL_OFI_WARN": Macro("warn", 0, None),
            "NCCL_OFI_INFO": Macro("info", 1, 0),
            "NCCL_OFI_WARN_ONCE": Macro("warn", 0, None),
        },
        prefix="NET/OFI ",
    ),
    "sharp": Project(
        "nccl-rdma-sharp-plugins", "Mellanox/nccl-rdma-sharp-plugins", ("src/", "include/"), NCCL_MACROS
    ),
    "efa": Project(
        "libfabric-efa",
        "ofiwg/libfabric",
        ("prov/efa/src/",),
        {
            "EFA_WARN": Macro("warn", 1, 0),
            "EFA_INFO": Macro("info", 1, 0),
            "EFA_WARN_ONCE": Macro("warn", 1, 0),
            "FI_WARN": Macro("warn", 2, 1),
            "FI_INFO": Macro("info", 2, 1),
        },
    ),
}
_PRI = re.compile(r"PRI([diouxX])(8|16|32|64|PTR|MAX)\Z")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FALLBACK = re.compile(
    r"\b(?:using|use|assuming)\b[^.;]*\binstead\b|fall(?:ing)?[ _-]?back|\bdisabling\b|\busing internal\b|"
    r"\bwill not use\b|\bnot using\b|\bignoring\b|\bskipping\b|\bretrying\b|\bdefault(?:ing)? to\b|\breverting\b",
    re.I,
)
_ERROR_CODE = re.compile(r"\breturn\s+(nccl(?:\w*Error|InvalidArgument|InvalidUsage|InProgress))\b")
_ASSIGNED_CODE = re.compile(r"\b\w+\s*=\s*(nccl(?:\w*Error|InvalidArgument|InvalidUsage))\s*;")
_RETURN_FAIL = re.compile(
    r"\breturn\s+(?:-\s*\w+|false|NULL|nullptr|ret|res|rc|result|status|err|error|retval|ncclRes|\w*[Ee]rr\w*)\s*;"
)
_GOTO = re.compile(r"\bgoto\s+(\w+)\s*;")
_THROW = re.compile(r"\bthrow\b|TORCH_CHECK(?:_WITH)?\s*\(\s*(?:DistBackendError|false)|C10_THROW_ERROR\s*\(")
_SUCCESS = re.compile(r"\breturn\s+(?:ncclSuccess|0|true)\s*;|\breturn\s*;|\bcontinue\s*;|\bbreak\s*;")
_ABORT = re.compile(r"\babort\s*\(|\bexit\s*\(")


def strip_comments(text: str) -> str:
    """The source with comments blanked (newlines kept, so line numbers stay), strings untouched."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def format_of(arg: str) -> str | None:
    """The printf format a C expression spells: adjacent literals joined, ``PRIu64`` as ``lu``,
    any other identifier between literals (a macro, ``name``) as ``%s``. None when no literal."""
    pieces, pos, found = [], 0, False
    for m in _STRING.finditer(arg):
        between = arg[pos : m.start()].strip()
        if between and found:
            pri = _PRI.fullmatch(between)
            pieces.append(("l" + pri.group(1)) if pri else "%s")
        pieces.append(
            bytes(m.group(1), "utf-8").decode("unicode_escape", "replace")
            if "\\" in m.group(1)
            else m.group(1)
        )
        found = True
        pos = m.end()
    if not found:
        return None
    return "".join(pieces).rstrip("\n")


def flags_of(arg: str) -> list[str]:
    """``NCCL_INIT|NCCL_NET`` -> ["INIT", "NET"]; libfabric's ``FI_LOG_EP_CTRL`` -> ["EP_CTRL"]."""
    return sorted({m.group(2) for m in re.finditer(r"\b(NCCL_|FI_LOG_)([A-Z_]+)\b", arg)})


def _statements_after(code: str, start: int) -> str:
    """The code after ``start`` up to the end of its block or ``WINDOW`` statements."""
    depth, count, i, n = 0, 0, start, min(len(code), start + 1500)
    while i < n:
        ch = code[i]
        if ch in "\"'":
            j = code.find(ch, i + 1)
            i = n if j < 0 else j + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return code[start:i]
        elif ch == ";" and depth == 0:
            count += 1
            if count >= WINDOW:
                return code[start : i + 1]
        i += 1
    return code[start:n]


def next_action(fmt: str, after: str, in_macro: str | None) -> tuple[str, str]:
    """(what the code does next, the statement that says so): see the module docstring."""
    if _FALLBACK.search(fmt):
        return "falls_back", "the message"
    following = re.search(r"\b(?:WARN|INFO|NCCL_OFI_WARN|NCCL_OFI_INFO|EFA_WARN|EFA_INFO)\s*\([^;]*", after)
    if following and _FALLBACK.search(following.group(0)):
        return "falls_back", " ".join(following.group(0).split())[:80]
    tests = (
        (_ABORT, "aborts"),
        (_ERROR_CODE, "returns_error"),
        (_THROW, "returns_error"),
        (_SUCCESS, "goes_on"),
        (_RETURN_FAIL, "returns_error"),
        (_GOTO, "returns_error"),
    )
    best: tuple[int, str, str] | None = None
    for pattern, action in tests:
        m = pattern.search(after)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), action, m.group(0))
    if best is not None:
        _, action, said = best
        if action == "returns_error" and said.startswith("goto"):
            code = _ASSIGNED_CODE.search(after[: best[0]])
            said = f"{code.group(1)}; {said}" if code else said
        return action, " ".join(said.split())
    if in_macro and re.search(r"CHECK|GOTO", in_macro):
        return "returns_error", f"#define {in_macro}"
    return "goes_on", ""


def _call_end(code: str, start: int) -> int:
    """The index after the ')' that closes the '(' at ``start``."""
    depth, i, n = 0, start, min(len(code), start + 4000)
    while i < n:
        ch = code[i]
        if ch in "\"'":
            j = i + 1
            while j < n and code[j] != ch:
                j += 2 if code[j] == "\\" else 1
            i = j + 1
            continue
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return i + 1
        i += 1
    return n


def _macro_name(code: str, pos: int) -> str | None:
    """The macro whose #define body holds ``pos`` (a line-continued body), else None."""
    line_start = code.rfind("\n", 0, pos) + 1
    while True:
        line = code[line_start : code.find("\n", line_start)]
        m = re.match(r"\s*#\s*define\s+(\w+)", line)
        if m:
            return m.group(1)
        if line_start == 0 or not code[: line_start - 1].rstrip(" \t").endswith("\\"):
            return None
        line_start = code.rfind("\n", 0, line_start - 1) + 1


def scan_c(project: Project, path: str, text: str) -> list[dict]:
    """Every message call in one C/C++ file."""
    code = strip_comments(text)
    names = "|".join(sorted(project.macros, key=len, reverse=True))
    found = []
    for m in re.finditer(rf"(?<![\w.>])({names})\s*\(", code):
        macro_name = _macro_name(code, m.start())
        if macro_name in project.macros:
            continue  # the logging macro's own definition
        args = macro_args(code, m.end() - 1)
        spec = project.macros[m.group(1)]
        if not args or len(args) <= spec.fmt_arg:
            continue
        if m.group(1) in ("FI_WARN", "FI_INFO") and "efa" not in args[0]:
            continue
        fmt = format_of(args[spec.fmt_arg])
        if fmt is None:
            continue
        after = _statements_after(code, code.find(";", _call_end(code, m.end() - 1)) + 1)
        action, why = next_action(fmt, after, macro_name)
        found.append(
            {
                "level": spec.level,
                "format": project.prefix + fmt,
                "subsystems": flags_of(args[spec.flags_arg]) if spec.flags_arg is not None else [],
                "args": [" ".join(a.split())[:60] for a in args[spec.fmt_arg + 1 :]],
                "file": path,
                "line": code.count("\n", 0, m.start()) + 1,
                "next": action,
                "why": why,
                **({"macro": macro_name} if macro_name else {}),
            }
        )
    return found


# ----- PyTorch: messages built by concatenation ---------------------------------------------
_TORCH_RAISES = re.compile(
    r"TORCH_CHECK|C10_THROW_ERROR|TORCH_INTERNAL_ASSERT|\bthrow\b|rethrow_exception|make_exception_ptr|"
    r"setException"
)
_TORCH_SEPARATORS = re.compile(r"<<|\+|,|c10::str\(|std::string\(|\(|\)|\s")
_SENTENCE = re.compile(r"[A-Za-z][A-Za-z ]+")
_LOOKUPS = re.compile(
    r'\.(?:find|compare|starts_with|ends_with)\(\s*"(?:[^"\\]|\\.)*"'
)  # a text searched for


def _is_message(text: str) -> bool:
    """A run of 12+ letters with a space in it: a sentence, not a key or an identifier."""
    return any(len(w) >= 12 and " " in w.strip() for w in _SENTENCE.findall(text))


def torch_format(stmt: str) -> tuple[str, list[str]] | None:
    """Literal pieces of a C++ message statement (``<<``, ``+``, ``c10::str(...)`` arguments),
    with ``%s`` for every expression between two of them, and those expressions; None when no
    literal reads as a sentence (a key, a separator: not a message)."""
    pieces: list[str] = []
    args: list[str] = []
    pos = 0
    for m in _STRING.finditer(stmt):
        raw_between = stmt[pos : m.start()]
        between = _TORCH_SEPARATORS.sub("", raw_between)
        if pieces and between:
            pieces.append("%s")
            args.append(" ".join(raw_between.replace("<<", " ").split()).strip(" +,")[:60])
        pieces.append(m.group(1).replace("\\n", "\n").replace('\\"', '"'))
        pos = m.end()
    text = re.sub(r"(?:%s){2,}", "%s", "".join(pieces)).strip("\n")
    return (text, args) if _is_message(text) else None


def _torch_level(stmt: str) -> str:
    return "info" if re.search(r"LOG\s*\(\s*INFO|VLOG\s*\(", stmt) else "warn"


def scan_torch(path: str, text: str) -> list[dict]:
    """Every statement of a PyTorch C++ source that builds a message (``LOG(...) <<``,
    ``TORCH_CHECK``, ``TORCH_WARN``, ``C10_THROW_ERROR``, ``c10::str(...)``, a string assigned to
    a message variable): its literal pieces, file:line of the first, and whether the statement or
    the ones after it raise (``returns_error``) or not (``goes_on``; ``TORCH_WARN`` and
    ``LOG(INFO|WARNING)`` without a raise)."""
    code = strip_comments(text).replace("\\\n", " \n")  # a #define body reads as one statement
    found, start = [], 0
    for end in (m.start() for m in re.finditer(r"[;{}]", code)):  # a block opens a new statement
        stmt = _LOOKUPS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code[start:end])
        first = _STRING.search(stmt)
        parsed = torch_format(stmt) if first and not stmt.lstrip().startswith("#include") else None
        if parsed is not None and first is not None:
            fmt, args = parsed
            after = _statements_after(code, end + 1)
            raises = _TORCH_RAISES.search(stmt)
            if raises is None and not re.search(r"TORCH_WARN|LOG\s*\(\s*(?:INFO|WARNING)", stmt):
                raises = _TORCH_RAISES.search(after[:400])
            found.append(
                {
                    "level": _torch_level(stmt),
                    "format": fmt,
                    "subsystems": ["DistBackendError"] if "DistBackendError" in stmt + after[:200] else [],
                    "args": args,
                    "file": path,
                    "line": code.count("\n", 0, start + first.start()) + 1,
                    "next": "returns_error" if raises else "goes_on",
                    "why": " ".join(raises.group(0).split()) if raises else "",
                }
            )
        start = end + 1
    return found


def _py_format(node: ast.expr) -> tuple[str, list[str]] | None:
    """The printf-like format of a Python message expression: a literal, an f-string (each
    replacement field as ``%s``) or their ``+`` concatenation; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, []
    if isinstance(node, ast.JoinedStr):
        parts, args = [], []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value).replace("%", "%%"))
            elif isinstance(value, ast.FormattedValue):
                parts.append("%s")
                args.append(ast.unparse(value.value)[:60])
        return "".join(parts), args
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _py_format(node.left), _py_format(node.right)
        if left is None and right is None:
            return None
        lf, la = left or ("%s", [ast.unparse(node.left)[:60]])
        rf, ra = right or ("%s", [ast.unparse(node.right)[:60]])
        return lf + rf, la + ra
    return None


_PY_LOG = {
    "debug": "info",
    "info": "info",
    "warning": "warn",
    "warn": "warn",
    "error": "warn",
    "exception": "warn",
}


def scan_python(path: str, text: str) -> list[dict]:
    """Every message of a Python source users paste: ``raise X("...")`` (returns_error: the
    exception reaches the caller), ``warnings.warn(...)`` and ``logger.<level>(...)`` (goes_on)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        call, level, action, why = None, "warn", "goes_on", ""
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            call, action = node.exc, "returns_error"
            why = f"raise {ast.unparse(node.exc.func)}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = ast.unparse(node.func.value)
            if owner == "warnings" and node.func.attr == "warn":
                call = node
            elif owner in ("logger", "logging", "_logger", "log") and node.func.attr in _PY_LOG:
                call, level = node, _PY_LOG[node.func.attr]
        if call is None:
            continue
        parsed = _py_format(call.args[0])
        if parsed is None or not _is_message(parsed[0]):
            continue
        fmt, args = parsed
        found.append(
            {
                "level": level,
                "format": fmt.strip("\n"),
                "subsystems": [],
                "args": args or [ast.unparse(a)[:60] for a in call.args[1:]],
                "file": path,
                "line": call.args[0].lineno,
                "next": action,
                "why": why,
            }
        )
    return found


def read_partial(root: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The commits of a partial PyTorch checkout (``root/<tag-or-commit>/torch/...``) oldest first
    (``root/ORDER`` lists them; otherwise by name), and per commit the files copied only in part
    (``<commit>/PARTIAL``: ``path<TAB>what part``)."""
    order_file = root / "ORDER"
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    if order_file.exists():
        listed = [
            w.split()[0] for w in order_file.read_text().splitlines() if w.strip() and not w.startswith("#")
        ]
        names = [n for n in listed if n in names] + [n for n in names if n not in listed]
    partial: dict[str, dict[str, str]] = {}
    for name in names:
        manifest = root / name / "PARTIAL"
        if manifest.exists():
            rows = (line.split("\t", 1) for line in manifest.read_text().splitlines() if "\t" in line)
            partial[name] = {path: part for path, part in rows}
    return names, partial


def keep_pytorch(path: Path, read: list[str], catalogue: dict[str, dict]) -> dict:
    """The PyTorch part of an earlier catalogue for the commits the partial checkout has no
    directory for: their entries go into ``catalogue`` as they were (a commit read later updates
    an entry it prints too), and their sources are returned, so one more commit can be read
    without copying again the files read before."""
    data = json.loads(path.read_text(encoding="utf-8"))
    before = data["sources"].get("pytorch", {})
    kept = [c for c in before.get("tags", []) if c not in read]
    for entry in data["messages"]:
        if entry["project"] == "pytorch" and entry.get("commit") in kept:
            catalogue[entry["id"]] = dict(entry)
    return {
        "tags": kept,
        "files": {c: before["files"][c] for c in kept if c in before.get("files", {})},
        "partial": {c: before["partial"][c] for c in kept if c in before.get("partial", {})},
    }


def scan_pytorch(root: Path, catalogue: dict[str, dict], sources: dict, keep: Path | None = None) -> None:
    """Every message of the PyTorch files in a partial checkout, each entry with its commit;
    with ``keep``, the commits of that earlier catalogue the checkout lacks come first, as read."""
    commits, partial = read_partial(root)
    kept = keep_pytorch(keep, commits, catalogue) if keep else {"tags": [], "files": {}, "partial": {}}
    partial = {**kept["partial"], **partial}
    files: dict[str, list[str]] = dict(kept["files"])
    commits = kept["tags"] + commits
    for commit in commits[len(kept["tags"]) :]:
        base = root / commit
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(base).as_posix()
            if path.suffix in (".cpp", ".hpp", ".h", ".cu"):
                entries = scan_torch(rel, path.read_text())
            elif path.suffix == ".py":
                entries = scan_python(rel, path.read_text())
            else:
                continue
            files.setdefault(commit, []).append(rel)
            for entry in entries:
                _add(catalogue, "pytorch", commit, {**entry, "commit": commit})
    sources["pytorch"] = {
        "repo": "pytorch/pytorch",
        "tags": commits,
        "commits": {c: c for c in commits},
        "files": files,
        "partial": partial,
    }


# ----- the catalogue ------------------------------------------------------------------------
def message_id(project: str, level: str, fmt: str) -> str:
    """A stable id: the same format in the same project keeps its id across releases."""
    return f"{project}-{hashlib.sha1(f'{level}|{fmt}'.encode()).hexdigest()[:10]}"


def scan_repo(key: str, repo: str, tags: list[str], catalogue: dict[str, dict], sources: dict) -> None:
    project = PROJECTS[key]
    commits = {}
    for tag in tags:
        commits[tag] = git(repo, "rev-list", "-n", "1", tag).strip()
        files = [
            f
            for f in git(repo, "ls-tree", "-r", "--name-only", tag).splitlines()
            if f.startswith(project.scanned) and f.endswith(SOURCE_SUFFIXES)
        ]
        for path, text in _read_many(repo, tag, files):
            for entry in scan_c(project, path, text):
                _add(catalogue, project.name, tag, entry)
    sources[project.name] = {"repo": project.repo, "tags": tags, "commits": commits}


def _read_many(repo: str, tag: str, files: list[str]):
    """(path, text) of every file at ``tag``, through one ``git cat-file --batch``."""
    proc = subprocess.run(
        ["git", "-C", repo, "cat-file", "--batch"],
        input="".join(f"{tag}:{f}\n" for f in files).encode(),
        capture_output=True,
        check=True,
        timeout=600,
    )
    out, pos = proc.stdout, 0
    for path in files:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        yield path, out[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace")
        pos = header_end + 1 + size + 1


def _add(catalogue: dict[str, dict], project: str, release: str, entry: dict) -> None:
    mid = message_id(project, entry["level"], entry["format"])
    known = catalogue.get(mid)
    if known is None:
        catalogue[mid] = {"id": mid, "project": project, **entry, "since": release, "until": release}
        return
    keys = ("file", "line", "args", "next", "why", "subsystems", "commit")
    known.update({k: entry[k] for k in keys if k in entry}, until=release)


def generate(ns: argparse.Namespace) -> dict:
    catalogue: dict[str, dict] = {}
    sources: dict[str, dict] = {}
    tags = sorted(
        (t for t in git(ns.nccl, "tag").split() if NCCL_TAGS.match(t)),
        key=lambda t: tuple(int(x) for x in re.findall(r"\d+", t)),
    )
    scan_repo("nccl", ns.nccl, tags, catalogue, sources)
    for key, repo, wanted in (
        ("ofi", ns.ofi, OFI_TAGS),
        ("sharp", ns.sharp, SHARP_TAGS),
        ("efa", ns.libfabric, LIBFABRIC_TAGS),
    ):
        if repo:
            scan_repo(key, repo, list(wanted), catalogue, sources)
    if ns.pytorch:
        scan_pytorch(Path(ns.pytorch), catalogue, sources, Path(ns.pytorch_keep) if ns.pytorch_keep else None)
    for entry in catalogue.values():
        if entry["project"] == "nccl" and entry["until"] == tags[-1]:
            entry["until"] = None  # still printed by the newest release read
        elif entry["project"] == "pytorch":
            entry["until"] = None  # one commit read per file: "since" names it, no release range
        elif entry["project"] != "nccl":
            entry["until"] = (
                None if entry["until"] == sources[entry["project"]]["tags"][-1] else entry["until"]
            )
    messages = sorted(catalogue.values(), key=lambda e: (e["project"], e["file"], e["line"], e["id"]))
    return {
        "schema": SCHEMA,
        "generator": "scripts/gen_nccl_messages.py",
        "sources": sources,
        "messages": messages,
    }


def dump(data: dict) -> str:
    """Compact JSON with one message per line, so a new release reads as a diff of messages."""
    head = {k: v for k, v in data.items() if k != "messages"}
    lines = [
        json.dumps(m, separators=(",", ":"), ensure_ascii=False, sort_keys=True) for m in data["messages"]
    ]
    return (
        json.dumps(head, separators=(",", ":"), sort_keys=True)[:-1]
        + ',"messages":[\n'
        + ",\n".join(lines)
        + "\n]}\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nccl", required=True, help="a git clone (bare is fine) of NVIDIA/nccl")
    parser.add_argument("--ofi", help="a git clone of aws/aws-ofi-nccl")
    parser.add_argument("--sharp", help="a git clone of Mellanox/nccl-rdma-sharp-plugins")
    parser.add_argument("--libfabric", help="a git clone of ofiwg/libfabric")
    parser.add_argument(
        "--pytorch",
        help="a partial checkout of pytorch/pytorch: DIR/<tag-or-commit>/torch/... (ORDER, PARTIAL: see read_partial)",
    )
    parser.add_argument(
        "--pytorch-keep",
        metavar="FILE",
        help="an earlier messages.json: its PyTorch commits that DIR has no directory for are kept as read",
    )
    parser.add_argument("--out", default=str(OUT))
    ns = parser.parse_args()
    try:
        data = generate(ns)
    except (subprocess.CalledProcessError, FileNotFoundError, OSError) as exc:
        print(f"gen_nccl_messages: {exc}", file=sys.stderr)
        return 2
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(dump(data))
    counts: dict[str, int] = {}
    for e in data["messages"]:
        counts[e["project"]] = counts.get(e["project"], 0) + 1
    print(
        f"{ns.out}: {len(data['messages'])} messages ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
