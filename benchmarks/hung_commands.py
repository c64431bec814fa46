"""Doctor's commands when every tool hangs: wall time against one-after-another, and orphans left.

The node is a fixture host's sysfs (8 HCAs on ib-ndr-healthy) read as if it were live, so every
optional command the inventory runs (ethtool -S/-k/-m per netdev, mlnx_qos and dcb per RoCE
netdev, ip, nvidia-smi, dpkg-query, rpm, lldpctl) really runs: a fake of each that forks two
grandchildren and hangs. Reference: the same commands one after another, each waiting its own
timeout (what doctor did before: N x timeout, and two orphans per command).

    python benchmarks/hung_commands.py [--host ib-ndr-healthy] [--timeout 1.0]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixture_hosts import fixture_hosts  # noqa: E402
from tests.proctools import kill_leftovers, new_marker, wait_gone, write_hanging_tool  # noqa: E402

from fabricscope.host import Root, read_inventory  # noqa: E402

TOOLS = ("ethtool", "ip", "nvidia-smi", "mlnx_qos", "dcb", "dpkg-query", "rpm", "lldpctl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="ib-ndr-healthy")
    parser.add_argument("--timeout", type=float, default=1.0, help="command timeout, seconds")
    args = parser.parse_args()
    marker = new_marker()
    with tempfile.TemporaryDirectory() as tmp:
        for tool in TOOLS:
            write_hanging_tool(Path(tmp), tool, marker)
        os.environ["PATH"] = tmp
        node = dataclasses.replace(Root.at(fixture_hosts() / args.host), is_live=True)
        try:
            started = time.monotonic()
            inv = read_inventory(node, command_timeout_s=args.timeout)
            wall = time.monotonic() - started
            left = wait_gone(marker, timeout_s=3.0)
        finally:
            kill_leftovers(marker)
    hung = [p for p in inv.problems if "timed out" in p.reason]
    sequential = len(hung) * args.timeout
    print(f"host {args.host}: {len(hung)} hung commands, timeout {args.timeout:g} s each")
    print(f"  wall time          {wall:6.2f} s")
    print(f"  one after another  {sequential:6.2f} s (reference: N x timeout)")
    print(f"  ratio              {wall / sequential:6.3f}")
    print(
        f"  processes left     {len(left)} (reference: 2 orphaned grandchildren per command = {2 * len(hung)})"
    )


if __name__ == "__main__":
    main()
