"""The code base stays ruff clean and ruff formatted (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import TESTS


def _ruff(*args: str) -> subprocess.CompletedProcess:
    ruff = shutil.which("ruff") or str(__import__("pathlib").Path(sys.executable).parent / "ruff")
    return subprocess.run(
        [ruff, *args, "src", "tests", "benchmarks", "scripts"],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_clean() -> None:
    proc = _ruff("check")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_ruff_formatted() -> None:
    """One layout (ruff format, adopted in issue 21): `ruff format src tests benchmarks scripts` fixes it."""
    proc = _ruff("format", "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_every_command_module_exists() -> None:
    import importlib.util

    from fabricscope.cli.main import COMMAND_MODULES

    missing = sorted(
        {m for ms in COMMAND_MODULES.values() for m in ms if importlib.util.find_spec(m) is None}
    )
    assert not missing


def test_one_way_to_start_processes_and_make_temp_dirs() -> None:
    """Children start only in host/command.py (own session, group killed at the deadline) and
    temporary directories only in host/tempfiles.py (owner-only, fabricscope-*, removed on signals)."""
    import re

    src = TESTS.parent / "src" / "fabricscope"
    rules = {
        re.compile(
            r"^\s*(import subprocess|from subprocess import)|\bos\.(killpg|fork|spawn\w*|system|popen)\("
        ): {"host/command.py"},
        re.compile(r"\b(mkdtemp|mkstemp|TemporaryDirectory|NamedTemporaryFile)\("): {"host/tempfiles.py"},
    }
    offenders = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for pattern, allowed in rules.items():
                if rel not in allowed and pattern.search(line):
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# ----- layers: docs/architecture.md's diagram, held against every import --------------------------
ARCHITECTURE_DOC = TESTS.parent / "docs" / "architecture.md"
# Imports that cross the layers upwards and must stay for now: {(importer file, imported unit): reason}.
# Empty today; an entry needs a reason and is checked to still exist, so the list cannot rot.
KNOWN_UPWARD_IMPORTS: dict[tuple[str, str], str] = {}


def documented_layers() -> dict[str, int]:
    """Unit (package or top-level module) -> rank, from the diagram (top line highest) and the
    paragraph naming the modules below all layers (rank 0)."""
    import re

    text = ARCHITECTURE_DOC.read_text()
    block = text.split("## Layers", 1)[1].split("\n\n", 2)[1]
    rows = [
        re.findall(r"(\w+)/", m.group(1))
        for m in map(re.compile(r"\s*((?:\w+/\s*)+)").match, block.splitlines())
        if m
    ]
    layers = {unit: len(rows) - i for i, row in enumerate(rows) for unit in row}
    below = text.split("Below all layers", 1)[1].split("\n\n", 1)[0]
    for name in re.findall(r"`(\w+)`", below):  # the modules it names, not the layers it mentions
        if name not in layers and name != "FabricscopeError":
            layers[name] = 0
    layers.update({"__init__": 0, "__main__": layers["cli"]})
    return layers


def fabricscope_imports(path, package: str) -> list[tuple[int, str]]:
    """(line, unit) for every ``fabricscope.<unit>`` a module imports, at any depth of the file."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] == "fabricscope" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def upward_imports() -> dict[tuple[str, str], str]:
    src = TESTS.parent / "src" / "fabricscope"
    layers = documented_layers()
    units = {
        p.stem if p.is_file() else p.name
        for p in src.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    undocumented = sorted(units - set(layers))
    assert not undocumented, f"place these in docs/architecture.md's layers: {undocumented}"
    bad = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        unit = rel.parts[0].removesuffix(".py")
        package = ".".join(("fabricscope", *rel.parts[:-1]))
        for line, target in fabricscope_imports(path, package):
            if target in units and target != unit and layers[target] > layers[unit]:
                bad[(rel.as_posix(), target)] = (
                    f"{rel.as_posix()}:{line}: {unit} (layer {layers[unit]}) imports {target} (layer {layers[target]})"
                )
    return bad


def test_the_documented_layers_are_complete() -> None:
    layers = documented_layers()
    assert (
        layers["cli"]
        > layers["report"]
        == layers["store"]
        > layers["monitor"]
        > layers["bench"]
        > layers["host"]
        > 0
    )
    # the domain's ranks (issue 21): triage, ready > fleet > bench > topology, checks > jobs, nccl, sim > lab
    assert layers["monitor"] > layers["triage"] == layers["ready"] > layers["fleet"] > layers["bench"]
    assert (
        layers["bench"]
        > layers["topology"]
        == layers["checks"]
        > layers["jobs"]
        == layers["nccl"]
        == layers["sim"]
    )
    assert layers["sim"] > layers["lab"] > layers["host"]
    assert layers["errors"] == layers["units"] == 0


def test_imports_point_down_only() -> None:
    """cli -> report/store -> monitor -> checks/nccl/bench/sim/lab/... -> host, as docs/architecture.md draws it."""
    found = upward_imports()
    new = [where for key, where in found.items() if key not in KNOWN_UPWARD_IMPORTS]
    assert not new, "imports that point up a layer:\n" + "\n".join(new)
    gone = [key for key in KNOWN_UPWARD_IMPORTS if key not in found]
    assert not gone, f"no longer imported, drop from KNOWN_UPWARD_IMPORTS: {gone}"


# ----- size: no function over 80 lines (issue 14, CONTRIBUTING.md) --------------------------------------
# Modules are held by their complexity instead of their length (ruff C901 in pyproject.toml, issue 21):
# a 600-line cap split files to fit it rather than along real seams.
MAX_FUNCTION_LINES = 80
# Declarative data, excepted for good: a table reads best whole. "module" or "module:function".
DECLARATIVE = {
    "monitor/dashboard.py": "the Grafana dashboard, panel by panel, as data",
    "monitor/dashboard.py:_rows": "the dashboard's rows and panels: one literal table",
}
# Over the limits when this guard landed, and no helper on them yet (reported to the lead); an entry
# goes when its module or function is under the limits, and the guard then holds it there. (The
# modules helpers were shrinking at the time, nccl/log/parse.py, nccl/log/report.py, nccl/lint/__init__.py,
# sim/topology.py and host/root.py, were under the limits by then.) "module" excepts the module's
# size and its functions; "module:function" one function.
SHRINKING: dict[str, str] = {}  # empty: every module and function is within the limits


def oversized() -> list[str]:
    """Every function (method, nested function) whose body runs over MAX_FUNCTION_LINES. The body is
    counted from its first statement: a signature laid out one parameter a line (ruff format) declares
    options, it does not add work to the function."""
    import ast

    src = TESTS.parent / "src" / "fabricscope"
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.end_lineno - node.body[0].lineno + 1 > MAX_FUNCTION_LINES
            ):
                found.append(f"{rel}:{node.name}")
    return found


def test_modules_and_functions_stay_small() -> None:
    """One job per function: over 80 lines, split along the seams."""
    excepted = {**DECLARATIVE, **SHRINKING}
    new = [where for where in oversized() if where not in excepted and where.split(":")[0] not in excepted]
    assert not new, f"over {MAX_FUNCTION_LINES} lines: {new}"


# ----- nothing from a peer is unpickled (issue 20) -------------------------------------------------
# The only unpickling allowed: a module named here whose every Unpickler subclass overrides
# find_class (a restricted, data-only reader of files such as Flight Recorder dumps).
RESTRICTED_UNPICKLERS: set[str] = {"triage/safe_pickle.py"}


def _unpickling_calls(tree) -> list[tuple[int, str]]:
    """(line, what) for pickle.load(s), Unpickler(...).load, all_gather_object, broadcast_object_list,
    gather/scatter_object_list, recv_object_list, and torch.load without weights_only=True."""
    import ast

    found = []
    banned = {"all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
              "recv_object_list", "send_object_list"}  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in (
            "pickle",
            "_pickle",
            "cPickle",
            "dill",
            "cloudpickle",
        ):
            found += [
                (node.lineno, f"from {node.module} import {a.name}")
                for a in node.names
                if a.name in ("load", "loads", "Unpickler")
            ]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if name in banned:
            found.append((node.lineno, name))
        elif name in ("load", "loads") and owner in (
            "pickle",
            "_pickle",
            "cPickle",
            "dill",
            "cloudpickle",
            "marshal",
        ):
            found.append((node.lineno, f"{owner}.{name}"))
        elif name == "load" and owner == "torch":
            safe = any(
                k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            if not safe:
                found.append((node.lineno, "torch.load without weights_only=True"))
        elif name == "Unpickler" and owner in ("pickle", "_pickle"):
            found.append((node.lineno, "pickle.Unpickler"))
    return found


def _restricted_unpickler_ok(tree) -> bool:
    """Every class deriving from (pickle.)Unpickler defines find_class, and nothing else unpickles."""
    import ast

    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
               and any((isinstance(b, ast.Attribute) and b.attr == "Unpickler") or (isinstance(b, ast.Name) and b.id == "Unpickler") for b in n.bases)]  # fmt: skip
    return bool(classes) and all(
        any(isinstance(f, ast.FunctionDef) and f.name == "find_class" for f in c.body) for c in classes
    )


def test_nothing_is_unpickled() -> None:
    """No pickle.load(s), object collectives (all_gather_object and kin unpickle what peers send) or
    torch.load without weights_only anywhere in src/, except a restricted data-only unpickler."""
    import ast

    src = TESTS.parent / "src" / "fabricscope"
    offenders = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        tree = ast.parse(path.read_text())
        calls = _unpickling_calls(tree)
        if rel in RESTRICTED_UNPICKLERS:
            assert _restricted_unpickler_ok(tree), f"{rel}: every Unpickler subclass must override find_class"
            calls = [c for c in calls if c[1] not in ("pickle.Unpickler", "from pickle import Unpickler")]
        offenders += [f"{rel}:{line}: {what}" for line, what in calls]
    assert not offenders, "\n".join(offenders)


def test_the_unpickling_scan_finds_what_it_forbids() -> None:
    import ast

    text = "import pickle, torch\nimport torch.distributed as dist\npickle.loads(b'')\ndist.all_gather_object([], 1)\ntorch.load('x')\ntorch.load('x', weights_only=True)\n"
    assert [w for _, w in _unpickling_calls(ast.parse(text))] == [
        "pickle.loads",
        "all_gather_object",
        "torch.load without weights_only=True",
    ]
    ok = "import pickle\nclass R(pickle.Unpickler):\n    def find_class(self, m, n):\n        raise ValueError\n"
    assert _restricted_unpickler_ok(ast.parse(ok)) and not _restricted_unpickler_ok(
        ast.parse("import pickle\nclass R(pickle.Unpickler):\n    pass\n")
    )
