"""Where a job's NCCL settings come from: env files, job scripts, the process environment and
NCCL's configuration files, merged with NCCL's own precedence.

NCCL reads the process environment first; then the user file (``NCCL_CONF_FILE`` since 2.23,
``~/.nccl.conf`` before) and ``/etc/nccl.conf`` fill in only what is not already set (``setenv`` with
overwrite 0 in NCCL's ``initEnv``). Pure functions of text; the CLI reads the files.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Names read from job sources: NCCL's, and libfabric's and aws-ofi-nccl's (EFA jobs carry both).
PREFIXES = ("NCCL_", "FI_", "OFI_NCCL_")
_NAME = r"(?:NCCL|FI|OFI_NCCL)_[A-Za-z0-9_]*"
ORIGIN_RANK = {"environ": 0, "env-file": 0, "script": 0, "NCCL_CONF_FILE": 1, "/etc/nccl.conf": 2}

_ARITH = (
    r"""\$\(\([^()]*(?:\([^()]*\)[^()]*)*\)\)"""  # $((512 * 1024)): one word to the shell, blanks and all
)
_ASSIGN = re.compile(
    r"""(?<![\w$])(""" + _NAME + r""")=(""" + _ARITH + r"""|"(?:[^"\\]|\\.)*"|'[^']*'|[^\s;&|)]*)"""
)
# In --export=A=B,C=D (sbatch, srun) a comma ends the value; anywhere else it is part of it
# (export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1 sets the whole list).
_EXPORT_ASSIGN = re.compile(
    r"""(?<![\w$])(""" + _NAME + r""")=(""" + _ARITH + r"""|"(?:[^"\\]|\\.)*"|'[^']*'|[^\s;,&|)]*)"""
)
_PY_ENVIRON = re.compile(
    r"""environ\[\s*["'](""" + _NAME + r""")["']\s*\]\s*=\s*(?:str\()?\s*["']?([^"')\n]*)"""
)
_YAML_NAME = re.compile(r"""^\s*-?\s*name:\s*["']?(""" + _NAME + r""")["']?\s*$""")
_YAML_VALUE = re.compile(r"""^\s*value:\s*(.*?)\s*$""")
# A YAML map entry (Kubernetes/Compose env maps, Helm values): NCCL_X: "value".
_YAML_MAP = re.compile(r"""^\s*["']?(""" + _NAME + r""")["']?:\s+(\S.*?)\s*$""")
# A name one letter off NCCL's prefix (CCL_NET_GDR_LEVEL, NCLL_DEBUG): NCCL never reads it.
_NEAR_PREFIX = re.compile(r"""(?<![\w$])((?:CCL|NCL|NCC|NCLL|NCCCL|NNCL|MCCL)_[A-Z0-9_]+)=""")
_UNSET = re.compile(r"^\s*unset\s+(.+)\Z")
# A string assigned to a shell variable (CMD="NCCL_DEBUG=INFO python train.py"): the settings in it
# apply only where the script expands the variable ($CMD, ${CMD}, eval "$CMD").
_STRING_VAR = re.compile(
    r"""^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_]\w*)=(["'])(.*)"""
)
_PRINTS = re.compile(r"^\s*(?:echo|printf)\b")
_SOURCE = re.compile(r"""^\s*(?:source|\.)\s+(["']?)([^\s;&|"']+)\1""")
_CONF_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    origin: str  # environ, env-file, script, NCCL_CONF_FILE, /etc/nccl.conf
    path: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        return self.path or self.origin


@dataclass
class SettingSet:
    """The settings NCCL will see, and what was shadowed or not understood on the way."""

    effective: dict[str, Setting] = field(default_factory=dict)
    shadowed: list[tuple[Setting, Setting]] = field(default_factory=list)  # (lost, winner)
    unparsed: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line, text)
    missing: list[Setting] = field(default_factory=list)  # NCCL_CONF_FILE settings naming no file
    misread: list[tuple[str, int, str, str]] = field(
        default_factory=list
    )  # (path, line, text, how NCCL reads it)
    not_applied: list[tuple[str, int, str, str]] = field(default_factory=list)  # (path, line, name, why)
    sourced: list[tuple[str, int, str]] = field(default_factory=list)  # (script, line, file) not read

    def get(self, name: str) -> str | None:
        s = self.effective.get(name)
        return s.value if s is not None else None

    def __contains__(self, name: str) -> bool:
        return name in self.effective

    def values(self) -> dict[str, str]:
        return {k: s.value for k, s in self.effective.items()}


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace('\\"', '"') if value[0] == '"' else inner
    return value


def parse_env_file(
    text: str, path: str, origin: str = "env-file"
) -> tuple[list[Setting], list[tuple[str, int, str]]]:
    """``KEY=VALUE`` lines (``export`` optional, quotes, ``#`` comments): env files and nccl.conf."""
    settings, unparsed = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _CONF_LINE.match(line)
        if match is None:
            unparsed.append((path, number, raw[:200]))
            continue
        name, value = match.group(1), match.group(2)
        if value and value[0] not in "\"'" and " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if name.startswith(PREFIXES):
            settings.append(Setting(name, _unquote(value), origin, path, number))
    return settings, unparsed


_CONF_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_conf_file(
    text: str, path: str, origin: str
) -> tuple[list[Setting], list[tuple[str, int, str]], list[tuple[str, int, str, str]]]:
    """/etc/nccl.conf or the NCCL_CONF_FILE file as NCCL's ``setEnvFile`` reads it (NCCL v2.30.7-1
    src/misc/param.cc): a line starting with '#' is skipped, one without '=' too; otherwise the
    name is everything before the first '=' and the value everything after it, verbatim: no
    ``export``, no quote removal, no blank stripping, no trailing comments. Returns the settings,
    the lines NCCL skips, and the lines NCCL reads other than a shell would (with how)."""
    settings: list[Setting] = []
    skipped: list[tuple[str, int, str]] = []
    misread: list[tuple[str, int, str, str]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            skipped.append((path, number, line[:200]))
            continue
        name, value = name[:1023], value[:1023]
        if not _CONF_NAME.fullmatch(name):
            if name.strip().removeprefix("export").strip().startswith(PREFIXES):
                misread.append(
                    (
                        path,
                        number,
                        line[:200],
                        f"NCCL takes the name as {name!r} (no 'export', no blanks around '='), so the line sets no variable",
                    )
                )
            continue
        if not name.startswith(PREFIXES):
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            misread.append(
                (path, number, line[:200], f"NCCL keeps the quotes: {name} is {value!r}, quotes included")
            )
        elif " #" in value or "\t#" in value:
            misread.append((path, number, line[:200], f"NCCL keeps the comment: {name} is {value!r}"))
        settings.append(Setting(name, value, origin, path, number))
    return settings, skipped, misread


@dataclass
class ScriptRead:
    """A job script read as the shell would: the settings it applies, the ones it only holds in a
    string it never expands or prints (``not_applied``: path, line, name, why), and the files it
    sources (``sourced``: path, line, file), whose settings are not in ``settings``."""

    settings: list[Setting] = field(default_factory=list)
    not_applied: list[tuple[str, int, str, str]] = field(default_factory=list)
    sourced: list[tuple[str, int, str]] = field(default_factory=list)


def parse_script(text: str, path: str) -> list[Setting]:
    """The settings a job script applies (:func:`read_script`)."""
    return read_script(text, path).settings


def _arith(value: str) -> str:
    """``$((512 * 1024))`` -> ``"524288"`` when it is integer arithmetic, else the text as written."""
    inner = value[3:-2] if value.startswith("$((") and value.endswith("))") else None
    if inner is None or not re.fullmatch(r"[\d\s+\-*/%()]+", inner):
        return value
    import ast

    try:
        result = _int_expr(ast.parse(inner.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return value
    return str(result) if abs(result) < 1 << 63 else value


def _int_expr(node) -> int:
    """The value of an integer expression tree of + - * / % (shell arithmetic: / truncates)."""
    import ast
    import operator

    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _int_expr(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod}
    if isinstance(node, ast.BinOp):
        left, right = _int_expr(node.left), _int_expr(node.right)
        if isinstance(node.op, ast.Div):
            return int(left / right)
        if type(node.op) in ops:
            return ops[type(node.op)](left, right)
    raise ValueError("not integer arithmetic")


def _not_applied(raw: str, text: str, number: int, path: str) -> tuple[list[tuple[str, int, str, str]], bool]:
    """Settings on this line that the shell never applies: inside a string assigned to a variable
    the script never expands, or printed by echo/printf (not into an nccl.conf, which NCCL reads).
    (found, whole line handled)."""
    names = [m.group(1) for m in _ASSIGN.finditer(raw)]
    if not names:
        return [], False
    if _PRINTS.match(raw) and not re.search(r">>?\s*\S*nccl\.conf", raw):
        return [
            (path, number, n, "inside text echo/printf prints, not a command that runs") for n in names
        ], True
    var = _STRING_VAR.match(raw)
    if var is None or var.group(1).startswith(PREFIXES) or var.group(1) in ("export",):
        return [], False
    later = text.split("\n", number)[-1] if number < text.count("\n") + 1 else ""
    if re.search(r"\$\{?" + re.escape(var.group(1)) + r"\b", later) or re.search(
        r"\$\{?" + re.escape(var.group(1)) + r"\b", raw[var.end(1) + 2 :]
    ):
        return [], False  # expanded later: the string runs
    why = f"inside the string assigned to {var.group(1)}, which the script never expands (${var.group(1)})"
    return [(path, number, n, why) for n in names], True


def read_script(text: str, path: str) -> ScriptRead:
    """NCCL_* assignments anywhere in a job script: ``export A=B``, ``A=B cmd``, ``env A=B``,
    ``#SBATCH --export=ALL,A=B``, ``srun --export=...``, ``docker run -e A=B``, Kubernetes
    ``- name: A / value: B`` pairs and Python ``os.environ["A"] = "B"``. ``unset A`` removes.
    Read as the shell would: ``$((512 * 1024))`` is one value (computed), a setting inside a string
    the script never expands, or that echo prints, is not applied, and ``source``d files are named."""
    out = ScriptRead()
    settings = out.settings
    pending_yaml: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if pending_yaml is not None:
            value = _YAML_VALUE.match(raw)
            if value is not None:
                settings.append(Setting(pending_yaml, _unquote(value.group(1)), "script", path, number))
            pending_yaml = None
            continue
        yaml_name = _YAML_NAME.match(raw)
        if yaml_name is not None:
            pending_yaml = yaml_name.group(1)
            continue
        yaml_map = _YAML_MAP.match(raw)
        if yaml_map is not None:
            settings.append(Setting(yaml_map.group(1), _unquote(yaml_map.group(2)), "script", path, number))
            continue
        for near in _NEAR_PREFIX.finditer(raw):  # kept so lint names it (NCCL001 with the real name)
            value = _ASSIGN.match("NCCL_X=" + raw[near.end() :])
            settings.append(
                Setting(near.group(1), _unquote(value.group(2)) if value else "", "script", path, number)
            )
        if (
            stripped.startswith("#")
            and not stripped.startswith("#SBATCH")
            and not stripped.startswith("#PBS")
        ):
            continue
        sourced = _SOURCE.match(stripped)
        if sourced is not None:
            out.sourced.append((path, number, sourced.group(2)))
            continue
        skipped, handled = _not_applied(raw, text, number, path)
        out.not_applied += skipped
        if handled:
            continue
        unset = _UNSET.match(stripped)
        if unset is not None:
            try:
                names = shlex.split(unset.group(1), comments=True)
            except ValueError:
                names = unset.group(1).split()
            for name in names:
                if name.startswith(PREFIXES):
                    settings.append(Setting(name, "", "script-unset", path, number))
            continue
        for match in _PY_ENVIRON.finditer(raw):
            settings.append(Setting(match.group(1), match.group(2).strip(), "script", path, number))
        if "environ[" in raw:
            continue
        for match in (_EXPORT_ASSIGN if "--export" in raw else _ASSIGN).finditer(raw):
            settings.append(Setting(match.group(1), _arith(_unquote(match.group(2))), "script", path, number))
    # Apply in order: later assignments and unsets win.
    result: dict[str, Setting] = {}
    for s in settings:
        if s.origin == "script-unset":
            result.pop(s.name, None)
        else:
            result[s.name] = s
    out.settings = list(result.values())
    return out


def from_environ(environ: Mapping[str, str]) -> list[Setting]:
    return [Setting(k, v, "environ") for k, v in sorted(environ.items()) if k.startswith(PREFIXES)]


def merge(groups: Iterable[list[Setting]]) -> SettingSet:
    """NCCL's precedence: environment (and what a script or env file exports) over the
    NCCL_CONF_FILE file over /etc/nccl.conf; within one level, the later source wins."""
    out = SettingSet()
    for group in groups:
        for setting in group:
            current = out.effective.get(setting.name)
            if current is None:
                out.effective[setting.name] = setting
                continue
            new_rank, old_rank = ORIGIN_RANK.get(setting.origin, 0), ORIGIN_RANK.get(current.origin, 0)
            if new_rank <= old_rank:
                out.effective[setting.name] = setting
                if current.value != setting.value:
                    out.shadowed.append((current, setting))
            elif current.value != setting.value:
                out.shadowed.append((setting, current))
    return out


def uses_expansion(value: str) -> bool:
    return "$" in value or "`" in value
