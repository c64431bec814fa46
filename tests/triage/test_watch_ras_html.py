"""job watch on recorded dumps, RAS readers on NCCL's own examples and a real 2.28.9 capture, the HTML page."""

from __future__ import annotations

import json

import pytest

from fabricscope.report.job import html_page
from fabricscope.triage.collect import collect
from fabricscope.triage.document import build
from fabricscope.triage.ras import parse, ras_verdict
from fabricscope.triage.watch import watch
from tests.triage.conftest import DATA


def test_watch_writes_one_diagnosis_and_metrics(case, tmp_path) -> None:
    pytest.importorskip("prometheus_client")
    dumps = case("stop", with_log=False)
    seen = []
    state = watch(
        [dumps],
        interval_s=1,
        stall_s=10,
        out_dir=tmp_path,
        textfile=tmp_path / "job.prom",
        ras_addr=None,
        duration_s=3,
        exit_on_stall=False,
        on_diagnosis=lambda doc, path: seen.append(path),
    )
    assert len(seen) == 1 and state.stalled and state.polls >= 2  # once per stall, not once per poll
    doc = json.loads(seen[0].read_text())
    assert doc["verdict"]["class"] == "stopped" and doc["verdict"]["culprits"][0]["rank"] == 2
    text = (tmp_path / "job.prom").read_text()
    assert 'fabricscope_job_suspect{class="stopped",host="h3",rank="2"} 1.0' in text
    assert "fabricscope_job_stalled 1.0" in text


def test_ras_text_and_json_from_a_real_h200_job() -> None:
    text = parse((DATA / "h200" / "ras_status_2.28.9.txt").read_text(), "t")
    assert (
        text is not None
        and text.nccl_version == "2.28.9"
        and text.statuses == [("RUNNING", "OK")]
        and not text.errors
    )
    js = parse((DATA / "h200" / "ras_status_2.28.9.json").read_bytes(), "j")
    assert (
        js is not None
        and js.nccl_version == "2.28.9"
        and js.rank_hosts == {0: "192.0.2.2"}
        and not js.missing
    )


def test_ras_examples_from_nccls_guide() -> None:
    mismatch = parse((DATA / "ras_docs_mismatch.txt").read_text(), "poll1")
    assert mismatch is not None and "MISMATCH" in mismatch.errors
    assert set(mismatch.counts.values()) == {6649} and sorted(mismatch.counts) == [0, 2, 3, 4, 5, 7]
    dead = parse((DATA / "ras_docs_dead.txt").read_text(), "poll2")
    assert (
        dead is not None
        and dead.missing == {21}
        and dead.dead == ["process 3487984 on node 172.16.64.213 (GPU 5)"]
    )
    js = parse((DATA / "ras_docs_missing.json").read_text(), "j")
    assert js is not None and js.missing == {1} and not js.dead_ranks and js.rank_hosts[1] == "172.16.64.245"


def test_one_ras_poll_is_not_a_verdict_two_unmoved_polls_are() -> None:
    first = parse((DATA / "ras_docs_mismatch.txt").read_text(), "poll1")
    suspects, evidence = ras_verdict([first])
    assert suspects == [] and any("one poll only" in e for e in evidence)
    second = parse((DATA / "ras_docs_mismatch.txt").read_text(), "poll2")
    suspects, evidence = ras_verdict([first, second])
    assert suspects == [0, 2, 3, 4, 5, 7] and any("unchanged across two polls" in e for e in evidence)


def test_html_page_marks_the_culprit(case) -> None:
    doc = build(collect([case("skip")]))
    page = html_page(doc)
    assert page.startswith("<!doctype html>") and "<svg" in page and "&gt; rank 2" in page
    assert doc["timeline"]["culprits"] == [2] and set(doc["timeline"]["ranks"]) == {"0", "1", "2", "3"}


def test_inspector_jsonl_from_nccls_readme_is_read_and_reported(tmp_path) -> None:
    from fabricscope.triage.inspector_adapter import read_records

    lines = (DATA / "inspector_readme_example.jsonl").read_text().splitlines()
    records = read_records([*lines, "{cut", "not json"])
    assert [(r.rank, r.host, r.coll, r.seq, r.exec_us, round(r.busbw_gbs or 0, 3)) for r in records] == [
        (2, "example-hostname", "AllReduce", 1407, 61974.0, 485.119)
    ]
    (tmp_path / "inspector.jsonl").write_text("\n".join(lines) + "\n")
    inputs = collect([tmp_path])
    assert len(inputs.inspector) == 1 and not inputs.skipped


def test_ras_query_speaks_nccls_text_protocol() -> None:
    """A loopback server answering as NCCL's RAS thread does (src/ras/client_support.cc: "OK" to SET
    FORMAT, then the status; the bytes of the real 2.28.9 capture) gets SET FORMAT json and STATUS."""
    import socket
    import threading

    from fabricscope.triage.ras import query

    capture = (DATA / "h200" / "ras_status_2.28.9.json").read_bytes()  # starts with the wire's "OK\n"
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(10)
            data = b""
            while b"STATUS\n" not in data:
                chunk = conn.recv(1024)
                if not chunk:
                    break
                data += chunk
            got.append(data)
            conn.sendall(capture)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        reply = query("127.0.0.1", server.getsockname()[1], timeout_s=10)
    finally:
        thread.join(timeout=10)
        server.close()
    assert got == [b"SET FORMAT json\nSTATUS\n"]
    snap = parse(reply, "live")
    assert snap is not None and snap.nccl_version == "2.28.9" and snap.rank_hosts == {0: "192.0.2.2"}
