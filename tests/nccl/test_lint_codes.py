"""One table of lint codes (issue 14 item 3, issue 21 item 5): every code is bound to the one rule
that reports it (lint.RULES), only the library's rules emit codes, and docs/nccl.md's table is
generated from the registry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fabricscope.findings import Severity
from fabricscope.host import Root, read_inventory
from fabricscope.nccl.job import JobSources, collect, lint_job, relabel
from fabricscope.nccl.lint import CODES, RULES, Rule, code_table, lint
from fabricscope.nccl.lint import codes as lint_codes
from fabricscope.nccl.lint.codes import finding
from fabricscope.nccl.settings import from_environ, merge
from tests.conftest import FIXTURE_HOSTS, HOST_NAMES
from tests.nccl.test_lint import BLOG

SRC = Path(__file__).resolve().parents[2] / "src" / "fabricscope"
CODE = re.compile(r"NCCL\d{3}")
# Settings that between them reach every rule, linted against every fixture host and no host.
BATTERY: list[dict[str, str]] = [
    {
        "NCCL_IB_HCAS": "mlx5",
        "NCCL_FOO_BAR_BAZ": "1",
        "NCCL_IB_GDR_LEVEL": "PHB",
        "NCCL_IB_TIMEOUT": "40",
        "NCCL_X": "$Y",
    },
    {
        "NCCL_IB_HCA": "mlx5_1,mlx5_9,=mlx5_0:2",
        "NCCL_SOCKET_IFNAME": "lo,eth",
        "NCCL_IB_GID_INDEX": "0",
        "NCCL_IB_TC": "107",
    },
    {
        "NCCL_IB_HCA": "=mlx5_0:2",
        "NCCL_IB_GID_INDEX": "1",
        "NCCL_IB_TC": "41",
        "NCCL_NET_GDR_LEVEL": "LOC",
        "NCCL_IB_TIMEOUT": "0",
    },
    {
        "NCCL_IB_HCA": "^mlx5",
        "NCCL_IB_GID_INDEX": "2",
        "NCCL_NET_GDR_LEVEL": "SYS",
        "NCCL_IB_QPS_PER_CONNECTION": "4",
    },
    {
        "NCCL_IB_GID_INDEX": "7",
        "NCCL_NET_GDR_LEVEL": "2",
        "NCCL_IB_DISABLE": "1",
        "NCCL_NET": "Socket",
        "NCCL_IB_TIMEOUT": "12",
    },
    {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_ALGO": "Ring",
        "NCCL_PROTO": "LL128",
        "NCCL_DEBUG": "INFO",
    },
    {
        "NCCL_P2P_LEVEL": "LOC",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "=ibp180s0",
        "NCCL_IB_HCA": "=mlx5_5",
    },
    {"NCCL_IB_GID_INDEX": "1"},
    {"NCCL_IB_ADDR_FAMILY": "AF_INET6", "NCCL_IB_HCA": "=mlx5_0:1, mlx5_1:1"},
    {"NCCL_DEBUG": "WARN", "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "0"},
]
# Codes that need sources (NCCL005-007) or a host changed on purpose (test_lint.py builds them).
NEEDS_MORE = {
    "NCCL005",
    "NCCL006",
    "NCCL007",
    "NCCL008",
    "NCCL009",
    "NCCL012",
    "NCCL013",
    "NCCL015",
    "NCCL022",
    "NCCL034",
}


def all_findings():
    for host in [None, *HOST_NAMES]:
        inv = read_inventory(Root.at(FIXTURE_HOSTS / host)) if host else None
        for env in BATTERY:
            yield from lint(merge([from_environ(env)]), inv)
        yield from lint(merge([from_environ({"NCCL_DEBUG": "WARN"})]), inv, nccl_version="2.19.3")  # NCCL037


def literal_codes(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= set(CODE.findall(node.value))
    return found


def test_every_code_in_the_source_is_registered() -> None:
    unknown = {
        f"{p.relative_to(SRC)}: {c}" for p in SRC.rglob("*.py") for c in literal_codes(p) if c not in CODES
    }
    assert not unknown


def test_only_the_library_rules_emit_codes() -> None:
    """cli/ and checks/ relabel the library's findings; none of them writes a code of its own."""
    rules = {p for p in (SRC / "nccl" / "lint" / "rules").glob("*.py") if p.name != "__init__.py"}
    outside = {}
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        emitted = {c for c in literal_codes(path) if re.search(rf'finding\(\s*"{c}"|Finding\(\s*"{c}"', text)}
        if emitted and path not in rules:
            outside[str(path.relative_to(SRC))] = sorted(emitted)
        # Inside the rules, only lint.codes.finding() builds a coded finding (it checks the table).
        bypass = {c for c in literal_codes(path) if re.search(rf'Finding\(\s*"{c}"', text)}
        if bypass and path in rules:
            outside[str(path.relative_to(SRC))] = sorted(bypass)
    assert not outside


def test_every_emitted_code_is_registered_with_its_worst_severity() -> None:
    seen: dict[str, Severity] = {}
    for f in all_findings():
        assert f.id in CODES, f
        assert f.severity.rank <= Severity(CODES[f.id][0]).rank, f
        if f.id not in seen or f.severity.rank > seen[f.id].rank:
            seen[f.id] = f.severity
    # No code in the table is dead: the battery reaches each one but those NEEDS_MORE names.
    assert set(CODES) - set(seen) <= NEEDS_MORE, sorted(set(CODES) - set(seen))


def test_each_code_is_bound_to_exactly_one_rule() -> None:
    bound = [code for r in RULES for code in r.codes]
    assert len(bound) == len(set(bound)) == len(CODES)
    assert len({r.check for r in RULES}) == len(RULES)


def test_each_rule_reports_only_its_own_codes() -> None:
    """Every rule run alone over the battery: its findings carry only the codes RULES binds to it."""
    for host in [None, *HOST_NAMES]:
        inv = read_inventory(Root.at(FIXTURE_HOSTS / host)) if host else None
        for env in BATTERY:
            ctx = lint_codes.LintContext(settings=merge([from_environ(env)]), inventory=inv)
            for r in RULES:
                assert {f.id for f in r.check(ctx)} <= set(r.codes), (r.check.__name__, host, env)


def test_lint_refuses_a_code_not_bound_to_its_rule(monkeypatch) -> None:
    from fabricscope.nccl import lint as lint_module

    def rogue(ctx):
        yield finding("NCCL004", "fail", None, "X", "m")

    monkeypatch.setattr(lint_module, "RULES", (Rule(rogue, {"NCCL004": ("info", "x")}),))
    with pytest.raises(ValueError, match="at most info"):
        lint_module.lint(merge([from_environ({})]))
    monkeypatch.setattr(lint_module, "RULES", (Rule(rogue, {"NCCL005": ("fail", "x")}),))
    with pytest.raises(ValueError, match="not bound"):
        lint_module.lint(merge([from_environ({})]))


def test_docs_table_is_generated_from_the_registry() -> None:
    doc = (SRC.parents[1] / "docs" / "nccl.md").read_text()
    assert code_table() in doc, "regenerate docs/nccl.md's code table: python scripts/gen_lint_code_table.py"


def test_missing_conf_file_is_a_library_rule(host_copy) -> None:
    """NCCL007 used to be built by cli/nccl.py; the library's collect + lint now reports it."""
    root = Root.at(host_copy("ib-ndr-healthy"))
    sources = JobSources(
        scripts=[("job.sh", "export NCCL_CONF_FILE=/etc/nope.conf\n")],
        env_files=[("a.env", "NCCL_DEBUG=WARN\nbad line\n")],
    )
    settings, found = lint_job(sources, root, read_inventory(root))
    nccl007 = next(f for f in found if f.id == "NCCL007")
    assert nccl007.evidence == {"value": "/etc/nope.conf", "source": "job.sh:1"}
    assert {f.id for f in found} >= {"NCCL006", "NCCL007"}
    assert settings.missing[0].value == "/etc/nope.conf"


def test_collect_follows_nccl_precedence(host_copy) -> None:
    root_path = host_copy("roce-healthy")
    (root_path / "etc").mkdir(exist_ok=True)
    (root_path / "etc/nccl.conf").write_text("NCCL_IB_TC=41\nNCCL_DEBUG=INFO\n")
    (root_path / "etc/user.conf").write_text("NCCL_DEBUG=VERSION\n")
    root = Root.at(root_path)
    st = collect(
        JobSources(scripts=[("job.sh", BLOG.replace("NCCL_DEBUG=WARN", "NCCL_CONF_FILE=/etc/user.conf"))]),
        root,
        read_inventory(root),
    )
    assert st.effective["NCCL_IB_TC"].where == "job.sh:7"  # the job beats /etc/nccl.conf
    assert st.effective["NCCL_DEBUG"].where == "/etc/user.conf:1"  # NCCL_CONF_FILE beats /etc/nccl.conf
    assert {f.id for f in lint(st)} >= {"NCCL005"}


def test_relabel_keeps_the_code_in_evidence() -> None:
    found = lint(merge([from_environ({"NCCL_IB_DISABLE": "1"})]))
    out = relabel(found, "nccl.conf", subject=lambda f: f"/etc/nccl.conf:1 {f.subject}")
    assert out[0].id == "nccl.conf" and out[0].evidence["code"] == "NCCL060"
    assert out[0].message.startswith("NCCL060: ") and out[0].subject == "/etc/nccl.conf:1 NCCL_IB_DISABLE"
