"""Lint reads lists as NCCL does and scripts as the shell would (issue 22).

Lists: NCCL_SOCKET_IFNAME and NCCL_IB_HCA select every interface or device matching any entry
(``matchIfList``, src/misc/utils.cc, NVIDIA/nccl v2.30.7-1) and NCCL fails only when nothing
matches. The list ``eth0,en,eth,em,bond`` is the one a widely copied training script ships
(DeepSpeed/Megatron launch scripts: ``NCCL_SOCKET_IFNAME=eth0,en,eth,em,bond``).
"""

from __future__ import annotations

from dataclasses import replace

from fabricscope.host import Root, read_inventory
from fabricscope.nccl.job import JobSources, lint_job
from fabricscope.nccl.lint import lint
from fabricscope.nccl.settings import from_environ, merge, read_script
from tests.conftest import FIXTURE_HOSTS

COPIED_LIST = "eth0,en,eth,em,bond"


def _bond_node():
    """cloud-tcp with its one NIC renamed bond0 (a bonded management interface)."""
    inv = read_inventory(Root.at(FIXTURE_HOSTS / "cloud-tcp"))
    devices = tuple(replace(d, name="bond0") if d.name == "ens5" else d for d in inv.net_devices)
    assert any(d.name == "bond0" for d in devices)
    return replace(inv, net_devices=devices)


def test_copied_list_on_a_bond0_node_is_clean() -> None:
    found = lint(merge([from_environ({"NCCL_SOCKET_IFNAME": COPIED_LIST})]), _bond_node())
    ifname = [f for f in found if f.subject == "NCCL_SOCKET_IFNAME"]
    assert not [f for f in ifname if f.severity.value in ("warn", "fail")], ifname
    # The entries that match nothing here are named, as information.
    assert sorted(f.evidence["token"] for f in ifname if f.id == "NCCL020") == ["em", "en", "eth", "eth0"]


def test_a_list_matching_nothing_fails() -> None:
    found = lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "eth0,em"})]), _bond_node())
    misses = [f for f in found if f.id == "NCCL020"]
    assert misses and {f.severity.value for f in misses} == {"fail"}


def test_arithmetic_is_one_value() -> None:
    read = read_script(
        "export NCCL_BUFFSIZE=$((512 * 1024))\nNCCL_NCHANNELS_PER_NET_PEER=$(( (2+2) * 2 )) python x.py\n",
        "job.sh",
    )
    values = {s.name: s.value for s in read.settings}
    assert values == {"NCCL_BUFFSIZE": "524288", "NCCL_NCHANNELS_PER_NET_PEER": "8"}
    found = lint(merge([read.settings]))
    assert not [f for f in found if f.subject == "NCCL_BUFFSIZE" and f.id in ("NCCL003", "NCCL004")]


def test_settings_the_shell_never_applies_are_not_applied() -> None:
    script = (
        "#!/bin/bash\n"
        'CMD="NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5 python train.py"\n'  # never expanded
        'RUN="NCCL_P2P_DISABLE=1 python train.py"\n'
        'echo "export NCCL_SOCKET_IFNAME=eth0" >> ~/.bashrc\n'
        "$RUN\n"
        "export NCCL_IB_TIMEOUT=22\n"
    )
    settings, found = lint_job(JobSources(scripts=[("job.sh", script)]))
    assert set(settings.effective) == {"NCCL_P2P_DISABLE", "NCCL_IB_TIMEOUT"}
    not_applied = {f.subject: f for f in found if f.id == "NCCL008"}
    assert set(not_applied) == {"NCCL_DEBUG", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"}
    assert (
        "CMD" in not_applied["NCCL_DEBUG"].message
        and not_applied["NCCL_DEBUG"].evidence["source"] == "job.sh:2"
    )


def test_a_sourced_file_is_named() -> None:
    script = "#!/bin/bash\nsource /opt/cluster/nccl-env.sh\n. ./common.sh\nexport NCCL_DEBUG=WARN\n"
    _settings, found = lint_job(JobSources(scripts=[("job.sh", script)]))
    named = sorted(f.subject for f in found if f.id == "NCCL009")
    assert named == ["./common.sh", "/opt/cluster/nccl-env.sh"]


def test_an_exclude_list_that_leaves_lo_in() -> None:
    """`^docker0` replaces NCCL's default (^docker,lo): lo comes first and can be picked (aws/deep-learning-containers#4756)."""
    for inv in (None, _bond_node()):
        found = [
            f
            for f in lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "^docker0"})]), inv)
            if f.id == "NCCL023"
        ]
        assert found and found[0].severity.value == "warn" and "lo" in found[0].message
        clean = [
            f
            for f in lint(merge([from_environ({"NCCL_SOCKET_IFNAME": "^docker,lo,veth"})]), inv)
            if f.id == "NCCL023"
        ]
        assert not clean
