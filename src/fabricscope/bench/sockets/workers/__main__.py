"""``python -m fabricscope.bench.sockets.workers``: one worker process (see :func:`fabricscope.bench.sockets.workers.main`)."""

from fabricscope.bench.sockets.workers import main

main()
