"""``fabricscope ready``: is this allocation ready for this job?

The top of the domain layer, beside ``triage``: it runs, on the job's own allocation and in
order, fleet doctor (:mod:`fabricscope.fleet.launched`), the job's NCCL settings linted against
every node (:mod:`fabricscope.nccl.job`), the pairwise matrix (:mod:`fabricscope.bench.matrix`)
and the job's own collective (:mod:`fabricscope.bench.collective`), and judges the measured
steps against what the simulator (:mod:`fabricscope.sim`) predicts for this allocation.

* :mod:`.params`: the options and the budget shared between the steps;
* :mod:`.node`: what every rank tells rank 0 (names, the lint, LLDP);
* :mod:`.allocation`: the allocation as the model needs it;
* :mod:`.predict`: the simulator's figures for the fabric as it is and as built;
* :mod:`.verdict`: the pure judgement (steps, culprits, the drain list, one word);
* :mod:`.run`: the steps in order, as every rank runs them.
* :mod:`.scheduler`: the bad nodes drained or tainted through fleet's path (``--apply``).
"""
