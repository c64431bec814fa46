"""Type-check src/ with mypy and hold each package to its baseline error count, which may only shrink.

    python scripts/mypy_baseline.py            # exit 1 if any package has more errors than its baseline
    python scripts/mypy_baseline.py --update   # write the current counts (refused where one rose,
                                               # unless there is no baseline yet)

The configuration (strict on host/, findings, units and bench/results) is [tool.mypy] in
pyproject.toml; the counts live in mypy-baseline.json beside it. A package is the first directory
under src/fabricscope (or the module name for top-level modules).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BASELINE = TOP / "mypy-baseline.json"
ERROR = re.compile(r"^src/fabricscope/(?P<path>[^:]+):\d+: error: ")


def package_of(path: str) -> str:
    first = path.split("/", 1)[0]
    return first.removesuffix(".py")


def current_counts() -> tuple[Counter[str], str]:
    proc = subprocess.run(  # a fixed argv, no shell
        [sys.executable, "-m", "mypy", "src/fabricscope", "--no-error-summary", "--no-color-output"],
        cwd=TOP,
        capture_output=True,
        text=True,
        check=False,
    )
    counts: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            counts[package_of(match["path"])] += 1
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not counts):
        raise SystemExit(
            f"mypy failed to run (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout[-2000:]}"
        )
    return counts, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    parser.add_argument("--show", action="store_true", help="print mypy's errors too")
    args = parser.parse_args()
    counts, output = current_counts()
    baseline: dict[str, int] = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    if args.show:
        print(output, end="")
    rose = {pkg: (baseline.get(pkg, 0), n) for pkg, n in sorted(counts.items()) if n > baseline.get(pkg, 0)}
    for pkg in sorted(set(counts) | set(baseline)):
        was, now = baseline.get(pkg, 0), counts.get(pkg, 0)
        mark = "ROSE" if pkg in rose else ("fell" if now < was else "")
        print(f"{pkg:20} {now:4d} (baseline {was:4d}) {mark}")
    print(f"total {sum(counts.values())} (baseline {sum(baseline.values())})")
    if rose and BASELINE.exists():
        print(
            "mypy errors rose in: "
            + ", ".join(f"{p} {a}->{b}" for p, (a, b) in rose.items())
            + " (run with --show; fix them, never raise the baseline)",
            file=sys.stderr,
        )
        return 1
    if args.update:
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"baseline written: {BASELINE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
