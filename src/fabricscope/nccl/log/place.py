"""Lines without NCCL's ``host:pid:tid [dev]`` header: NCCL's words wherever they stand.

Users paste what their launcher or log shipper printed: ``[rank3]:``, ``[trainer0|0]:``,
``(WorkerDict pid=123)``, Kubernetes' ``<RFC 3339 time> stderr F``, CloudWatch's tab-separated
time, glog's ``[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629]``, PyTorch's process-group prefix
(``[PG ID 0 PG GUID 0(default_pg) Rank 3]``, earlier ``[PG 3 Rank 5]``), a Python exception's
``torch.distributed.DistBackendError:``, C++'s ``what():``, NCCL's text after PyTorch's
``Last error:``, or an issue title. :func:`place` peels those wrappers off and finds the line's
entry in the message catalogue (:mod:`fabricscope.nccl.messages`); :func:`placed_event` turns it
into the event the aggregator books, so such a line counts like the NCCL line it quotes. A line it
cannot place is counted as not recognised by the aggregator, never dropped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fabricscope.nccl.log.parse import LogEvent, classify_info, classify_warn
from fabricscope.nccl.messages import Message, catalogue

# PyTorch's process-group logPrefix() (2.3 on): [PG ID 0 PG GUID 0(default_pg) Rank 3], earlier
# [PG 3 Rank 5]; the group's id and the rank in it. triage/joblog reads the rank of the default group.
PG_PREFIX = r"\[PG (?:ID )?(\d+)(?: PG GUID [^\s\]()]+)?(?: ?\([^)\]]{0,200}\))? Rank (\d+)\]"

# One wrapper at the start of a line; peeled repeatedly (a Ray prefix, then a rank, then glog).
_WRAPPER = re.compile(
    r"\s*(?:"
    r"\(\w+ pid=\d+(?:, ip=[\d.]+)?\)"  # Ray: (WorkerDict pid=3490362)
    r"|\[(?:rank|trainer|default|worker|local_rank)?\d+(?:\|\d+)?\]:"  # [rank3]: [trainer0|0]: [default0]:
    rf"|{PG_PREFIX}"  # PyTorch's logPrefix() (2.3 on)
    r"|\[\d+,\d+\]<std(?:out|err)>:"  # mpirun --tag-output
    r"|\[(?:pod|deployment|job)/[^\]]{1,120}\]"  # kubectl logs --prefix
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?: std(?:out|err) [FP])?"  # k8s CRI / ISO time
    r"|\d{10,13}\t"  # CloudWatch epoch millis
    r"|\[?[EWIF]\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w.]+:\d+\]"  # glog, PyTorch's C++ logger
    r"|\[[\d\-: ,.]{8,30}\](?:\[\w+\](?:\[[\w.:]+\])?)?(?: -)?"  # [2024-04-30 22:06:35][INFO][training:184] -
    r"|(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning):"  # torch.distributed.DistBackendError:
    r"|what\(\):"  # std::terminate's "  what():  " line under "terminate called after throwing ..."
    r"|\d{1,5}:(?= )"  # srun --label
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [\w.]+:\d+\]"  # vLLM's logger
    r"|libfabric:\d+:\d+::\w+:\w+:\w+\(\):\d+<\w+>"  # libfabric's log: libfabric:pid:time::efa:cq:func():line<warn>
    r"|(?:NCCL )?(?:WARN|INFO|ERROR|WARNING)(?=\s)"  # a bare level (NCCL's own is handled below)
    r")\s*"
)
_NCCL_LEVEL = re.compile(r"(?:^|[\s:\]>|])NCCL (WARN|INFO|TRACE)(?: |\Z)")
# NCCL 2.0-2.3 printed no "NCCL" word: "host:pid:tid [dev] INFO ..." and "[file:line ]WARN ...".
_OLD_LEVEL = re.compile(
    r"(?:^|\s)(?:[\w.\-]+:\d+:\d+ \[\d+\] (?:[\w/.\-]+:\d+ )?|[\w/.\-]+\.\w+:\d+ )(WARN|INFO) "
)
_LAST_ERROR = "Last error:"
MAX_PLACED_CHARS = 2000  # longer text is not one NCCL message (its buffer is 1-2 KiB)
NCCL_PROJECTS = ("nccl", "nccl-rdma-sharp-plugins", "aws-ofi-nccl")


_SEGMENT = re.compile(r"(?=(?:\[\d+\] )?NCCL (?:INFO|WARN) )")  # where a pasted run of NCCL lines is cut


def segments(line: str) -> list[str] | None:
    """The NCCL lines of a line that holds several (pasted into one), or None when it holds one."""
    if line.count("NCCL INFO ") + line.count("NCCL WARN ") <= 1:
        return None
    return [part for part in _SEGMENT.split(line) if part.strip()]


def catalogued_id(message: str) -> str | None:
    """The catalogue id of an NCCL WARN's text (NCCL, its plugins), or None."""
    found = catalogue().match(message[:MAX_PLACED_CHARS], NCCL_PROJECTS)
    return found.id if found is not None else None


@dataclass(frozen=True, slots=True)
class Placed:
    """What a line without an NCCL header holds: NCCL's level (when it printed one), the message
    text, its catalogue entry (None when only the level was found), and the wrapper peeled off."""

    level: str | None
    text: str
    message: Message | None
    wrapper: str


def peel(line: str) -> tuple[str, str]:
    """(wrappers, text): the launcher/shipper/logger prefixes at the start of ``line``, and the rest."""
    pos = 0
    while pos < len(line):
        m = _WRAPPER.match(line, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
    return line[:pos].strip(), line[pos:].strip()


_SOURCE = re.compile(r"([\w/.\-]+\.(?:cc|cu|c|h|cpp|hpp):\d+)\Z")
# nccl-tests' own failure lines: "host: Test NCCL failure common.cu:874 'unhandled system error'".
_TESTS_FAILURE = re.compile(r"(?:\S+: )?(?:Test )?(NCCL|CUDA) failure (\S+:\d+) '([^']*)'")


def place(line: str) -> Placed | None:
    """The NCCL (or PyTorch, aws-ofi-nccl, libfabric) message in ``line``, or None."""
    if len(line) > MAX_PLACED_CHARS * 4:
        return None
    nccl = _NCCL_LEVEL.search(line) if "NCCL " in line else None
    if nccl is None and ("WARN " in line or "INFO " in line):
        nccl = _OLD_LEVEL.search(line)
    if nccl is not None:  # "NCCL WARN ..." after any prefix: NCCL's own level, no header
        text = line[nccl.end() :].strip()
        found = catalogue().match(text[:MAX_PLACED_CHARS], NCCL_PROJECTS)
        return Placed(nccl.group(1), text, found, line[: nccl.start() + 1].strip())
    wrapper, text = peel(line)
    if not text:
        return None
    tests = _TESTS_FAILURE.search(text) if " failure " in text else None
    if tests is not None:  # nccl-tests' check macros: the error the API returned, in its own words
        if tests.group(1) == "CUDA":  # a CUDA call failed under the test: the CUDA error, as NCCL words it
            return Placed("WARN", f"Cuda failure '{tests.group(3)}'", None, wrapper)
        return Placed(None, f"NCCL error in: {tests.group(2)}, {tests.group(3)}", None, wrapper)
    if text.startswith(_LAST_ERROR):  # PyTorch quotes ncclGetLastError(): NCCL's last WARN text
        text = text[len(_LAST_ERROR) :].strip()
        if not text:
            return Placed(None, "", None, wrapper)  # the text follows on the next line
        found = catalogue().match(text[:MAX_PLACED_CHARS])
        return Placed("WARN", text, found, wrapper)
    found = catalogue().match(text[:MAX_PLACED_CHARS])
    # WorkNCCL's logPrefix() (PyTorch 2.3 on) is an expression, not in the formats read: peeled only
    # when the text does not match with it (the "[Rank %s] ..." formats of earlier releases hold it)
    if found is None and (rank := re.match(r"\[Rank \d+\]\s*", text)) is not None:
        wrapper, text = f"{wrapper} {rank.group(0).strip()}".strip(), text[rank.end() :]
        found = catalogue().match(text[:MAX_PLACED_CHARS])
    if found is None:
        return None
    return Placed(found.level.upper() if found.project in NCCL_PROJECTS else None, text, found, wrapper)


ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")  # shape_of's table (the batch loop inlines it)
MAX_UNPLACED_SHAPES = 16384
_WORDS = re.compile(r"[A-Za-z_]{3,}")


def shape_of(line: bytes) -> bytes:
    """A line's shape: its UTF-8 bytes with every digit 0 (``bytes.translate`` runs a 256-byte
    table in C, some ten times faster than ``str.translate``'s dict per character)."""
    return line.translate(ZERO_DIGITS)


class Placer:
    """:func:`place` with memory: PyTorch's bare ``Last error:`` line (NCCL's text is the next line),
    and the shapes (digits as 0) of lines nothing placed, skipped the next time: a training log's
    lines differ mostly in their numbers, so each shape is tried once. The batch reader asks
    :meth:`skips` before decoding a line at all."""

    def __init__(self) -> None:
        self.unplaced: set[bytes] = set()
        self.pending = False

    def skips(self, shape: bytes) -> bool:
        """True when a line of this shape was set aside before and no ``Last error:`` is pending."""
        return shape in self.unplaced and not self.pending

    def __call__(self, line: str) -> tuple[Placed | None, bytes]:
        """(what the line holds or None, its shape; b"" when the shape was already known unplaced)."""
        shape = shape_of(line.encode("utf-8", "surrogatepass"))
        if self.skips(shape):
            return None, b""
        pending, self.pending = self.pending, False
        placed = place(line)
        if placed is None and pending:  # the line after a bare "Last error:" is NCCL's text
            wrapper, text = peel(line)
            placed = Placed("WARN", text, catalogue().match(text[:MAX_PLACED_CHARS]), wrapper)
        if placed is not None and not placed.text:
            self.pending = True
        return placed, shape

    def remember(self, shape: bytes) -> None:
        if len(self.unplaced) < MAX_UNPLACED_SHAPES:
            self.unplaced.add(shape)


def quoted(text: str) -> list[str]:
    """The verdict rules' excerpts (:data:`fabricscope.nccl.log.around.EXCERPT_RE`) ``text`` holds."""
    from fabricscope.nccl.log.around import EXCERPT_RE, EXCERPT_WORDS  # (the rules build on the aggregator)

    if EXCERPT_WORDS.isdisjoint(_WORDS.findall(text[:MAX_PLACED_CHARS])):
        return []
    return [m.group(0) for m in EXCERPT_RE.finditer(text[:MAX_PLACED_CHARS])]


_TORCH_WORK = re.compile(r"SeqNum=(\d+), OpType=(\w+).*?Timeout\(ms\)=(\d+)\).*? ran for (\d+) milliseconds")
_TORCH_ERROR = re.compile(r"NCCL error in: (\S+?), (.*?)(?:, NCCL version ([\d.]+)\S*)?\s*\Z")
# ncclGetErrorString() of each ncclResult_t, as PyTorch's "NCCL error in:" quotes it (src/init.cc).
RESULT_STRINGS = {
    "unhandled cuda error": 1,
    "unhandled system error": 2,
    "internal error": 3,
    "invalid argument": 4,
    "invalid usage": 5,
    "remote process exited or there was a network error": 6,
}


def torch_data(text: str, msg: Message) -> dict[str, Any]:
    """The fields of a PyTorch ProcessGroupNCCL message the verdicts read."""
    data: dict[str, Any] = {"id": msg.id, "next": msg.next, "text": text[:300]}
    work = _TORCH_WORK.search(text)
    if work is not None:
        data.update(
            kind="timeout",
            seq=int(work.group(1)),
            op=work.group(2),
            timeout_ms=int(work.group(3)),
            ran_ms=int(work.group(4)),
        )
    error = _TORCH_ERROR.search(text)
    if error is not None:
        data.update(
            kind="api_error", site=error.group(1), code=result_code(error.group(2)), version=error.group(3)
        )
    return data


def result_code(detail: str) -> int | None:
    """The ncclResult_t whose ncclGetErrorString() text ``detail`` starts with, or None."""
    detail = detail.lower()
    return next((c for s, c in RESULT_STRINGS.items() if detail.startswith(s)), None)


def placed_event(p: Placed) -> LogEvent:
    """The event a placed line stands for: NCCL's text classified as its own line would be;
    PyTorch's as ``torch`` (watchdog timeouts, errors returned by the NCCL API); anything else
    catalogued as ``catalogued``."""
    msg = p.message
    evidence = {"message_id": msg.id, "next": msg.next} if msg is not None else {}
    level: str | None = None
    where: str | None = None
    data: dict[str, Any]
    if p.level == "WARN" or (p.level is None and msg is not None and msg.project == "libfabric-efa"):
        kind, warn = classify_warn(p.text)
        level, data = "WARN", {**warn, **evidence}
        source = _SOURCE.search(p.wrapper)  # "transport/nvls.cc:165 NCCL WARN ...": where NCCL printed it
        where = source.group(1) if source else None
    elif p.level is None and msg is None and p.text.startswith("NCCL error in: "):  # nccl-tests
        error = _TORCH_ERROR.search(p.text)
        kind = "torch"
        data = {
            "id": "nccl-tests",
            "next": "returns_error",
            "text": p.text,
            "kind": "api_error",
            "code": result_code(error.group(2)) if error else None,
            "version": None,
        }
    elif p.level in ("INFO", "TRACE"):
        kind, info = classify_info(p.text)
        level, data = p.level, {**(info or {}), **evidence}
    elif msg is not None and msg.project == "pytorch":
        kind, data = "torch", torch_data(p.text, msg)
    else:
        kind, data = "catalogued", evidence
    return LogEvent(kind, level, None, None, None, None, p.text, where, prefix=p.wrapper or None, data=data)
