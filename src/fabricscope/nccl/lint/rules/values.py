"""`nccl lint` rules that need no node: names against the catalogue, values against their type,
shadowed and unparsed settings, debugging settings left in, the IB timeout in seconds."""

from __future__ import annotations

from collections.abc import Iterator

from fabricscope.findings import Finding
from fabricscope.nccl.catalogue import RELEASE
from fabricscope.nccl.explain import format_seconds, ib_timeout_seconds
from fabricscope.nccl.lint.codes import LintContext, finding
from fabricscope.nccl.match import parse_list
from fabricscope.nccl.settings import uses_expansion
from fabricscope.nccl.variables import (
    ALGORITHMS,
    LEVELS,
    PROTOCOLS,
    RENAMED,
    SPECS,
    STRICT_ALGO_PROTO,
    algo_proto_problem,
    integer_param_problem,
    is_read,
    parse_level,
    suggest,
)


# ----- node-independent rules -------------------------------------------------------------------
def check_names_and_values(ctx: LintContext) -> Iterator[Finding]:
    for name, s in sorted(ctx.settings.effective.items()):
        if not name.startswith("NCCL_"):
            near = None if name.startswith(("FI_", "OFI_NCCL_")) else suggest("NCCL_" + name.split("_", 1)[1])
            if near:  # CCL_NET_GDR_LEVEL: a prefix typo, so NCCL never sees it
                yield finding(
                    "NCCL001",
                    "warn",
                    s,
                    name,
                    f"{name} is not an NCCL variable (the prefix is NCCL_); did you mean {near}? NCCL never sees it",
                    f"rename it to {near}",
                    suggestion=near,
                )
            continue  # libfabric / aws-ofi-nccl variables: lint_efa's to judge
        if uses_expansion(s.value):
            yield finding(
                "NCCL004",
                "info",
                s,
                name,
                f"{name}={s.value} uses shell expansion; its value is only known at run time",
                "lint the expanded environment with --from-environ inside the job",
            )
            continue
        if name in RENAMED:
            new, severity, why = RENAMED[name]
            fix = f"use {new}" if new else f"remove {name}"
            yield finding("NCCL002", severity, s, name, f"{name} is {why}", fix, replacement=new)
            continue
        spec = SPECS.get(name)
        if spec is None and is_read(name):
            # Real (the catalogue of NCCL's source) but not typed here: NCCL_PARAM ones are integers.
            problem = integer_param_problem(name, s.value)
            if problem:
                yield finding(
                    "NCCL003",
                    "warn",
                    s,
                    name,
                    f"{name}={s.value!r}: {problem}",
                    "use an integer (decimal or 0x hex)",
                )
            continue
        if spec is None:
            near = suggest(name)
            if near:
                yield finding(
                    "NCCL001",
                    "warn",
                    s,
                    name,
                    f"{name} is not an NCCL variable; did you mean {near}? NCCL silently ignores unknown names",
                    f"rename it to {near}",
                    suggestion=near,
                )
            else:
                yield finding(
                    "NCCL001",
                    "info",
                    s,
                    name,
                    f"{name} is not a variable NCCL {RELEASE} reads (plugins and launchers define their own); NCCL ignores names it does not know",
                    None,
                )
            continue
        problem = _value_problem(spec.kind, spec, s.value)
        if problem and spec.kind in ("algolist", "protolist"):
            yield _algo_proto_finding(ctx, s, problem)
        elif problem:
            yield finding(
                "NCCL003",
                "warn",
                s,
                name,
                f"{name}={s.value!r}: {problem}; NCCL falls back to its default or misreads it",
                _range_fix(spec),
            )


def _algo_proto_finding(ctx: LintContext, s, problem: str) -> Finding:
    """parseList (NCCL v2.30.7-1 src/graph/tuning.cc) returns ncclInvalidUsage on an unknown token
    since 2.24, so init fails; 2.23's parseList skipped unknown tokens."""
    version = ctx.nccl_version
    if version is None or version >= STRICT_ALGO_PROTO:
        which = ".".join(map(str, version)) if version else "2.24 and later (pass --nccl-version if older)"
        return finding(
            "NCCL003",
            "fail",
            s,
            s.name,
            f"{s.name}={s.value!r}: {problem}; NCCL {which} rejects it: every communicator's init fails with ncclInvalidUsage ('Unrecognized element token')",
            f"fix the token or remove {s.name}",
        )
    return finding(
        "NCCL003",
        "warn",
        s,
        s.name,
        f"{s.name}={s.value!r}: {problem}; NCCL before 2.24 skips unknown tokens, so the setting does not do what it says",
        f"fix the token or remove {s.name}",
    )


def _range_fix(spec) -> str:
    if spec.choices:
        return f"use one of {', '.join(spec.choices)}"
    if spec.kind == "bool":
        return "use 0 or 1"
    if spec.kind == "level":
        return f"use one of {', '.join(LEVELS)} (case-sensitive)"
    if spec.lo is not None and spec.hi is not None:
        return f"use an integer from {spec.lo} to {spec.hi}"
    if spec.lo is not None:
        return f"use an integer >= {spec.lo}"
    return "check the value against the NCCL user guide"


def _value_problem(kind: str, spec, value: str) -> str | None:
    text = value.strip()
    if text == "" and kind not in ("string", "path"):
        return "empty value"
    if kind in ("int", "size"):
        return _int_problem(kind, spec, text)
    if kind == "bool":
        return None if text in ("0", "1") else "not 0 or 1"
    if kind == "enum" and spec.exact:
        return (
            None
            if value in spec.choices
            else f"not one of {', '.join(spec.choices)} (NCCL compares it case-sensitively, blanks included)"
        )
    if kind == "enum":
        return (
            None
            if text.upper() in {c.upper() for c in spec.choices}
            else f"not one of {', '.join(spec.choices)}"
        )
    if kind == "level":
        return None if parse_level(value) is not None else _level_problem(value)
    if kind in ("algolist", "protolist"):
        return algo_proto_problem(value, ALGORITHMS if kind == "algolist" else PROTOCOLS)
    if kind == "float":
        try:
            float(text)
        except ValueError:
            return "not a number"
        return None
    if kind == "list":
        parsed = parse_list(text)
        if parsed.problems:
            return f"entries not of the form name[:port]: {', '.join(parsed.problems)}"
        return None if parsed.tokens else "no names in the list"
    return None


def _int_problem(kind: str, spec, text: str) -> str | None:
    try:
        number = int(text, 0)
    except ValueError:
        return "not an integer"
    if spec.lo is not None and number < spec.lo:
        return f"below the minimum {spec.lo}"
    if spec.hi is not None and number > spec.hi:
        return f"above the maximum {spec.hi}"
    if kind == "size" and number > 0 and number & (number - 1) and spec.name == "NCCL_BUFFSIZE":
        return "not a power of two (the guide recommends powers of two)"
    return None


def _level_problem(value: str) -> str:
    """Why ncclGetLevel (src/graph/paths.cc) ignores a level: strcmp against the names, or a leading digit."""
    if value.strip().upper() == "NODE":
        return "NODE is nvidia-smi's word, not an NCCL path level (NCCL calls the same distance PHB)"
    if value.strip() in LEVELS:
        return f"NCCL compares the whole value, so the blanks around {value.strip()} make it no level"
    if value.upper() in LEVELS:
        return f"NCCL compares level names case-sensitively: {value!r} is no level, {value.upper()!r} is"
    return f"not a path level ({', '.join(LEVELS)}) or a legacy number"


def check_shadowed(ctx: LintContext) -> Iterator[Finding]:
    for lost, winner in ctx.settings.shadowed:
        yield finding(
            "NCCL005",
            "info",
            winner,
            winner.name,
            f"{winner.name}={winner.value} ({winner.where}) hides {winner.name}={lost.value} from {lost.where}",
            None,
            hidden_value=lost.value,
            hidden_source=lost.where,
        )
    for path, line, text, how in ctx.settings.misread:
        yield finding(
            "NCCL006",
            "warn",
            None,
            f"{path}:{line}",
            f"{text!r}: {how}",
            "write NAME=VALUE with nothing around it: NCCL reads config files verbatim (no shell)",
            source=f"{path}:{line}",
        )
    for path, line, text in ctx.settings.unparsed:
        yield finding(
            "NCCL006",
            "warn",
            None,
            f"{path}:{line}",
            f"line not understood (expected NAME=VALUE): {text!r}",
            "fix or comment out the line; NCCL skips it too",
            source=f"{path}:{line}",
        )


LIST_VARIABLES = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_OOB_NET_IFNAME")


def check_list_blanks(ctx: LintContext) -> Iterator[Finding]:
    """NCCL splits device lists on ',' and keeps every blank (parseStringList, NCCL v2.30.7-1
    src/misc/utils.cc; the '^'/'=' markers only as the first character, src/transport/net_ib/
    init.cc and src/os/linux.cc): an entry with a blank names a device that does not exist."""
    for name in LIST_VARIABLES:
        s = ctx.settings.effective.get(name)
        if s is None or uses_expansion(s.value):
            continue
        parsed = parse_list(s.value)
        spaced = parsed.spaced
        if not spaced:
            continue
        shown = ", ".join(repr(t.name) for t in spaced)
        meant = ", ".join(t.name.strip() for t in spaced)
        if parsed.exclude:
            effect = f"so {meant} is not excluded"
        elif len(spaced) == len(parsed.tokens):
            effect = f"so the list selects nothing and {meant} is not used"
        else:
            effect = f"so {meant} is silently left out"
        clean = (
            ("^" if parsed.exclude else "")
            + ("=" if parsed.exact else "")
            + ",".join(t.raw.strip() for t in parsed.tokens)
        )
        severity = "fail" if len(spaced) == len(parsed.tokens) and not parsed.exclude else "warn"
        if s.value[:1].isspace():
            effect += " (a leading blank also hides a '^' or '=' marker)"
        yield finding(
            "NCCL016",
            severity,
            s,
            name,
            f"{name}={s.value!r}: NCCL keeps the blank in {shown}, which names no device, {effect}",
            f"write the list without blanks: {name}={clean}",
            entries=[t.raw for t in spaced],
        )


def check_conf_file(ctx: LintContext) -> Iterator[Finding]:
    """NCCL reads NCCL_CONF_FILE with fopen and silently skips a file it cannot open
    (``setEnvFile``, NCCL v2.30.7-1 src/misc/param.cc)."""
    for s in ctx.settings.missing:
        yield finding(
            "NCCL007",
            "warn",
            s,
            s.name,
            f"{s.name}={s.value} does not exist on this node: NCCL silently runs without it",
            "fix the path (no ~: NCCL does not expand it)",
        )


def check_debug_settings(ctx: LintContext) -> Iterator[Finding]:
    st = ctx.settings
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"):
        s = st.effective.get(name)
        if s is not None and s.value.strip() == "1":
            what = "GPU peer-to-peer (NVLink/PCIe)" if name == "NCCL_P2P_DISABLE" else "shared-memory"
            yield finding(
                "NCCL062",
                "warn",
                s,
                name,
                f"{name}=1 disables the {what} transport: same-node traffic falls back to a slower path (SHM or the network)",
                f"remove {name} once the problem it worked around is fixed",
            )
    s = st.effective.get("NCCL_P2P_LEVEL")
    if s is not None:
        level = parse_level(s.value)
        if level == "LOC":
            yield finding(
                "NCCL062",
                "warn",
                s,
                "NCCL_P2P_LEVEL",
                "NCCL_P2P_LEVEL=LOC disables P2P between GPUs entirely",
                "remove NCCL_P2P_LEVEL",
            )
        elif level is not None:
            yield finding(
                "NCCL065",
                "info",
                s,
                "NCCL_P2P_LEVEL",
                f"NCCL_P2P_LEVEL={s.value} ({level}) overrides NCCL's choice of when GPUs talk directly",
                "keep only if measured to help",
            )
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        s = st.effective.get(name)
        elements = ALGORITHMS if name == "NCCL_ALGO" else PROTOCOLS
        if s is not None and s.value.strip() and algo_proto_problem(s.value, elements) is None:
            yield _forced_choice(s, "algorithm" if name == "NCCL_ALGO" else "protocol")
    s = st.effective.get("NCCL_DEBUG")
    if s is not None and s.value.strip().upper() in ("INFO", "TRACE"):
        severity = "warn" if ctx.production else "info"
        yield finding(
            "NCCL064",
            severity,
            s,
            "NCCL_DEBUG",
            f"NCCL_DEBUG={s.value} logs every init step of every rank (large logs at scale; TRACE also slows every call)",
            "use NCCL_DEBUG=WARN in production; INFO with NCCL_DEBUG_SUBSYS=INIT,NET when debugging",
        )
    skip = {
        "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_IB_DISABLE",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_TC",
    }
    for name, s in sorted(st.effective.items()):
        spec = SPECS.get(name)
        if (
            spec is not None
            and spec.debug
            and name not in skip
            and not (spec.default is not None and s.value.strip() == spec.default)
        ):
            yield finding(
                "NCCL065",
                "info",
                s,
                name,
                f"{name} is in the NCCL guide's Debugging section: fine for experiments, not meant to stay in production settings",
                None,
            )


def _forced_choice(s, what: str) -> Finding:
    """NCCL_ALGO/NCCL_PROTO: a list enables only what it names; ``^list`` disables what it names
    and leaves NCCL's choice among the rest (parseList, NCCL v2.30.7-1 src/graph/tuning.cc)."""
    entries = [e.split(":")[-1] for e in s.value.split(";") if e]
    if all(e.startswith("^") for e in entries):
        return finding(
            "NCCL063",
            "info",
            s,
            s.name,
            f"{s.name}={s.value} excludes {s.value.replace('^', '')} (the NCCL guide allows this, e.g. to avoid LL128 on a platform where it misbehaves); NCCL still picks the {what} per size and topology among the rest",
            f"remove {s.name} once the problem it works around is fixed",
        )
    extra = (
        " (forcing LL128 where unsupported can corrupt data)"
        if s.name == "NCCL_PROTO" and any("ll128" in e.lower() and not e.startswith("^") for e in entries)
        else ""
    )
    return finding(
        "NCCL063",
        "warn",
        s,
        s.name,
        f"{s.name}={s.value} restricts NCCL's choice of {what} for every size and topology to what it names{extra}",
        f"remove {s.name} for production; use it only to test a suspected NCCL bug",
    )


def check_timeout(ctx: LintContext) -> Iterator[Finding]:
    s = ctx.settings.effective.get("NCCL_IB_TIMEOUT")
    if s is None:
        return
    try:
        value = int(s.value.strip())
    except ValueError:
        return
    if ctx.inventory is not None and not ctx.inventory.rdma_devices:
        return  # NCCL072 says it is ignored here
    retries_text = ctx.settings.get("NCCL_IB_RETRY_CNT") or "7"
    try:
        retries = int(retries_text)
    except ValueError:
        retries = 7
    per = ib_timeout_seconds(value)
    if per is None:
        yield finding(
            "NCCL070",
            "warn",
            s,
            "NCCL_IB_TIMEOUT",
            f"NCCL_IB_TIMEOUT={value} means an infinite ack timeout: a lost peer hangs the job instead of failing it",
            "remove it (default 20: 4.3 s x 7 retries, about 30 s) or set 18-22",
        )
        return
    total = per * max(retries, 1)
    default_note = "the default since NCCL 2.23" if value == 20 else "default is 20 (4.3 s) since NCCL 2.23"
    severity = "info"
    extra = ""
    if value < 14:
        severity = "warn"
        extra = "; this short a timeout gives spurious status-12 errors under congestion on any real fabric"
    elif value >= 25:
        extra = "; a dead link takes this long to turn into an error"
    yield finding(
        "NCCL070",
        severity,
        s,
        "NCCL_IB_TIMEOUT",
        f"NCCL_IB_TIMEOUT={value}: ack timeout 4.096 us x 2^{value} = {format_seconds(per)}, x {retries} retries "
        f"(NCCL_IB_RETRY_CNT) = {format_seconds(total)} before NCCL reports an error ({default_note}){extra}",
        None if severity == "info" else "raise it to 18-22 (or remove it to get the default 20)",
        per_try_s=round(per, 6),
        total_s=round(total, 3),
        retries=retries,
    )


def check_script_reading(ctx: LintContext) -> Iterator[Finding]:
    """What the shell does not apply, and the sourced files whose settings lint did not see."""
    for path, line, name, why in ctx.settings.not_applied:
        yield finding(
            "NCCL008",
            "info",
            None,
            name,
            f"{path}:{line}: {name} is {why}: the job does not get it",
            "set it with export (or on the command that runs) if the job needs it",
            source=f"{path}:{line}",
        )
    for path, line, sourced in ctx.settings.sourced:
        yield finding(
            "NCCL009",
            "info",
            None,
            sourced,
            f"{path}:{line} sources {sourced}; its settings were not read, so the findings here may miss some",
            f"pass {sourced} too (nccl lint --env-file or as a script)",
            source=f"{path}:{line}",
        )
