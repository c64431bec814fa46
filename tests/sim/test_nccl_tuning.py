"""NCCL's tuning tables as package data (src/fabricscope/sim/nccl_tuning.json, written by
scripts/gen_nccl_tuning.py): the JSON names its source and has every row sim/tuning.py reads, and
the generator reads real NCCL text (excerpts quoted in tests/data/nccl/, no network, no NCCL clone).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from importlib import resources
from pathlib import Path

import pytest

from fabricscope.sim import tuning

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl"
_spec = importlib.util.spec_from_file_location("gen_nccl_tuning", ROOT / "scripts" / "gen_nccl_tuning.py")
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["gen_nccl_tuning"] = gen
_spec.loader.exec_module(gen)


def _json() -> dict:
    """As installed: read through the package, the way sim/tuning.py reads it."""
    text = resources.files("fabricscope.sim").joinpath("nccl_tuning.json").read_text(encoding="utf-8")
    return json.loads(text)


def _excerpt(name: str) -> tuple[str, str]:
    """(first line naming the source, the text as it stands in the excerpt file)."""
    text = (DATA / name).read_text(encoding="utf-8")
    return text.split("\n", 1)[0], text


def test_the_json_names_its_source() -> None:
    data = _json()
    src = data["source"]
    assert data["schema"] == gen.SCHEMA and data["generator"] == "scripts/gen_nccl_tuning.py"
    assert src["repo"] == "NVIDIA/nccl" and src["file"] == "src/graph/tuning.cc"
    assert re.fullmatch(r"v\d+\.\d+\.\d+-\d+", src["tag"]) and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert tuning.NCCL_SOURCE == f"NVIDIA NCCL {src['tag']}, src/graph/tuning.cc"
    for name, table in data["tables"].items():
        first, last = table["lines"]
        assert 0 < first <= last and table["c_name"].split(".")[-1] == name, name
        assert table["shape"] == gen.shape(table["values"]), name


def test_the_json_has_every_row_tuning_reads() -> None:
    """Every algorithm, protocol, link type and GPU generation sim/tuning.py names has its row."""
    data = _json()
    n = {kind: len(names) for kind, names in data["indices"].items()}
    assert set(tuning._NCCL_ALGO) == set(tuning.NCCL_ALGOS)
    assert set(tuning._NCCL_ALGO.values()) <= set(data["indices"]["algorithm"])
    assert {p.lower() for p in tuning.PROTOS} == set(data["indices"]["protocol"])
    assert set(data["indices"]["hw"]) == {"nvlink", "pci", "net"}
    assert set(tuning.ARCHS) <= set(data["indices"]["compcap"])
    shapes = {name: table["shape"] for name, table in data["tables"].items()}
    assert shapes["baseLatencies"] == [n["algorithm"], n["protocol"]]
    assert shapes["hwLatencies"] == [n["hw"], n["algorithm"], n["protocol"]]
    assert shapes["nvlsEfficiency"] == [n["compcap"]]
    assert shapes["treeCorrectionFactor"] == [n["protocol"], 24]
    for name in ("llMaxBws", "perChMaxRingLL128Bws", "perChMaxTreeLL128Bws", "perChMaxTreeBws"):
        assert shapes[name] == [n["compcap"], 3], name
    assert shapes["perChMaxNVLSTreeBws"] == [n["compcap"], 3]
    # ... and sim/tuning.py built its tables in the shapes the model indexes.
    assert set(tuning.BASE_LAT_US) == set(tuning.NCCL_ALGOS)
    assert all(set(per) == set(tuning.NCCL_ALGOS) for per in tuning.HW_LAT_US.values())
    for per_arch in (
        tuning.PER_CH_MAX_RING_LL128,
        tuning.PER_CH_MAX_TREE_LL128,
        tuning.PER_CH_MAX_TREE,
        tuning.PER_CH_MAX_NVLSTREE,
        tuning.NVLS_EFFICIENCY,
    ):
        assert set(per_arch) == set(tuning.ARCHS)
    assert len(tuning.LL_MAX_BW) == len(tuning.ARCHS) and all(len(r) == 3 for r in tuning.LL_MAX_BW)
    assert [len(r) for r in tuning.TREE_CORRECTION] == [24] * len(tuning.PROTOS)


def test_the_generator_reads_real_tuning_cc() -> None:
    """The excerpt's tables parse to what the JSON holds, on the source lines the JSON records."""
    data = _json()
    src = data["source"]
    head, text = _excerpt("tuning_cc_excerpt.txt")
    assert f"NVIDIA/nccl {src['tag']} (commit {src['commit']}) src/graph/tuning.cc lines" in head
    _, tuner_h = _excerpt("nccl_tuner_h_excerpt.txt")
    _, struct_h = _excerpt("tuner_v5_h_excerpt.txt")
    fields = gen.struct_fields(struct_h, gen.constants_struct(tuner_h))
    assert [f[1] for f in fields][:2] == ["baseLatencies", "hwLatencies"] and len(fields) == 7
    assert gen.indices(tuner_h) == data["indices"]
    tables = gen.parse_tuning(text, fields)
    assert set(tables) == set(data["tables"])
    # The head names two source ranges: the first starts at excerpt line 2, the second after the
    # marker line.
    starts = [int(n) for n in re.findall(r"lines (\d+)-\d+", head)]
    marker = next(i for i, line in enumerate(text.split("\n"), 1) if line.startswith("// --- NVIDIA/nccl"))
    for name, table in tables.items():
        want = data["tables"][name]
        assert table["values"] == want["values"] and table["shape"] == want["shape"], name
        first, last = table["lines"]
        offset = starts[1] - (marker + 1) if first > marker else starts[0] - 2
        assert [first + offset, last + offset] == want["lines"], name
    assert tables["llMaxBws"]["values"][3] == [282.0, 90.0, 70.0]  # written 2*141.0, 2*45.0, 2*35.0
    assert tables["nvlsEfficiency"]["c_type"] == "float"  # 0.85f: the JSON keeps the decimal as written


def test_the_generator_refuses_what_it_cannot_read() -> None:
    assert gen.number(" 0.85f ") == 0.85 and gen.number(".9") == 0.9 and gen.number("2*141.0") == 282.0
    with pytest.raises(ValueError, match="not a number"):
        gen.number("NCCL_LL_MAX_BW")
    with pytest.raises(ValueError, match="ragged"):
        gen.shape([[1.0, 2.0], [3.0]])
    _, struct_h = _excerpt("tuner_v5_h_excerpt.txt")
    fields = gen.struct_fields(struct_h, "ncclTunerConstants_v5_t")
    with pytest.raises(ValueError, match="no definition"):
        gen.struct_fields(struct_h, "ncclTunerConstants_v9_t")
    _, text = _excerpt("tuning_cc_excerpt.txt")
    swapped = text.replace("// llMaxBws", "// perChMaxTreeBws", 1)
    with pytest.raises(ValueError, match="labelled perChMaxTreeBws stands where llMaxBws is"):
        gen.parse_tuning(swapped, fields)


# NVIDIA/nccl v2.29.7-1 src/graph/tuning.cc lines 170-181, inside ``ncclTunerConstantsDefaults = {``:
# releases up to 2.29 name each field (designated initialisers); 2.30 lists them by position.
DESIGNATED_2_29 = """{
  .llMaxBws = {
     {39.0, 39.0, 20.4}, /* Volta-N1/Intel-N2/Intel-N4) */
     {87.7, 22.5 /*avg of ring & tree*/, 19.0}, /* Ampere-N1/AMD-N2/AMD-N4) */
     {141.0, 45.0 /*avg of ring & tree*/, 35.0}, /* Hopper-N1/AMD-N2/AMD-N4) */
     {2*141.0, 2*45.0 /*avg of ring & tree*/, 2*35.0}, /* Blackwell-N1/AMD-N2/AMD-N4) */
  },
  .perChMaxRingLL128Bws = {
    {20.0, 20.0, 20.0}, /* Volta (N1/N2/N4) */
    {20.0, 20.0, 20.0}, /* Ampere (N1/N2/N4) */
    {36.7, 36.7, 36.7}, /* Hopper (N1/N2/N4) */
    {40.0, 40.0, 40.0}, /* Blackwell (N1/N2/N4) */
  },
}"""


def test_the_generator_reads_designated_initialisers() -> None:
    code = gen.blank_comments(DESIGNATED_2_29)
    spans: list = []
    values, _ = gen.braces(code, 0, spans)
    assert [s[2] for s in spans] == ["llMaxBws", "perChMaxRingLL128Bws"]
    assert values[0][3] == [282.0, 90.0, 70.0] and values[1][3] == [40.0, 40.0, 40.0]
    assert [gen.line_of(code, s[0]) for s in spans] == [2, 8]
    with pytest.raises(ValueError, match="unexpected 'llMaxBws ='"):
        gen.braces(code.replace(".llMaxBws", "llMaxBws"), 0)


# NVIDIA/nccl v2.30.7-1 src/transport/nvls.cc lines 154-157 and src/include/device.h line 213
NVLS_CC_154 = """#define NVLS_MEM_ALIGN_SIZE (1 << 21)
#define NVLS_NCHANNELS_SM90 16
#define NVLS_NCHANNELS_SM100 32
#define NVLS_NCHANNELS_SM100_NVL 24
"""
DEVICE_H_213 = "#define NCCL_MAX_NVLS_ARITY 32\n"


def test_the_generator_reads_the_nvls_defines() -> None:
    """The NVLS channel counts and the head limit, with the file and line the JSON records."""
    data = _json()["defines"]
    nvls = gen.defines(NVLS_CC_154, "src/transport/nvls.cc", gen.DEFINES["src/transport/nvls.cc"])
    arity = gen.defines(DEVICE_H_213, "src/include/device.h", gen.DEFINES["src/include/device.h"])
    assert {n: d["value"] for n, d in {**nvls, **arity}.items()} == {n: d["value"] for n, d in data.items()}
    assert [d["line"] + 153 for d in nvls.values()] == [data[n]["line"] for n in nvls]
    assert data["NCCL_MAX_NVLS_ARITY"] == {"value": 32, "file": "src/include/device.h", "line": 213}
    assert (tuning.NVLS_CHANNELS, tuning.NCCL_MAX_NVLS_ARITY) == (16, 32)
    with pytest.raises(ValueError, match="0 definitions of NVLS_NCHANNELS_SM90"):
        gen.defines("/* #define NVLS_NCHANNELS_SM90 16 */\n", "nvls.cc", ("NVLS_NCHANNELS_SM90",))
    with pytest.raises(ValueError, match="not an integer"):
        gen.defines("#define NCCL_MAX_NVLS_ARITY (MAXCHANNELS/2)\n", "device.h", ("NCCL_MAX_NVLS_ARITY",))
