"""A stranger on the job's network, run as its own process: ``python -m tests.jobs.stranger MODE PORT ARG...``.

It knows the job's port (as anyone could: 29500 under torchrun, derived from the job id under
Slurm) but not its secret, and tries, until killed, what the review of issue 20 did:

* ``fleet`` DOCFILE: write DOCFILE's document as rank 1's, over and over (torch's TCPStore keys of
  the gather before the fix; our store's ``rank/1/gather`` keys, unsigned, after).
* ``pickle`` CANARY: join the process group as rank 1 and send a pickle that creates CANARY when
  unpickled (``all_gather_object``, as rank 0 used to do).
* ``matrix`` LOGFILE: publish its own endpoint (a listener on 127.0.0.2) as rank 1's, over and
  over, and write a line to LOGFILE for every connection it receives (traffic moved to it).
* ``incast`` JOBID: join ``bench incast`` as rank 2 with the hello of before the fix (the token was
  the Slurm job id), and with an unsigned hello of after.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import time
import zlib

from fabricscope.jobs.frames import recv_frame, send_frame


class _Canary:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _torch_store(port: int):
    try:
        from datetime import timedelta

        from torch.distributed import TCPStore

        return TCPStore("127.0.0.1", port, 1, False, timeout=timedelta(seconds=1), wait_for_workers=False)
    except Exception:
        return None


def _our_store_write(port: int, key: str, value: str) -> None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            greeting = recv_frame(sock, time.monotonic() + 1)
            send_frame(
                sock,
                {"op": "hello", "rank": 1, "node": "local1", "nonce": secrets.token_hex(16), "mac": None},
                time.monotonic() + 1,
            )
            recv_frame(sock, time.monotonic() + 1)
            send_frame(
                sock, {"op": "set", "key": key, "value": value, "seq": 1, "mac": None}, time.monotonic() + 1
            )
            recv_frame(sock, time.monotonic() + 1)
            del greeting
    except Exception:
        pass


def fleet(port: int, docfile: str) -> None:
    doc = open(docfile).read()
    while True:
        store = _torch_store(port)
        if store is not None:
            try:
                for _ in range(100000):
                    store.set("gather/1/node", b"local1")
                    store.set("gather/1/document", zlib.compress(doc.encode()))
                    store.set("gather/1", "document,node")
            except Exception:
                pass
        _our_store_write(port, "rank/1/gather/document/0", doc)
        _our_store_write(port, "rank/1/gather", json.dumps({"node": "local1", "items": {"document": 1}}))
        time.sleep(0.01)


def pickle_rank(port: int, canary: str) -> None:
    import datetime

    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=1,
        world_size=2,
        timeout=datetime.timedelta(seconds=20),
    )
    try:
        dist.all_gather_object([None, None], _Canary(canary))
    finally:
        dist.destroy_process_group()


def matrix(port: int, logfile: str) -> None:
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.2", 0))
    listener.listen(16)
    endpoint = {"addr": "127.0.0.2", "port": listener.getsockname()[1], "host": "local1"}

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            with open(logfile, "a") as log:
                log.write("connection\n")
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    while True:
        store = _torch_store(port)
        if store is not None:
            try:
                for _ in range(100000):
                    store.set("ep/1", json.dumps(endpoint))
            except Exception:
                pass
        _our_store_write(port, "rank/1/ep", json.dumps(endpoint))
        time.sleep(0.01)


def incast(port: int, job_id: str) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                send_frame(sock, {"hello": "fabricscope-incast/1", "rank": 2, "token": job_id, "host": "stranger",
                                  "nonce": secrets.token_hex(16)}, time.monotonic() + 1)  # fmt: skip
                challenge = recv_frame(sock, time.monotonic() + 2)
                send_frame(sock, {"mac": None, "challenge": challenge.get("nonce")}, time.monotonic() + 1)
                while sock.recv(65536):  # answer nothing; hold the slot as long as rank 0 lets us
                    pass
        except Exception:
            time.sleep(0.02)


if __name__ == "__main__":
    mode, port, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    {"fleet": fleet, "pickle": pickle_rank, "matrix": matrix, "incast": incast}[mode](port, arg)
