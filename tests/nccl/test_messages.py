"""The message catalogue (src/fabricscope/nccl/data/messages.json, scripts/gen_nccl_messages.py):
its shape, that every verdict rule names entries that exist, and that the generator's reading of
control flow holds on NCCL source it was not tuned on (excerpts quoted from NVIDIA/nccl at the
tags named)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from fabricscope.nccl.log.around import RULES
from fabricscope.nccl.messages import NEXT_ACTIONS, catalogue, format_regex

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "fabricscope" / "nccl" / "data" / "messages.json"
_spec = importlib.util.spec_from_file_location("gen_nccl_messages", ROOT / "scripts" / "gen_nccl_messages.py")
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["gen_nccl_messages"] = gen  # dataclasses look their module up while the class is built
_spec.loader.exec_module(gen)
KEYS = {
    "id",
    "project",
    "level",
    "format",
    "subsystems",
    "args",
    "file",
    "line",
    "next",
    "why",
    "since",
    "until",
}


def test_catalogue_shape() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert data["schema"] == "fabricscope.nccl_messages/v1"
    assert set(data["sources"]) == {
        "nccl",
        "aws-ofi-nccl",
        "nccl-rdma-sharp-plugins",
        "libfabric-efa",
        "pytorch",
    }
    nccl_tags = data["sources"]["nccl"]["tags"]
    assert nccl_tags[0].startswith("v2.18.") and nccl_tags[-1].startswith("v2.30.")
    assert {re.match(r"v2\.(\d+)", t).group(1) for t in nccl_tags} == {str(m) for m in range(18, 31)}
    ids = set()
    for m in data["messages"]:
        assert KEYS <= set(m) <= KEYS | {"macro", "commit"}, m  # macro: in a #define; commit: PyTorch
        assert m["level"] in ("warn", "info") and m["next"] in NEXT_ACTIONS
        assert m["project"] in data["sources"] and isinstance(m["line"], int) and m["line"] > 0
        assert m["id"] == gen.message_id(m["project"], m["level"], m["format"])
        ids.add(m["id"])
    assert len(ids) == len(data["messages"])
    per_project = {p: sum(m["project"] == p for m in data["messages"]) for p in data["sources"]}
    assert per_project["nccl"] > 1000 and min(per_project.values()) > 10, per_project


def test_every_rule_names_catalogue_entries_that_exist() -> None:
    cat = catalogue()
    for rule in RULES:
        assert rule.messages or rule.excerpts, rule.id
        for mid, excerpt in rule.messages:
            assert mid in cat.messages, (rule.id, mid)
            assert excerpt in cat.messages[mid].format, (rule.id, mid, excerpt)


@pytest.mark.parametrize(
    ("text", "project", "next_"),
    [
        # NCCL 2.19-2.23 transport/net_ib.cc: the completion error returns ncclRemoteError.
        (
            "NET/IB : Got completion from peer 10.0.0.2<55028> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
            "nccl",
            "returns_error",
        ),
        # src/transport.cc: CollNet setup failed, NCCL goes on over the point-to-point network.
        ("Cannot initialize CollNet, using point-to-point network instead", "nccl", "falls_back"),
        ("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.", "nccl", "falls_back"),
        (
            "NET/OFI Unable to find a protocol that worked.  Failing initialization.",
            "aws-ofi-nccl",
            "returns_error",
        ),
        (
            "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
            "pytorch",
            "returns_error",
        ),
    ],
)
def test_lines_match_their_entry(text: str, project: str, next_: str) -> None:
    found = catalogue().match(text)
    assert found is not None and found.project == project and found.next == next_, found


def test_text_no_entry_prints_matches_nothing() -> None:
    assert catalogue().match("Epoch 3/10: loss 0.42, 1.48s/it") is None


def test_format_regex_reads_printf() -> None:
    assert format_regex("Connect to %s failed : %s").match(
        "Connect to 10.0.0.2<45873> failed : Software caused connection abort"
    )
    assert format_regex("status=%d opcode=%d len=%u").match("status=12 opcode=0 len=0")
    assert not format_regex("status=%d opcode=%d").match("status=x opcode=0")


# Control flow as the generator reads it, on statements quoted from NVIDIA/nccl (tags in comments).
@pytest.mark.parametrize(
    ("source", "want"),
    [
        # v2.21.5-1 src/misc/socket.cc:50-51
        (
            'WARN("socketProgress: Connection closed by remote peer %s", x);\n    return ncclRemoteError;\n  }',
            "returns_error",
        ),
        # v2.21.5-1 src/transport.cc (CollNet setup): the message says what NCCL does instead.
        (
            'WARN("Cannot initialize CollNet, using point-to-point network instead");\n  comm->collNetSupport = 0;',
            "falls_back",
        ),
        # v2.30.7-1 src/misc/ibvwrap.cc: an unsupported optional call is skipped, NCCL goes on.
        ('INFO(NCCL_NET, "Call to %s not supported", name);\n    return ncclSuccess;\n  }', "goes_on"),
        (
            'WARN("Error : ring %d does not contain rank %d", c, r);\n    ret = ncclInternalError;\n    goto fail;',
            "returns_error",
        ),
    ],
)
def test_generator_reads_what_the_code_does_next(source: str, want: str) -> None:
    found = gen.scan_c(gen.PROJECTS["nccl"], "x.cc", "void f() {\n  " + source + "\n}\n")
    assert [f["next"] for f in found] == [want], found


def test_net_plugin_fallbacks_are_read_from_their_text() -> None:
    """log.parse._net_plugin decides 'falls_back' from the word 'internal' without the catalogue:
    every NCCL NET/Plugin entry that says 'internal' falls back, and none that does not."""
    for m in catalogue().messages.values():
        if m.project == "nccl" and m.format.startswith("NET/Plugin") and m.level == "info":
            if "internal" in m.format.lower():
                assert m.next == "falls_back", m


def test_pytorch_entries_name_the_commit_and_file_they_were_read_from() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    torch = data["sources"]["pytorch"]
    entries = [m for m in data["messages"] if m["project"] == "pytorch"]
    assert len(entries) > 100
    for m in entries:
        assert m["commit"] in torch["commits"] and m["file"] in torch["files"][m["commit"]], m
    files = {m["file"].rsplit("/", 1)[-1] for m in entries}
    assert {"ProcessGroupNCCL.cpp", "NCCLUtils.cpp", "NCCLUtils.hpp", "distributed_c10d.py"} <= files


# PyTorch statements as the generator reads them, quoted from pytorch/pytorch at the commits named.
def test_generator_reads_pytorch_cpp_messages() -> None:
    # 0323141f torch/csrc/distributed/c10d/NCCLUtils.cpp, NCCLComm::getNcclComm
    source = (
        "void f() {\n  if (aborted_) {\n    TORCH_CHECK_WITH(\n        DistBackendError,\n        false,\n"
        '        c10::str(\n            "NCCL communicator was aborted on rank ",\n            rank_,\n'
        '            ". ",\n            commFailureMsg));\n  }\n'
        '  LOG(INFO) << "Rank " << rank_ << ": NCCL communicator is initialized.";\n}\n'
    )
    found = gen.scan_torch("NCCLUtils.cpp", source)
    assert [(f["format"], f["line"], f["next"], f["args"]) for f in found] == [
        ("NCCL communicator was aborted on rank %s. ", 7, "returns_error", ["rank_"]),
        ("Rank %s: NCCL communicator is initialized.", 12, "goes_on", ["rank_"]),
    ]
    assert found[0]["subsystems"] == ["DistBackendError"] and found[1]["level"] == "info"


def test_generator_reads_pytorch_python_messages() -> None:
    # cf30153c (v2.13.0) torch/distributed/distributed_c10d.py, _store_based_barrier
    source = (
        "def f():\n    if late:\n        raise DistStoreError(  # noqa: B904\n"
        '            "Timed out initializing process group in store based barrier on "\n'
        '            f"rank {rank}, for key: {store_key} (world_size={world_size}, "\n'
        "        )\n"
        '    logger.info("Rank %s: Completed store-based barrier for key:%s with %s nodes.", rank, key, n)\n'
    )
    found = sorted(gen.scan_python("distributed_c10d.py", source), key=lambda f: f["line"])
    assert [(f["format"], f["line"], f["level"], f["next"]) for f in found] == [
        (
            "Timed out initializing process group in store based barrier on rank %s, for key: %s "
            "(world_size=%s, ",
            4,
            "warn",
            "returns_error",
        ),
        ("Rank %s: Completed store-based barrier for key:%s with %s nodes.", 7, "info", "goes_on"),
    ]
    assert found[0]["why"] == "raise DistStoreError" and found[1]["args"] == ["rank", "key", "n"]


def test_generator_keeps_the_pytorch_commits_a_partial_checkout_lacks(tmp_path: Path) -> None:
    """--pytorch-keep: one more commit is read without the files of the commits read before."""
    old = {
        "id": "pytorch-0000000000",
        "project": "pytorch",
        "level": "warn",
        "format": "Read at the old commit",
    }
    old |= {"commit": "old", "since": "old", "until": None, "file": "a.cpp", "line": 3}
    earlier = tmp_path / "messages.json"
    sources = {
        "pytorch": {"tags": ["old"], "files": {"old": ["a.cpp"]}, "partial": {"old": {"a.cpp": "1-9"}}}
    }
    earlier.write_text(json.dumps({"sources": sources, "messages": [old]}), encoding="utf-8")
    source = tmp_path / "partial" / "new" / "torch" / "b.cpp"
    source.parent.mkdir(parents=True)
    source.write_text(
        'void f() {\n  LOG(ERROR) << logPrefix() << "Process group watchdog thread is done now";\n}\n'
    )
    catalogue: dict[str, dict] = {}
    found: dict[str, dict] = {}
    gen.scan_pytorch(tmp_path / "partial", catalogue, found, keep=earlier)
    assert found["pytorch"]["tags"] == ["old", "new"]
    assert found["pytorch"]["files"] == {"old": ["a.cpp"], "new": ["torch/b.cpp"]}
    assert found["pytorch"]["partial"] == {"old": {"a.cpp": "1-9"}}
    assert catalogue[old["id"]] == old
    new = next(e for e in catalogue.values() if e["commit"] == "new")
    assert (new["format"], new["line"], new["since"]) == (
        "Process group watchdog thread is done now",
        2,
        "new",
    )


def test_pytorch_watchdog_and_heartbeat_wording_of_2_3_on_is_catalogued() -> None:
    """Read at aac9c440 (ProcessGroupNCCL.cpp through getNCCLComm): what follows logPrefix()."""
    formats = {m.format: m for m in catalogue().messages.values() if m.project == "pytorch"}
    for text in (
        "Process group watchdog thread terminated with exception: ",
        " failure detected by watchdog at work sequence id: %s PG status: last enqueued work: %s, "
        "last completed work: ",
        "Watchdog caught collective operation timeout: %s ran for %s milliseconds before timing out.",
    ):
        assert formats[text].since.startswith("aac9c440"), text
    assert any(f.startswith("ProcessGroupNCCL's watchdog got stuck for %s seconds") for f in formats)
