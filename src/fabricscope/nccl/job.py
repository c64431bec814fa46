"""A job's NCCL settings: collected from where a job sets them, merged as NCCL merges them, linted,
and relabelled for reports that carry lint codes inside their own findings.

One sequence for its three users: `nccl lint` (env files, scripts, the environment, plus the
node's NCCL_CONF_FILE and /etc/nccl.conf), doctor's ``nccl.conf`` check (/etc/nccl.conf alone) and
the log reader (the settings a log shows NCCL picked up). NCCL's order is in ``initEnvFunc`` and
``setEnvFile`` (NCCL v2.30.7-1 src/misc/param.cc): the environment first, then the
NCCL_CONF_FILE file (read only when the *environment* names it), then /etc/nccl.conf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fabricscope.findings import Finding
from fabricscope.host.inventory import NCCL_CONF, Inventory
from fabricscope.host.root import Root
from fabricscope.nccl.lint import lint
from fabricscope.nccl.settings import (
    Setting,
    SettingSet,
    from_environ,
    merge,
    parse_conf_file,
    parse_env_file,
    read_script,
)

CONF_PATH = "/" + NCCL_CONF


@dataclass(frozen=True)
class JobSources:
    """What the user pointed at: (path, text) of env files and job scripts, and an environment."""

    env_files: Sequence[tuple[str, str]] = ()
    scripts: Sequence[tuple[str, str]] = ()
    environ: Mapping[str, str] | None = None

    @property
    def labels(self) -> list[str]:
        return (
            [p for p, _ in self.env_files]
            + [p for p, _ in self.scripts]
            + (["the environment"] if self.environ is not None else [])
        )


def collect(sources: JobSources, root: Root | None = None, inventory: Inventory | None = None) -> SettingSet:
    """The settings NCCL will see: the job's own, then the NCCL_CONF_FILE the job names (read
    under ``root``; a missing file is kept in ``missing`` for NCCL007), then /etc/nccl.conf."""
    groups: list[list[Setting]] = []
    unparsed: list[tuple[str, int, str]] = []
    for path, text in sources.env_files:
        found, bad = parse_env_file(text, path)
        groups.append(found)
        unparsed += bad
    reads = [read_script(text, path) for path, text in sources.scripts]
    groups += [r.settings for r in reads]
    if sources.environ is not None:
        groups.append(from_environ(sources.environ))
    job = merge(groups)
    extra: list[list[Setting]] = []
    missing: list[Setting] = []
    misread: list[tuple[str, int, str, str]] = []
    conf_texts: list[tuple[str, str, str]] = []  # (path, text, origin), read as NCCL reads them
    conf_file = job.effective.get("NCCL_CONF_FILE")
    if conf_file is not None and conf_file.value and root is not None:
        text = root.read(conf_file.value.lstrip("/"))
        if text is None:
            missing.append(conf_file)
        else:
            conf_texts.append((conf_file.value, text, "NCCL_CONF_FILE"))
    if inventory is not None and inventory.nccl_conf is not None:
        conf_texts.append((CONF_PATH, inventory.nccl_conf, "/etc/nccl.conf"))
    for path, text, origin in conf_texts:
        found, bad, odd = parse_conf_file(text, path, origin)
        extra.append(found)
        unparsed += bad
        misread += odd
    settings = merge(groups + extra)
    settings.unparsed = unparsed
    settings.missing = missing
    settings.misread = misread
    settings.not_applied = [item for r in reads for item in r.not_applied]
    settings.sourced = [item for r in reads for item in r.sourced]
    return settings


def lint_job(
    sources: JobSources,
    root: Root | None = None,
    inventory: Inventory | None = None,
    nccl_version: str | None = None,
    production: bool = True,
) -> tuple[SettingSet, list[Finding]]:
    """Collect, merge and lint: what `nccl lint` reports."""
    settings = collect(sources, root, inventory)
    return settings, lint(settings, inventory, nccl_version=nccl_version, production=production)


def relabel(
    findings: Sequence[Finding], finding_id: str, subject: Callable[[Finding], str] | None = None
) -> list[Finding]:
    """Lint findings under another report's id: the code moves into ``evidence.code`` and leads
    the message (doctor's ``nccl.conf``, the log reader's ``nccl_log.env``)."""
    out = []
    for f in findings:
        evidence = dict(f.evidence)
        evidence["code"] = f.id
        out.append(
            Finding(
                finding_id,
                f.severity,
                subject(f) if subject else f.subject,
                f"{f.id}: {f.message}",
                evidence,
                f.fix,
            )
        )
    return out
