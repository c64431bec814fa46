"""The NCCL log reader's fast paths give what feeding each line alone gives.

The batch path (``logbatch``) learns line beginnings, channel specs and rests from the lines it
parses and then skips parsing; reading many files (``read_files``) merges per-file aggregators,
over worker processes or not. Both are held here to the plain line-by-line result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabricscope.nccl.log.aggregate import LogAggregator
from fabricscope.nccl.log.read import read_files
from fabricscope.nccl.log.report import build_report
from tests.conftest import samples_dir

HEADERS = [
    "h1:10:11 [0]",
    "h1:10:12 [1]",
    "h1:10:13",
    "[0] h2:20:21 [3]",
    "[2026-05-05 06:16:47] h3:30:31 [2] transport/net.cc:12",
    "a NCCL h4:1:2 [0]",  # the first " NCCL " is not the level: not an NCCL line
    "garbage",
]
MESSAGES = [
    "AllReduce: opCount 1a sendbuff 0x7f00",
    "AllReduce: 33554432 Bytes -> Algo RING proto SIMPLE",
    "New proxy send connection 3 from local rank 1",
    "Connected to proxy localRank 1 -> connection 0x7f",
    "Connected all rings, use ring PXN 0 GDR 1",
    "Connected",
    "GPU Direct RDMA Enabled for GPU 0 / HCA 1 (distance 4 <= 4)",
    "GPU ok",
    "Channel 05/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA",
    "Channel 05/0 : 2[2] -> 3[3] [receive] via NET/IB/3/GDRDMA",
    "Channel 06/1 : 3[3] -> 4[4] via P2P/CUMEM/read",
    "Channel 07 : 3 -> 4 via SHM/direct/direct",
    "Channel 5/ : 3[3] -> 4[4] via P2P/IPC",
    "Channel 05/0 : ",
    "Channel 05/0 : x -> y via P2P/IPC",
    "Channel",
    "Ring 00 : 0 -> 1 via P2P/IPC",
    "transport/net.cc:1227 -> 6",
    "proxy.cc:858 -> 6 [Proxy Thread]",
    "NCCL version 2.19.3+cuda12.3",
    "NCCL_IB_HCA set by environment to mlx5_0",
    "comm 0x55 rank 3 nranks 8 cudaDev 3 busId 1b000 - Init START",
    "comm 0x55 rank 3 nranks 8 cudaDev 3 busId 1b000 - Init COMPLETE",
    "Using network IB",
    "NET/IB : No device found.",
    "NET/Socket : Using [0]ens3:10.0.0.1<0>",
    "",
    " leading space",
]
LEVELS = ["INFO", "INFO", "INFO", "WARN", "TRACE"]
# Real lines of every sample log (whole and cut in half), as the reader meets them.
REAL = [
    ln
    for p in sorted(samples_dir().glob("nccl_log_*.txt"))
    for ln in p.read_text(errors="replace").splitlines()
]
ENDINGS = ["", "", "", "\r", "  ", " x"]


@st.composite
def log_lines(draw) -> str:
    kind = draw(st.integers(0, 11))
    if kind >= 10:
        line = draw(st.sampled_from(REAL))
        return line if kind == 10 else line[: len(line) // 2]
    if kind == 0:
        return draw(
            st.sampled_from(["NCCL version 2.7.6+cuda11.1", "[0] NCCL version 2.8.3", "", "\x00 junk"])
        )
    if kind == 1:
        return draw(st.text(max_size=40))
    header = draw(st.sampled_from(HEADERS))
    level = draw(st.sampled_from(LEVELS))
    message = draw(st.sampled_from(MESSAGES))
    return f"{header} NCCL {level} {message}{draw(st.sampled_from(ENDINGS))}"


def _one_by_one(lines: list[str]):
    agg = LogAggregator()
    agg.begin_file("x")
    for line in lines:
        agg.feed(line)
    agg.end_file()
    return build_report(agg).to_dict()


def _batches(lines: list[str], cuts: list[int], as_bytes: bool):
    agg = LogAggregator()
    stats = agg.begin_file("x")
    stats.lines += len(lines)
    stats.binary_lines += sum(
        1 for ln in lines if "\x00" in ln or "\ufffd" in ln
    )  # iter_line_batches counts these
    bounds = [0, *sorted(c % (len(lines) + 1) for c in cuts), len(lines)]
    for start, end in zip(bounds, bounds[1:]):
        part = lines[start:end]
        if as_bytes and all(ln.isascii() for ln in part):
            part = [ln.encode() for ln in part]
        agg.feed_batch(part, stats)
    agg.end_file()
    return build_report(agg).to_dict()


@settings(max_examples=300, deadline=None)
@given(st.lists(log_lines(), max_size=80), st.lists(st.integers(0, 1000), max_size=4), st.booleans())
def test_batch_path_agrees_with_one_line_at_a_time(lines: list[str], cuts: list[int], as_bytes: bool) -> None:
    """Repeated lines exercise every cache: plain beginnings, continuations, channel specs and rests."""
    lines = [ln.replace("\n", " ") for ln in lines]
    assert _batches(lines, cuts, as_bytes) == _one_by_one(lines)


# The whole-chunk path: lines that are plain once their header and first word are known, and lines
# built to pass some of its counts while not being plain (a header alone, two " NCCL INFO " on one
# line beside a line with none, a continuation, an unknown or non-NCCL header, a WARN).
PLAIN = [f"{h} NCCL INFO {m}" for h in HEADERS[:3] for m in MESSAGES[:4]]
TRAPS = [
    "h1:10:11 [0]",
    "AllReduce: opCount 1b",
    "h1:10:11 [0] NCCL INFO AllReduce: x NCCL INFO h1:10:12 [1]",
    "h1:10:11 [0] NCCL INFO AllReduce: x NCCL INFO AllReduce: y",
    "h1:10:11 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "h1:10:11 [0] NCCL INFO Channel 05/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA",
    "h1:10:11 [0] NCCL INFO  AllReduce: x",
    "h1:10:11 [0] NCCL INFO AllReduce:",
    "h1:10:11 [0] NCCL WARN AllReduce: x",
    "h9:90:91 [0] NCCL INFO AllReduce: x",
    "h1:10:99 [0] NCCL INFO AllReduce: x",
    "a NCCL h4:1:2 [0] NCCL INFO AllReduce: x",
    "x h1:10:11 [0] NCCL INFO AllReduce: x",
    "h1:10:11 [0] NCCL NCCL INFO AllReduce: x",
    "h1:10:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
]


def _chunks(lines: list[str], cuts: list[int]):
    """What feed_file does: clean runs of lines as one chunk (every length tried whole), others
    line by line."""
    from unittest import mock

    from fabricscope.nccl.log import batch as logbatch

    agg = LogAggregator()
    stats = agg.begin_file("x")
    stats.lines += len(lines)
    stats.binary_lines += sum(1 for ln in lines if "\x00" in ln or "\ufffd" in ln)
    bounds = [0, *sorted(c % (len(lines) + 1) for c in cuts), len(lines)]
    with mock.patch.object(logbatch, "WHOLE_BATCH_MIN_LINES", 1):
        for start, end in zip(bounds, bounds[1:]):
            part = lines[start:end]
            if part and all(ln.isascii() and "\x00" not in ln for ln in part):
                agg.feed_chunk("\n".join(part).encode(), len(part), stats)
            else:
                agg.feed_batch(part, stats)
    agg.end_file()
    return build_report(agg).to_dict(), agg._batch.whole_chunks if agg._batch else 0


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(PLAIN), st.sampled_from(PLAIN), st.sampled_from(TRAPS), log_lines()),
        max_size=60,
    ),
    st.lists(st.integers(0, 1000), max_size=5),
)
@example(PLAIN + PLAIN, [len(PLAIN)])
@example(PLAIN + ["h1:10:11 [0]", PLAIN[0]], [len(PLAIN)])
@example(PLAIN + [TRAPS[2], TRAPS[1]], [len(PLAIN)])
def test_whole_chunk_path_agrees_with_one_line_at_a_time(lines: list[str], cuts: list[int]) -> None:
    lines = [ln.replace("\n", " ") for ln in lines]
    assert _chunks(lines, cuts)[0] == _one_by_one(lines)


def test_whole_chunk_path_takes_clean_chunks_and_refuses_traps() -> None:
    """The whole-chunk path is really taken (the test above would pass without it), and each trap
    placed in an otherwise clean chunk sends that chunk down the per-line loop."""
    report, whole = _chunks(PLAIN + PLAIN, [len(PLAIN)])
    assert whole == 1 and report == _one_by_one(PLAIN + PLAIN)
    for trap in TRAPS:
        lines = PLAIN + [PLAIN[0], trap, PLAIN[1]]
        report, whole = _chunks(lines, [len(PLAIN)])
        assert whole == 0, trap
        assert report == _one_by_one(lines), trap
    # A header may carry a prefix ("AllReduce: q" here): a line with two " NCCL INFO " whose middle
    # part is such a header, beside a line with none, passes every count; only the newline between
    # each two " NCCL INFO " tells.
    prefixed = "AllReduce: q h1:10:11 [0]"
    learn = [*PLAIN, f"{prefixed} NCCL INFO AllReduce: opCount 1a"]
    lines = [
        *learn,
        PLAIN[0],
        f"h1:10:11 [0] NCCL INFO {prefixed} NCCL INFO AllReduce: y",
        "AllReduce: z",
        PLAIN[1],
    ]
    report, whole = _chunks(lines, [len(learn)])
    assert whole == 0
    assert report == _one_by_one(lines)


# The whole-channel-chunk path: channel lines of known headers (with and without a device, so
# with and without a rank to book on), and lines built to pass some of its checks while not being
# channel lines the per-line loop would count.
CHANNEL_HEADS = ["h1:10:11 [0]", "h1:10:12 [1]", "h1:10:13", "[0] h2:20:21 [3]"]
CHANNEL_RESTS = [
    "05/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA",
    "05/0 : 2[2] -> 3[3] [receive] via NET/IB/3/GDRDMA",
    "06/1 : 3[3] -> 4[4] via P2P/CUMEM/read",
    "07 : 3 -> 4 via SHM/direct/direct",
    "08/0 : 1[1] -> 2[2] via P2P/IPC\r",
]
CHANNELS = [f"{h} NCCL INFO Channel {r}" for h in CHANNEL_HEADS for r in CHANNEL_RESTS]
CHANNEL_TRAPS = [
    "h1:10:11 [0] NCCL INFO Channel 5/ : 3[3] -> 4[4] via P2P/IPC",  # malformed spec
    "h1:10:11 [0] NCCL INFO Channel 05/0 : x -> y via P2P/IPC",  # malformed rest
    "h1:10:11 [0] NCCL INFO Channel 05/0 -> 3[3] via P2P/IPC",  # no " : "
    "h1:10:11 [0] NCCL INFO Channel 05/0 : ",
    "h1:10:11 [0] NCCL INFO Channel  05/0 : 3[3] -> 4[4] via P2P/IPC",
    "h1:10:11 [0] NCCL INFO Channel",
    "h1:10:11 [0] NCCL WARN Channel 05/0 : 3[3] -> 4[4] via P2P/IPC",
    "h1:10:11 [0] NCCL INFO Ring 00 : 0 -> 1 via P2P/IPC",
    "h9:90:91 [0] NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC",  # unknown header
    "h1:10:99 [0] NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC",  # a new thread
    "h1:10:11 [0] NCCL INFO Channel 05/0 : 1 NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC",
    "h1:10:11 [0]",
    "x h1:10:11 [0] NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC",
    "h1:10:11 [0] NCCL INFO AllReduce: opCount 1a",
    "",  # a blank line: it merges two channel lines' pieces, and the rest right-strips to a good one
    "  ",
]
# A rank's number, so its channels are booked on it (h1:10:13 has no device: counted, not booked).
RANK_LINES = [
    "h1:10:11 [0] NCCL INFO comm 0x55 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init START",
    "[0] h2:20:21 [3] NCCL INFO comm 0x56 rank 3 nranks 8 cudaDev 3 busId 1c000 - Init START",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(CHANNELS), st.sampled_from(CHANNELS), st.sampled_from(CHANNEL_TRAPS),
                       st.sampled_from(RANK_LINES), log_lines()), max_size=60),
    st.lists(st.integers(0, 1000), max_size=5),
    st.booleans(),
)  # fmt: skip
@example(CHANNELS + CHANNELS, [len(CHANNELS)], False)
@example(CHANNELS + CHANNELS[::-1] + CHANNELS, [len(CHANNELS), 2 * len(CHANNELS)], True)
@example(CHANNELS + [CHANNEL_TRAPS[10], CHANNEL_TRAPS[11]], [len(CHANNELS)], False)
def test_whole_channel_chunks_agree_with_one_line_at_a_time(
    lines: list[str], cuts: list[int], learn: bool
) -> None:
    """Channel lines counted per chunk and booked later land where the per-line loop puts them:
    the same counts per rank and transport, and an unnumbered rank's local rank from its first line."""
    lines = [ln.replace("\n", " ") for ln in lines]
    if learn:
        lines = RANK_LINES + CHANNELS + lines
    assert _chunks(lines, cuts)[0] == _one_by_one(lines)


def test_whole_channel_chunks_are_taken_and_traps_refused() -> None:
    """The path is really taken (the property test would pass without it): a chunk of known
    channel lines, and one holding a new well-formed spec or rest (learnt in place), go whole;
    each trap in an otherwise clean chunk sends that chunk down the per-line loop."""
    learn = RANK_LINES + CHANNELS
    for more in ([], ["h1:10:11 [0] NCCL INFO Channel 31/1 : 0[0] -> 7[7] via P2P/CUMEM/read"]):
        lines = learn + CHANNELS[::-1] + more
        report, whole = _chunks(lines, [len(learn)])
        assert whole == 1 and report == _one_by_one(lines)
    for trap in CHANNEL_TRAPS:
        lines = [*learn, CHANNELS[0], trap, CHANNELS[1]]
        report, whole = _chunks(lines, [len(learn)])
        assert whole == 0, trap
        assert report == _one_by_one(lines), trap


def _generated(path: Path, size: int, ranks: int, seed: int) -> Path:
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl_log_throughput.py"
    spec = importlib.util.spec_from_file_location("nccl_log_throughput", bench)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(str(path), size, ranks, seed=seed)
    return path


@settings(max_examples=5, deadline=None)
@given(st.lists(st.lists(log_lines(), max_size=40), min_size=2, max_size=4))
def test_files_over_worker_processes_give_the_one_core_result(
    tmp_path_factory, files: list[list[str]]
) -> None:
    folder = tmp_path_factory.mktemp("logs")
    paths = []
    for index, lines in enumerate(files):
        path = folder / f"rank{index}.log"
        path.write_text("\n".join(ln.replace("\n", " ") for ln in lines) + "\n", errors="replace")
        paths.append(str(path))
    one = build_report(read_files(paths, jobs=1)).to_dict()
    many = build_report(read_files(paths, jobs=3)).to_dict()
    assert json.dumps(many, sort_keys=True) == json.dumps(one, sort_keys=True)


def test_real_and_generated_logs_over_worker_processes(tmp_path: Path) -> None:
    paths = [str(p) for p in sorted(samples_dir().glob("nccl_log_*.txt"))]
    paths += [str(_generated(tmp_path / f"job{seed}.log", 400_000, 16, seed)) for seed in (1, 2)]
    for expect in ("auto", "rdma"):
        one = build_report(read_files(paths, expect, jobs=1)).to_dict()
        many = build_report(read_files(paths, expect, jobs=4)).to_dict()
        assert many == one
        assert [f["name"] for f in one["files"]] == paths  # merged in the order given


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40_000), min_size=1, max_size=12))
@example([16384])
@example([16385])
@example([3, 16384, 16385, 2])
@example([16384, 16384, 16384])
def test_overlong_check_agrees_with_measuring_every_line(lengths: list[int]) -> None:
    from fabricscope.nccl.log.parse import MAX_LINE_CHARS
    from fabricscope.nccl.log.read import _overlong

    body = b"\n".join(b"a" * n for n in lengths)
    assert _overlong(body) == (max(lengths) > MAX_LINE_CHARS)


PIECES = [b"a", b"NCCL INFO x", b"\xc3\xa9", b"\xff", b"\x00", b"\n", b"\n", b"\r\n"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(PIECES), st.integers(1, 3).map(lambda k: b"z" * (16384 * k - 1))),
        max_size=30,
    ),
    st.sampled_from([1, 7, 4096, 16384, 70000]),
)
@example([b"z" * 16383, b"\n", b"a"], 7)
@example([b"z" * 16385, b"\n", b"a", b"\n"], 16384)
def test_chunking_does_not_change_lines_or_counts(pieces: list[bytes], chunk_bytes: int) -> None:
    """Whatever the chunk size, the same lines (overlong ones dropped) and the same counts: the
    reader's chunking (a carried partial line, an overlong line cut across chunks) is invisible."""
    import io

    from fabricscope.nccl.log.aggregate import FileStats
    from fabricscope.nccl.log.read import iter_lines

    data = b"".join(pieces)

    def read(size: int):
        stats = FileStats(name="x")
        lines = list(iter_lines(io.BytesIO(data), stats, chunk_bytes=size))
        return lines, (stats.bytes, stats.lines, stats.overlong_lines, stats.binary_lines, stats.truncated)

    assert read(chunk_bytes) == read(1 << 22)


@pytest.mark.parametrize("new_rests", [True, False], ids=["new-specs-and-rests", "new-specs"])
def test_channel_chunk_sets_stay_bounded_and_right_on_a_hostile_log(new_rests: bool) -> None:
    """Every line a new spec, and a new rest or not (a hostile or garbled log): the channel path's
    sets are caches with a cap, cleared only where nothing counted still names them; the result
    is the one of one line at a time."""
    from unittest import mock

    from fabricscope.nccl.log import batch as logbatch

    lines = [*RANK_LINES]
    for i in range(3000):
        peer = i + 1 if new_rests else 1
        lines.append(f"h1:10:11 [0] NCCL INFO Channel {i}/0 : 0[0] -> {peer}[1] via P2P/IPC")
    with mock.patch.object(logbatch, "_CACHE_LIMIT", 64):
        report, whole = _chunks(lines, [len(RANK_LINES) + 1, *range(40, len(lines), 40)])
        agg = LogAggregator()
        stats = agg.begin_file("x")
        stats.lines += len(lines)
        for start in range(0, len(lines), 40):
            part = lines[start : start + 40]
            agg.feed_chunk("\n".join(part).encode(), len(part), stats)
        reader = agg._batch
        assert reader is not None
        sizes = (
            len(reader.good_specs),
            len(reader.good_rests),
            len(reader.good_rest_set),
            len(reader.channel_heads),
        )
        assert max(sizes) <= 64, sizes
        agg.end_file()
    assert whole > 0
    assert report == _one_by_one(lines)
