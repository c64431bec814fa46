"""The job's secret: tokens, our launchers' tokens, munge under Slurm, and --apply without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabricscope.jobs.launch import local_specs
from fabricscope.jobs.secret import (
    MIN_TOKEN_CHARS,
    SecretError,
    check_token,
    from_environment,
    munge_credential,
    open_credential,
)
from tests.jobs.test_job_attacks import _munged, _port, _stop_munged


@pytest.mark.parametrize("weak", ["t", "secret-1", "aaaaaaaaaaaaaaaaaaaaaaaa", "4242"])
def test_a_weak_token_is_refused_saying_the_minimum(weak: str) -> None:
    with pytest.raises(SecretError, match=f"at least {MIN_TOKEN_CHARS} characters"):
        check_token(weak)
    with pytest.raises(SecretError):
        from_environment({"FABRICSCOPE_JOB_TOKEN": weak}, "torchrun")


def test_what_each_launcher_gives() -> None:
    token = "c0ffee00deadbeef1234567890abcdef"
    assert from_environment({"FABRICSCOPE_JOB_TOKEN": token}, "torchrun").source == "token"
    assert from_environment({}, "torchrun").key is None  # torchrun, mpirun: nothing
    assert from_environment({"SLURM_JOB_ID": "7"}, "slurm") is None  # Slurm: through munge
    specs = local_specs(2, ["fleet", "doctor"], port=1)
    tokens = {s.env["FABRICSCOPE_JOB_TOKEN"] for s in specs}
    assert len(tokens) == 1 and from_environment(specs[0].env, "local:2").source == "launcher"
    assert specs[0].env["FABRICSCOPE_NODELIST"] == "local0,local1"
    assert local_specs(1, ["x"], port=1)[0].env["FABRICSCOPE_JOB_TOKEN"] not in tokens  # fresh for every run


def test_a_munge_credential_opens_once_for_its_job_and_nonce(tmp_path: Path) -> None:
    munge = _munged(tmp_path)
    environ = {"FABRICSCOPE_MUNGE_SOCKET": munge["FABRICSCOPE_MUNGE_SOCKET"]}
    try:
        key = os.urandom(32)
        cred = munge_credential("4242", key, "a" * 32, os.getuid(), environ)
        assert open_credential(cred, "4242", "a" * 32, environ) == key
        with pytest.raises(SecretError, match="Replayed"):  # a second decode of the same credential
            open_credential(cred, "4242", "a" * 32, environ)
        other = munge_credential("4242", key, "b" * 32, os.getuid(), environ)
        with pytest.raises(SecretError, match="another job or request"):  # not the nonce this rank sent
            open_credential(other, "4242", "a" * 32, environ)
        with pytest.raises(SecretError, match="no munge credential"):
            open_credential("not a credential", "4242", "a" * 32, environ)
    finally:
        _stop_munged(munge)


def test_apply_without_a_job_secret_is_refused_with_how_to_set_one(tmp_path: Path) -> None:
    """torchrun-style ranks without FABRICSCOPE_JOB_TOKEN: the run judges, --apply is refused (exit 2)."""
    port = _port()
    base = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "FABRICSCOPE_JOB_TOKEN": "",
            "FABRICSCOPE_ACTION_LOG": str(tmp_path / "actions.log"), "PATH": os.environ["PATH"]}  # fmt: skip
    from tests.conftest import FIXTURE_HOSTS

    args = [sys.executable, "-m", "fabricscope", "fleet", "doctor", "--root", str(FIXTURE_HOSTS / "roce-healthy"),
            "--slurm-drain", "--apply", "--timeout", "30"]  # fmt: skip
    procs = [subprocess.Popen(args, env={**os.environ, **base, "RANK": str(r), "LOCAL_RANK": "0"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert procs[0].returncode == 2, outs[0][1][-2000:]
    err = outs[0][1].strip().splitlines()
    assert len(err) == 1 and "FABRICSCOPE_JOB_TOKEN" in err[0] and "Traceback" not in outs[0][1]
    assert not (tmp_path / "actions.log").exists()
    judged = subprocess.run([a for a in args if a != "--apply"] + ["--json"], env={**os.environ, **base, "RANK": "0", "LOCAL_RANK": "0",
                            "MASTER_PORT": str(_port()), "WORLD_SIZE": "1"}, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert judged.returncode in (0, 1) and json.loads(judged.stdout)["nodes"], judged.stderr[-2000:]
