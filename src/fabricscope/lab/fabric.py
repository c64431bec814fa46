"""Build, change, inspect and remove labs through the kernel's own tools (ip, tc, nft).

Idempotence and crash safety: ``up`` writes the state file *before* creating anything, and
every object lives in a namespace named with the lab's prefix. ``down`` therefore finds a lab
by its state file *and* by listing namespaces with its prefix, kills the processes still
inside them and deletes them; deleting a namespace deletes its interfaces, bridges, qdiscs and
nftables tables with it. A failed ``up`` undoes itself the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fabricscope.host.tempfiles import atomic_write
from fabricscope.lab import lldp, slurm
from fabricscope.lab.plan import HostPlan, Plan, Port, Uplink, build_plan, tbf_args
from fabricscope.lab.runner import CommandError, Runner, package_for
from fabricscope.lab.spec import PREFIX, LabError, LabSpec, check_name, format_rate, host_index

STATE_ENV = "FABRICSCOPE_LAB_DIR"
DEFAULT_STATE_DIR = "/run/fabricscope/lab"  # tmpfs, like /run/netns: both vanish at reboot
STATE_SCHEMA = "fabricscope.lab-state/v1"
STATUS_SCHEMA = "fabricscope.lab/v1"
NFT_TABLE = "fabricscope"
LOSS_SCALE = 1_000_000  # nft numgen modulus: loss resolution of 0.0001%
_NAME_CHAR = re.compile(r"[a-z0-9]")  # what a lab name may hold (lab.spec.NAME_RE)


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_DIR)


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (it creates network namespaces); run it with sudo")


@dataclass
class LinkSetting:
    """Shaping of one host's link (all its NICs) or one leaf's uplink, as changed by ``lab set``."""

    rate_bps: int | None
    loss_pct: float = 0.0
    queue_bytes: int | None = None  # the switch port's queue towards the host (None: 50 ms at the rate)

    def to_dict(self) -> dict[str, Any]:
        return {"rate_bps": self.rate_bps, "loss_pct": self.loss_pct, "queue_bytes": self.queue_bytes}


@dataclass
class LabState:
    spec: LabSpec
    status: str = "creating"  # creating -> up
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    links: dict[str, LinkSetting] = field(default_factory=dict)  # host or leaf name -> setting
    slurm_dir: str | None = None  # the private directory of the lab's Slurm (lab/slurm.py)

    @property
    def plan(self) -> Plan:
        return build_plan(self.spec)

    def link(self, name: str) -> LinkSetting:
        """The current setting of a host link or leaf uplink (spec defaults unless changed)."""
        if name in self.links:
            return self.links[name]
        if name.startswith("leaf"):
            return LinkSetting(self.spec.effective_uplink_bps, 0.0)
        return LinkSetting(self.spec.link_rate_bps, self.spec.loss_for(name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": STATE_SCHEMA,
            "spec": self.spec.model_dump(mode="json"),
            "status": self.status,
            "created": self.created,
            "links": {k: v.to_dict() for k, v in self.links.items()},
            **({"slurm_dir": self.slurm_dir} if self.slurm_dir else {}),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LabState:
        if doc.get("schema") != STATE_SCHEMA:
            raise LabError(f"lab state has schema {doc.get('schema')!r}, expected {STATE_SCHEMA}")
        spec = LabSpec.model_validate(doc["spec"])
        links = {
            str(k): LinkSetting(v.get("rate_bps"), float(v.get("loss_pct") or 0.0), v.get("queue_bytes"))
            for k, v in (doc.get("links") or {}).items()
        }
        recorded = doc.get("slurm_dir")
        return cls(
            spec=spec,
            status=str(doc.get("status", "creating")),
            created=str(doc.get("created", "")),
            links=links,
            slurm_dir=recorded if isinstance(recorded, str) else None,
        )


@dataclass
class UpResult:
    state: LabState
    changed: bool
    seconds: float


class Labs:
    """Operations on labs. ``runner`` runs every command; tests pass a recording runner."""

    def __init__(
        self, runner: Runner | None = None, directory: Path | None = None, etc_netns: Path | None = None
    ) -> None:
        self.runner = runner or Runner()
        self.directory = directory or state_dir()
        # `ip netns exec NS` bind-mounts /etc/netns/NS/* over /etc: a hosts file there makes the
        # lab's names and addresses resolve inside the lab (torch and NCCL look names up).
        self.etc_netns = etc_netns or Path("/etc/netns")

    # ----- state files --------------------------------------------------------------------
    def _state_path(self, name: str) -> Path:
        return self.directory / f"{check_name(name)}.json"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / f"{check_name(name)}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        except OSError as exc:
            raise LabError(f"lab state directory {self.directory}: {exc.strerror or exc}") from None
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LabError(
                            f"lab {name} is being changed by another fabricscope process"
                        ) from None
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)

    def _save(self, state: LabState) -> None:
        path = self._state_path(state.spec.name)
        try:
            atomic_write(path, (json.dumps(state.to_dict(), indent=2) + "\n").encode())
        except OSError as exc:
            raise LabError(f"cannot write lab state {path}: {exc.strerror or exc}") from None

    def load(self, name: str) -> LabState:
        path = self._state_path(name)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise LabError(f"no lab named {name!r} (see `fabricscope lab status`)") from None
        except (OSError, ValueError) as exc:
            raise LabError(f"lab state {path} is unreadable: {exc}") from None
        try:
            return LabState.from_dict(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise LabError(f"lab state {path} is not a valid lab state: {exc}") from None

    def names(self) -> list[str]:
        """Labs with a state file, plus leftovers found only by their namespaces."""
        found = set()
        if self.directory.is_dir():
            found.update(p.stem for p in self.directory.glob("*.json"))
        for ns in self.namespaces():
            rest = ns[len(PREFIX) :]
            if "-" in rest:
                found.add(rest.split("-", 1)[0])
        return sorted(n for n in found if _valid_name(n))

    # ----- kernel discovery ---------------------------------------------------------------
    def namespaces(self, prefix: str = PREFIX) -> list[str]:
        """Named namespaces starting with ``prefix``, exactly as the kernel has them: read as JSON
        (``ip -j``), so a name holding a newline or blank is one name, not two half names."""
        out = self.runner.run(["ip", "-j", "netns", "list"]).stdout
        try:
            entries = json.loads(out) if out.strip() else []
        except ValueError:
            raise LabError(f"ip -j netns list printed something that is not JSON: {out[:80]!r}") from None
        names = [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]
        return sorted(n for n in names if n.startswith(prefix))

    def lab_namespaces(self, name: str) -> list[str]:
        """Every namespace of lab ``name``: ``fsl-NAME-`` plus anything, and also ``fsl-NAME``
        followed by any character a lab name cannot hold (``fsl-t1\n-h1``, left by a version that
        let such names through). Lab names are [a-z0-9] only, so lab ``t12`` is never swept by
        ``lab down t1``."""
        stem = f"{PREFIX}{name}"
        return [ns for ns in self.namespaces(stem) if ns == stem or not _NAME_CHAR.fullmatch(ns[len(stem)])]

    # ----- capabilities -------------------------------------------------------------------
    def check_capabilities(self, need_nft: bool, lab: str) -> None:
        """Try each kernel feature a lab uses in a scratch namespace; name the first missing one.

        The scratch namespace is named as the lab's own (:func:`probe_namespace`), so that a
        ``lab up`` killed while probing leaves nothing ``lab down`` does not sweep."""
        missing_tools = [t for t in ("ip", "tc") if not self.runner.which(t)]
        if need_nft and not self.runner.which("nft"):
            missing_tools.append("nft")
        if missing_tools:
            pkgs = sorted({package_for(t) for t in missing_tools})
            raise LabError(
                f"missing tools: {', '.join(missing_tools)} (install Debian package {' and '.join(pkgs)})"
            )
        probe = probe_namespace(lab, os.getpid())
        steps: list[tuple[str, list[str], str | None]] = [
            ("network namespaces", ["ip", "netns", "add", probe], None),
            (
                "veth pairs",
                ["ip", "-n", probe, "link", "add", "pa", "type", "veth", "peer", "name", "pb"],
                None,
            ),
            ("Linux bridges", ["ip", "-n", probe, "link", "add", "pbr", "type", "bridge"], None),
            ("bridge ports", ["ip", "-n", probe, "link", "set", "pa", "master", "pbr"], None),
            (
                "tc tbf shaping (sch_tbf)",
                ["tc", "-n", probe, "qdisc", "add", "dev", "pa", "root", "tbf", *tbf_args(10**9)],
                None,
            ),
        ]
        if need_nft:
            script = (
                f"table bridge {NFT_TABLE} {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n"
                f'    iifname "pa" numgen random mod 100 < 1 drop\n  }}\n}}\n'
            )
            steps.append(
                (
                    "nftables bridge filtering with numgen (nf_tables, nft_numgen)",
                    ["ip", "netns", "exec", probe, "nft", "-f", "-"],
                    script,
                )
            )
        try:
            for what, argv, script in steps:
                try:
                    self.runner.run(argv, input_text=script)
                except CommandError as exc:
                    first = next(
                        (ln.strip() for ln in exc.stderr.splitlines() if ln.strip()), f"exit {exc.rc}"
                    )
                    raise LabError(f"this kernel or machine lacks {what}: {first}") from None
        finally:
            self.runner.run(["ip", "netns", "del", probe], check=False)

    # ----- up -----------------------------------------------------------------------------
    def up(self, spec: LabSpec, *, replace: bool = False) -> UpResult:
        require_root()
        t0 = time.monotonic()
        with self._locked(spec.name):
            existing = None
            with contextlib.suppress(LabError):
                existing = self.load(spec.name)
            live = self.namespaces(spec.prefix)
            if existing and existing.status == "up" and existing.spec == spec and not replace:
                if set(live) == set(existing.plan.namespaces):
                    self.apply_links(existing)  # re-assert shaping, cheap and idempotent
                    started = lldp.ensure(existing.plan, self.runner) if spec.lldp else []
                    if spec.slurm and not slurm.answering(
                        existing.plan, self.runner, Path(existing.slurm_dir or "/nonexistent")
                    ):
                        self._start_slurm(existing)
                        started.append("slurm")
                    return UpResult(existing, bool(started), time.monotonic() - t0)
            if existing and existing.spec != spec and not replace and existing.status == "up":
                raise LabError(
                    f"lab {spec.name} already exists with other options; `fabricscope lab down {spec.name}` "
                    "first, or pass --replace"
                )
            if live or existing:
                self._remove(spec.name)
            need_nft = spec.loss_pct > 0
            self.check_capabilities(need_nft, spec.name)
            if spec.lldp:
                lldp.require(self.runner)
            if spec.slurm:
                slurm.require(self.runner)
                slurm.check_leg_name_free(self.runner, spec.name)  # ours went with the old fabric namespace
            state = LabState(spec=spec)
            self._save(state)  # before creating anything: down must always find it
            try:
                self._build(state.plan)
                self.apply_links(state)
                if spec.lldp:
                    lldp.ensure(state.plan, self.runner)
                if spec.slurm:
                    self._start_slurm(state)
            except BaseException:
                self._remove(spec.name)
                raise
            state.status = "up"
            self._save(state)
            return UpResult(state, True, time.monotonic() - t0)

    def _start_slurm(self, state: LabState) -> None:
        """A fresh Slurm for the lab; its directory is in the state file before any daemon starts."""
        slurm.stop_all(state.spec.name, state.slurm_dir)
        folder = slurm.prepare(state.spec.name)
        state.slurm_dir = str(folder)
        self._save(state)
        hosts = {h.name: self.etc_netns / h.namespace / "hosts" for h in state.plan.hosts}
        slurm.start(state.plan, self.runner, folder, hosts)

    def _build(self, plan: Plan) -> None:
        run = self.runner.run
        mtu = str(plan.spec.mtu)
        fab = plan.fabric_namespace
        for ns in plan.namespaces:
            run(["ip", "netns", "add", ns])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        self._write_hosts_files(plan)
        for sw in plan.switches:
            run(["ip", "-n", fab, "link", "add", sw, "type", "bridge", "stp_state", "0"])
            run(["ip", "-n", fab, "link", "set", sw, "addrgenmode", "none"])
            run(["ip", "-n", fab, "link", "set", sw, "mtu", mtu, "up"])
        for host in plan.hosts:
            for port in host.ports:
                run(
                    [
                        "ip",
                        "-n",
                        host.namespace,
                        "link",
                        "add",
                        port.dev,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        port.port,
                        "netns",
                        fab,
                    ]
                )
                run(["ip", "-n", host.namespace, "link", "set", port.dev, "addrgenmode", "none"])
                run(["ip", "-n", host.namespace, "link", "set", port.dev, "mtu", mtu])
                run(
                    [
                        "ip",
                        "-n",
                        host.namespace,
                        "addr",
                        "add",
                        f"{port.address}/{port.prefixlen}",
                        "dev",
                        port.dev,
                    ]
                )
                run(["ip", "-n", host.namespace, "link", "set", port.dev, "up"])
                run(["ip", "-n", fab, "link", "set", port.port, "addrgenmode", "none"])
                run(["ip", "-n", fab, "link", "set", port.port, "mtu", mtu, "master", port.switch, "up"])
        for up in plan.uplinks:
            run(["ip", "-n", fab, "link", "add", up.leaf_port, "type", "veth", "peer", "name", up.spine_port])
            for end, bridge in ((up.leaf_port, up.leaf), (up.spine_port, up.spine)):
                run(["ip", "-n", fab, "link", "set", end, "addrgenmode", "none"])
                run(["ip", "-n", fab, "link", "set", end, "mtu", mtu, "master", bridge, "up"])

    def _write_hosts_files(self, plan: Plan) -> None:
        lines = ["127.0.0.1\tlocalhost"]
        for host in plan.hosts:
            for port in host.ports:
                names = (
                    f"{host.name}-{port.dev}"
                    if port is not host.ports[0]
                    else f"{host.name} {host.name}-{port.dev}"
                )
                lines.append(f"{port.address}\t{names}")
                # torch's store sees peers as IPv4-mapped IPv6 addresses and looks those up too
                lines.append(f"::ffff:{port.address}\t{names}")
        text = "\n".join(lines) + "\n"
        for host in plan.hosts:
            folder = self.etc_netns / host.namespace
            try:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "hosts").write_text(text)
            except OSError as exc:
                raise LabError(f"cannot write {folder}/hosts: {exc.strerror or exc}") from None

    # ----- shaping and loss ---------------------------------------------------------------
    def _shape(
        self, ns: str, dev: str, rate_bps: int | None, queue_bytes: int | None = None, mtu: int = 1500
    ) -> None:
        if rate_bps is None:
            self.runner.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
        else:
            args = tbf_args(rate_bps, queue_bytes, mtu)
            self.runner.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", *args])

    def apply_links(self, state: LabState) -> None:
        """Make the kernel's shaping and loss rules match ``state`` (both ends of every link)."""
        plan = state.plan
        mtu = state.spec.mtu
        for host in plan.hosts:
            setting = state.link(host.name)
            for port in host.ports:
                self._shape(host.namespace, port.dev, setting.rate_bps)  # host -> switch
                # switch -> host: the switch port's egress queue
                self._shape(plan.fabric_namespace, port.port, setting.rate_bps, setting.queue_bytes, mtu)
        for up in plan.uplinks:
            setting = state.link(up.leaf)
            self._shape(plan.fabric_namespace, up.leaf_port, setting.rate_bps, setting.queue_bytes, mtu)
            self._shape(plan.fabric_namespace, up.spine_port, setting.rate_bps, setting.queue_bytes, mtu)
        self._apply_loss(state)

    def _apply_loss(self, state: LabState) -> None:
        plan = state.plan
        rules: list[str] = []
        for host in plan.hosts:
            pct = state.link(host.name).loss_pct
            rules.extend(_loss_rules([p.port for p in host.ports], pct))
        for up in plan.uplinks:
            rules.extend(_loss_rules([up.leaf_port], state.link(up.leaf).loss_pct))
        if not rules and not self.runner.which("nft"):
            return  # nothing to drop, and no nft to clean with: there can be no table either
        if rules and not self.runner.which("nft"):
            raise LabError("loss needs nftables: install the Debian package nftables")
        # One atomic transaction: make sure the table exists, drop it, write it anew.
        script = f"add table bridge {NFT_TABLE}\ndelete table bridge {NFT_TABLE}\n"
        if rules:
            body = "\n".join(f"    {r}" for r in rules)
            script += (
                f"table bridge {NFT_TABLE} {{\n  chain forward {{\n"
                f"    type filter hook forward priority 0; policy accept;\n{body}\n  }}\n}}\n"
            )
        self.runner.run(["ip", "netns", "exec", plan.fabric_namespace, "nft", "-f", "-"], input_text=script)

    def set_link(
        self,
        name: str,
        target: str,
        *,
        rate_bps: int | None | str = "keep",
        loss_pct: float | None = None,
        queue_bytes: int | None | str = "keep",
    ) -> LabState:
        """Change one host's link (or one leaf's uplink): rate (None = unshaped), loss, switch queue."""
        require_root()
        with self._locked(name):
            state = self.load(name)
            if state.status != "up":
                raise LabError(f"lab {name} is not up (state {state.status}); run `fabricscope lab up` again")
            if target.startswith("leaf"):
                if target not in {u.leaf for u in state.plan.uplinks}:
                    raise LabError(f"no uplink {target!r} in lab {name}")
            else:
                host_index(target, state.spec.hosts)
            current = state.link(target)
            new_rate = current.rate_bps if rate_bps == "keep" else rate_bps
            new_loss = current.loss_pct if loss_pct is None else loss_pct
            new_queue = current.queue_bytes if queue_bytes == "keep" else queue_bytes
            rate = None if isinstance(new_rate, str) else new_rate
            if new_queue is not None and not isinstance(new_queue, str):
                if rate is None:
                    raise LabError(f"--queue needs a shaped link: give {target} a --link-rate too")
                if new_queue < 2 * (state.spec.mtu + 14):
                    raise LabError(
                        f"--queue {new_queue}: at least two packets ({2 * (state.spec.mtu + 14)} bytes)"
                    )
            state.links[target] = LinkSetting(
                rate, new_loss, None if isinstance(new_queue, str) else new_queue
            )
            self.apply_links(state)
            self._save(state)
            return state

    # ----- down ---------------------------------------------------------------------------
    def down(self, name: str) -> list[str]:
        check_name(name)
        require_root()
        with self._locked(name):
            removed = self._remove(name)
        with contextlib.suppress(OSError):
            (self.directory / f"{name}.lock").unlink()
        return removed

    def _remove(self, name: str) -> list[str]:
        prefix = f"{PREFIX}{name}-"
        recorded = None
        with contextlib.suppress(LabError):
            recorded = self.load(name).slurm_dir
        slurm.stop_all(name, recorded)  # before the namespaces: its daemons live in them and here
        found = self.lab_namespaces(name)
        for ns in found:
            self._kill_inside(ns)
        for ns in found:
            self.runner.run(["ip", "netns", "del", ns], check=False)
        for folder in self.etc_netns.glob(f"{prefix}*"):
            with contextlib.suppress(OSError):
                (folder / "hosts").unlink(missing_ok=True)
                folder.rmdir()
        self._remove_old_probes()
        left = self.lab_namespaces(name)
        if left:
            raise LabError(f"could not remove namespaces {', '.join(map(repr, left))}")
        with contextlib.suppress(FileNotFoundError):
            self._state_path(name).unlink()
        lldp.forget(name)
        return found

    def _remove_old_probes(self) -> None:
        """Probe namespaces of versions that named them ``fsl-_probe<pid>``, whose ``lab up`` is gone."""
        for ns in self.namespaces(f"{PREFIX}_probe"):
            pid = ns[len(PREFIX) + len("_probe") :]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                self.runner.run(["ip", "netns", "del", ns], check=False)

    def _kill_inside(self, ns: str) -> None:
        """End processes still running in a lab namespace (ours: started by lab run/exec)."""
        pids = self._pids(ns)
        if not pids:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and self._pids(ns):
                time.sleep(0.05)
            pids = self._pids(ns)
            if not pids:
                return

    def _pids(self, ns: str) -> list[int]:
        out = self.runner.run(["ip", "netns", "pids", ns], check=False).stdout
        return [int(x) for x in out.split() if x.isdigit()]

    # ----- status -------------------------------------------------------------------------
    def status(self, name: str) -> dict[str, Any]:
        """The lab as JSON: hosts (rank, namespace, addresses), links with configured and live shaping."""
        state = self.load(name)
        plan = state.plan
        live = set(self.namespaces(state.spec.prefix))
        hosts = []
        for host in plan.hosts:
            setting = state.link(host.name)
            hosts.append(
                {
                    "name": host.name,
                    "rank": host.rank,
                    "namespace": host.namespace,
                    "present": host.namespace in live,
                    "address": host.address,
                    "leaf": host.leaf,
                    "links": [
                        self._link_doc(host, port, setting, plan.fabric_namespace, host.namespace in live)
                        for port in host.ports
                    ],
                }
            )
        uplinks = [
            self._uplink_doc(up, state.link(up.leaf), plan.fabric_namespace, plan.fabric_namespace in live)
            for up in plan.uplinks
        ]
        complete = live == set(plan.namespaces)
        extra = (
            {"slurm": slurm.status(self.runner, Path(state.slurm_dir))}
            if state.spec.slurm and state.slurm_dir
            else {}
        )
        return {
            "schema": STATUS_SCHEMA,
            "name": state.spec.name,
            "status": state.status if complete else ("broken" if live else "gone"),
            "created": state.created,
            "topology": state.spec.topology,
            "spec": state.spec.model_dump(mode="json"),
            "fabric_namespace": plan.fabric_namespace,
            "switches": list(plan.switches),
            "hosts": hosts,
            "uplinks": uplinks,
            **extra,
        }

    def _live_qdisc(self, ns: str, dev: str) -> dict[str, Any] | None:
        done = self.runner.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev], check=False)
        if done.rc != 0:
            return None
        try:
            qdiscs = json.loads(done.stdout or "[]")
        except ValueError:
            return None
        for q in qdiscs:
            if q.get("root"):
                opts = q.get("options") or {}
                rate = opts.get("rate")
                return {
                    "qdisc": q.get("kind"),
                    "rate_gbps": (rate * 8 / 1e9)
                    if isinstance(rate, (int, float)) and q.get("kind") == "tbf"
                    else None,
                }
        return None

    def _link_doc(
        self, host: HostPlan, port: Port, setting: LinkSetting, fab: str, present: bool
    ) -> dict[str, Any]:
        return {
            "dev": port.dev,
            "address": f"{port.address}/{port.prefixlen}",
            "switch": port.switch,
            "switch_port": port.port,
            "rail": port.rail,
            "rate": format_rate(setting.rate_bps),
            "rate_gbps": setting.rate_bps / 1e9 if setting.rate_bps else None,
            "loss_pct": setting.loss_pct,
            "queue_bytes": setting.queue_bytes,
            "live_host_side": self._live_qdisc(host.namespace, port.dev) if present else None,
            "live_switch_side": self._live_qdisc(fab, port.port) if present else None,
        }

    def _uplink_doc(self, up: Uplink, setting: LinkSetting, fab: str, present: bool) -> dict[str, Any]:
        return {
            "leaf": up.leaf,
            "spine": up.spine,
            "rate": format_rate(setting.rate_bps),
            "rate_gbps": setting.rate_bps / 1e9 if setting.rate_bps else None,
            "loss_pct": setting.loss_pct,
            "queue_bytes": setting.queue_bytes,
            "live_leaf_side": self._live_qdisc(fab, up.leaf_port) if present else None,
            "live_spine_side": self._live_qdisc(fab, up.spine_port) if present else None,
        }


def probe_namespace(lab: str, pid: int) -> str:
    """The scratch namespace of ``lab up`` (process ``pid``) checking the kernel: ``fsl-LAB-probePID``,
    inside the lab's prefix, so ``lab down LAB`` removes one a killed ``lab up`` left."""
    return f"{PREFIX}{check_name(lab)}-probe{pid}"


def _loss_rules(ports: list[str], pct: float) -> list[str]:
    if pct <= 0:
        return []
    threshold = min(LOSS_SCALE, int(round(pct / 100.0 * LOSS_SCALE)))
    rules = []
    for port in ports:
        # Both directions of the cable: frames from the host, and frames towards it.
        rules.append(f'iifname "{port}" numgen random mod {LOSS_SCALE} < {threshold} drop')
        rules.append(f'oifname "{port}" numgen random mod {LOSS_SCALE} < {threshold} drop')
    return rules


def _valid_name(name: str) -> bool:
    try:
        check_name(name)
        return True
    except LabError:
        return False
