"""The fabric as it is cabled: discovered from ibnetdiscover, from LLDP neighbours gathered across
the nodes of a job, or from a lab's own plan, and written in the simulator's YAML topology format
(``fabricscope topology discover``), then read back to print and draw (``topology show``)."""
