"""``python -m fabricscope.bench.workers``: one worker process (see :func:`fabricscope.bench.workers.main`)."""

from fabricscope.bench.workers import main

main()
