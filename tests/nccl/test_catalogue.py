"""The variable catalogue is generated from NCCL's source (issue 13 B7): a real variable is never
called a typo, and the generator reads the patterns NCCL defines variables with."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from fabricscope.nccl import catalogue
from fabricscope.nccl.lint import lint
from fabricscope.nccl.settings import from_environ, merge
from fabricscope.nccl.variables import RENAMED, SPECS, is_read, parse_version

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_nccl_variables.py"
READ = sorted(n for n, (_, source, _, _) in catalogue.VARIABLES.items() if not source.startswith("docs/"))


def name_findings(name: str, value: str) -> list:
    return [f for f in lint(merge([from_environ({name: value})])) if f.id in ("NCCL001", "NCCL002")]


@pytest.mark.parametrize("name", ["NCCL_MAX_P2P_NCHANNELS", "NCCL_NVTX_DISABLE", "NCCL_PAT_ENABLE"])
def test_the_real_variables_once_called_typos(name: str) -> None:
    assert name in catalogue.VARIABLES
    assert name_findings(name, "1") == []


def test_no_variable_nccl_reads_is_called_unknown_or_renamed() -> None:
    """Every name the release's source reads: no NCCL001, and NCCL002 only as info for the
    deprecated aliases NCCL still reads (never 'rename it', never 'has no effect')."""
    bad = []
    for name in READ:
        for f in name_findings(name, catalogue.VARIABLES[name][0] or "1"):
            if f.id == "NCCL001" or f.severity.value != "info":
                bad.append(f"{name}: {f.id} {f.severity.value} {f.message}")
    assert not bad, bad
    assert len(READ) > 250  # the 2.30 source reads about 280 names


def test_catalogue_states_its_release_and_covers_the_typed_specs() -> None:
    assert catalogue.RELEASE == "v2.30.7-1" and len(catalogue.COMMIT) == 40
    assert "v2.30.7-1" in (catalogue.__doc__ or "")
    assert [n for n in SPECS if not is_read(n)] == []
    # A name typed here and listed in RENAMED is a deprecated alias NCCL still reads: info only.
    assert all(RENAMED[n][1] == "info" for n in set(SPECS) & set(RENAMED))


def test_a_real_typo_is_still_caught() -> None:
    found = name_findings("NCCL_IB_GID_INDX", "3")
    assert found[0].id == "NCCL001" and found[0].evidence["suggestion"] == "NCCL_IB_GID_INDEX"


def test_parse_version_takes_ascii_digits_only(cli) -> None:
    assert parse_version("2.21.5") == (2, 21, 5)
    assert parse_version("v2.19.3+cuda12.2") == (2, 19, 3)
    assert parse_version("2.²1") == (2,)  # str.isdigit() accepts '²', int() then raises
    assert parse_version("²") is None
    res = cli(
        "nccl", "lint", "--no-node", "--nccl-version", "²", "--from-environ", env={"NCCL_DEBUG": "WARN"}
    )
    assert res.exit_code == 2 and "not a version" in res.stderr


def _load_script():
    spec = importlib.util.spec_from_file_location("gen_nccl_variables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_generator_reads_every_definition_pattern(tmp_path) -> None:
    """A miniature NCCL tree with each way NCCL 2.30 defines or reads a variable."""
    repo = tmp_path / "nccl"
    (repo / "src/graph").mkdir(parents=True)
    (repo / "docs/userguide/source").mkdir(parents=True)
    (repo / "src/include").mkdir(parents=True)
    (repo / "src/include/param.h").write_text(
        "#define NCCL_PARAM(name, env, deftVal) \\\n  int64_t ncclParam##name()\n"
    )
    (repo / "src/graph/paths.cc").write_text(
        'NCCL_PARAM(NetGdrC2c, "NET_GDR_C2C", 1);\n'
        'NCCL_PARAM(MaxP2pNChannels, "MAX_P2P_NCHANNELS", (1 << 5));\n'
        '// NCCL_PARAM(Old, "COMMENTED_OUT", 0);\n'
        'NCCLCHECK(ncclGetLevel(&lvl, "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"));\n'
        'const char* s = ncclGetEnv("NCCL_IB_HCA"); const char* t = std::getenv("NCCL_CONF_FILE");\n'
    )
    (repo / "src/debug.cc").write_text(
        'DEFINE_NCCL_PARAM(ncclParamDebugLevel, ncclDebugLogLevel, NCCL_DEBUG, NCCL_LOG_NONE,\n  0, parser, "desc");\n'
    )
    (repo / "docs/userguide/source/env.rst").write_text("NCCL_LL_THRESHOLD\n-----------------\n\nRemoved.\n")
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    subprocess.run([*git, "add", "."], check=True, timeout=60)
    subprocess.run(
        [*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True, timeout=60
    )
    subprocess.run([*git, "tag", "v9.9.9-1"], check=True, timeout=60)
    text = _load_script().generate(str(repo), "v9.9.9-1")
    namespace: dict = {}
    exec(compile(text, "catalogue.py", "exec"), namespace)
    variables = namespace["VARIABLES"]
    assert namespace["RELEASE"] == "v9.9.9-1"
    assert variables["NCCL_NET_GDR_C2C"] == ("1", "src/graph/paths.cc", False, "int")
    assert variables["NCCL_MAX_P2P_NCHANNELS"][0] == "(1 << 5)"
    assert variables["NCCL_DEBUG"][:2] == ("NCCL_LOG_NONE", "src/debug.cc")
    assert variables["NCCL_LL_THRESHOLD"] == (None, "docs/userguide/source/env.rst", True, "text")
    assert variables["NCCL_DEBUG"][3] == "typed" and variables["NCCL_IB_HCA"][3] == "text"
    assert set(variables) == {
        "NCCL_NET_GDR_C2C",
        "NCCL_MAX_P2P_NCHANNELS",
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_IB_HCA",
        "NCCL_CONF_FILE",
        "NCCL_DEBUG",
        "NCCL_LL_THRESHOLD",
    }


@pytest.mark.parametrize(
    ("value", "read_as"), [("yes", "is 0"), ("4k", "is 4"), ("99999999999999999999", "keeps the default")]
)
def test_integer_parameters_are_read_with_strtoll(value: str, read_as: str) -> None:
    """NCCL_PAT_ENABLE is NCCL_PARAM(PatEnable, "PAT_ENABLE", 2): ncclLoadParam's strtoll."""
    [f] = [f for f in lint(merge([from_environ({"NCCL_PAT_ENABLE": value})])) if f.id == "NCCL003"]
    assert read_as in f.message


@pytest.mark.parametrize("value", ["0", "1", "0x10", "-1", " 2"])
def test_integer_parameters_that_read_right(value: str) -> None:
    assert not [f for f in lint(merge([from_environ({"NCCL_PAT_ENABLE": value})])) if f.id == "NCCL003"]
