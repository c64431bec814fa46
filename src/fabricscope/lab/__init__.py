"""A lab fabric on one Linux machine: network namespaces as hosts, bridges as switches.

Everything a lab creates lives inside namespaces named ``fsl-<lab>-...``: the hosts
(``fsl-<lab>-h1`` ...) and one fabric namespace (``fsl-<lab>-fab``) that holds the bridges
(switches), the switch ends of every link, the uplinks and the loss rules. The machine's own
namespace is never touched, so removing a lab is removing its namespaces, and a lab that
crashed halfway through ``up`` is still found (by prefix) and removed by ``down``.

Modules: :mod:`.spec` (what the user asks for, parsed and validated), :mod:`.plan` (the pure
topology: hosts, switches, links, addresses), :mod:`.runner` (argv commands with deadlines),
:mod:`.fabric` (up/down/set/status against the kernel), :mod:`.procgroup` (running one
process per host with prefixed output).
"""

from fabricscope.lab.spec import LabError, LabSpec, format_rate, parse_loss, parse_rate

__all__ = ["LabError", "LabSpec", "format_rate", "parse_loss", "parse_rate"]
