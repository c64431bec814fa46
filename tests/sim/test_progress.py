"""Progress of the sim commands (issue 26 item 3): a line on stderr as each piece of work is done
(each size of a sweep, each grid point, each candidate network; one collective size, one training
step or one server is one piece, modelled in under 2 s at the documented examples: no line), plain
``# ...`` lines when stderr is not a terminal (report/progress.py, as bench and sim incast); with
--json stdout is the document alone, the same document the domain function returns, and stderr
stays empty (a machine reads the document)."""

from __future__ import annotations

import json

import pytest

from tests.sim.test_cli import run  # noqa: F401  (the in-process entry point fixture)

SMALL = ("--topology", "star", "--nodes", "2", "--gpus-per-node", "1", "--gpu", "none", "--nic-rate", "1G")
TRAIN = ("--layers", "4", "--hidden", "1024", "--heads", "8", "--gpus", "16", "--tp", "8", "--pp", "1",
         "--system", "dgx-h100", "--tokens-per-step", "65536")  # fmt: skip
CASES = {
    "collective": (("collective", *SMALL, "--transport", "tcp", "--size", "1M,16M,64M"), 3),
    "compare": (("compare", *SMALL, "--size", "16M", "--vary", "transport=ib,tcp", "--no-plot"), 2),
    "network": (("network", *TRAIN, "--candidate", "ib:8x400G", "--candidate", "tcp:2x200G"), 2),
    "collective --size 1G": (("collective", *SMALL, "--transport", "tcp", "--size", "1G"), 0),
    "train": (("train", *TRAIN), 0),
    "infer": (
        (
            "infer",
            "--params",
            "70e9",
            "--tp",
            "8",
            "--batch",
            "16",
            "--nic-rate",
            "100G",
            "--transport",
            "tcp",
        ),
        0,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_progress_on_stderr_and_json_alone_on_stdout(run, name: str) -> None:  # noqa: F811
    args, lines = CASES[name]
    text = run(*args)
    assert text.exit_code == 0, text.output
    shown = text.stderr.splitlines()
    assert len(shown) == lines and all(line.startswith(f"# sim {name}") for line in shown), (
        text.stderr
    )  # one step: none
    if lines > 1:
        assert [line.split(":")[0] for line in shown] == [
            f"# sim {name} {k}/{lines} done" for k in range(1, lines + 1)
        ]
    assert not any(line.startswith("# sim") for line in text.stdout.splitlines())
    doc = run(*args, "--json")
    assert doc.exit_code == 0 and doc.stderr == "", doc.stderr
    assert json.loads(doc.stdout)["schema"].startswith("fabricscope.sim")


def _steady(doc):
    """The document without the solver's own wall time (the one figure that differs run to run)."""
    doc = json.loads(json.dumps(doc))

    def drop(x):
        if isinstance(x, dict):
            return {k: drop(v) for k, v in x.items() if k != "wall_s"}
        return [drop(v) for v in x] if isinstance(x, list) else x

    return drop(doc)


def test_json_is_the_domain_document(run) -> None:  # noqa: F811
    """--json prints what the model returns, progress or not."""
    from fabricscope.sim.compare import run_grid
    from fabricscope.sim.network import compare
    from fabricscope.sim.scenario import run_collective

    base = {"topology": "star", "nodes": 2, "gpus_per_node": 1, "gpu": "none", "nic_rate": "1G"}
    got = json.loads(run(*CASES["collective"][0], "--json").stdout)
    assert _steady(got) == _steady(run_collective({**base, "transport": "tcp", "size": "1M,16M,64M"}))
    got = json.loads(run(*CASES["compare"][0], "--json").stdout)
    want = run_grid("collective", {**base, "size": "16M"}, {"transport": ["ib", "tcp"]})
    assert _steady(got) == _steady(want)
    got = json.loads(run(*CASES["network"][0], "--json").stdout)
    p = dict(zip(TRAIN[0::2], TRAIN[1::2]))
    params = {k.lstrip("-").replace("-", "_"): v for k, v in p.items()}
    params["tokens_per_step"] = float(params["tokens_per_step"])
    want = compare("train", params, ["ib:8x400G", "tcp:2x200G"])
    assert [r["tokens_per_s"] for r in got["rows"]] == [
        r["tokens_per_s"] for r in json.loads(json.dumps(want))["rows"]
    ]
