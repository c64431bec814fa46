"""The job's node list: Slurm's hostlist syntax, on node lists quoted from public threads with
what ``scontrol show hostnames`` printed for them there."""

from __future__ import annotations

import pytest

from fabricscope.jobs.launch import LaunchError, first_slurm_host
from fabricscope.jobs.nodelist import NodeListError, expand_hostlist, job_nodes


def test_skypilot_8891_scontrol_show_hostnames() -> None:
    # https://github.com/skypilot-org/skypilot/pull/8891 (the scontrol output quoted there)
    assert expand_hostlist("ml-16-node-[001-002,004],ml-17-node-[001-003]") == [
        "ml-16-node-001", "ml-16-node-002", "ml-16-node-004", "ml-17-node-001", "ml-17-node-002", "ml-17-node-003",
    ]  # fmt: skip


def test_palace_228_two_nodes() -> None:
    # https://github.com/awslabs/palace/issues/228: SLURM_JOB_NODELIST=d05-[41-42] -> d05-41, d05-42
    assert expand_hostlist("d05-[41-42]") == ["d05-41", "d05-42"]


def test_megatron_bridge_3830_mixed_list() -> None:
    # https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3830: "nodeA,nodeB[001,003],nodeC" starts with nodeA
    assert expand_hostlist("nodeA,nodeB[001,003],nodeC") == ["nodeA", "nodeB001", "nodeB003", "nodeC"]
    assert first_slurm_host("nodeA,nodeB[001,003],nodeC") == "nodeA"


def test_ood_core_54_tacc_formats() -> None:
    # https://github.com/OSC/ood_core/issues/54 (TACC node lists)
    assert expand_hostlist("c438-[062,104]") == ["c438-062", "c438-104"]
    assert expand_hostlist("c427-032,c429-002") == ["c427-032", "c429-002"]
    assert expand_hostlist("c457-[001-002]") == ["c457-001", "c457-002"]


def test_several_brackets_in_one_name_and_the_brief_example() -> None:
    assert expand_hostlist("rack[1-2]-n[01-02]") == ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]
    assert expand_hostlist("gpu[01-04,07],cpu-a[1-2]") == [
        "gpu01",
        "gpu02",
        "gpu03",
        "gpu04",
        "gpu07",
        "cpu-a1",
        "cpu-a2",
    ]


@pytest.mark.parametrize(
    "bad", ["gpu[01-", "gpu[[1-2]]", "gpu[2-1]", "gpu[a-b]", "gpu]1[", "gpu[0-99999999]", "", "gpu;rm"]
)
def test_bad_node_lists_are_one_clear_error(bad: str) -> None:
    with pytest.raises(NodeListError):
        expand_hostlist(bad)
    with pytest.raises(LaunchError):
        first_slurm_host(bad)


def test_which_launcher_names_the_nodes() -> None:
    assert job_nodes({"SLURM_JOB_NODELIST": "h[1-3]"}, "slurm") == {"h1", "h2", "h3"}
    assert job_nodes({"FABRICSCOPE_NODELIST": "h1,h5"}, "lab:ls") == {"h1", "h5"}
    assert job_nodes({"FABRICSCOPE_NODELIST": "h1,h5"}, "torchrun") is None  # only our launchers set it
    assert job_nodes({}, "torchrun") is None
