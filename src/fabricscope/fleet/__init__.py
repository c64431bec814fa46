"""The fleet: one verdict for many nodes from their doctor documents or snapshots (drift across
nodes, the expected-hardware manifest, and the scheduler actions that follow)."""
