"""How a long run says how far it is (issue 26 item 3), the same for every command.

``bench collective --launch lab:demo --sizes 1M:64M`` was silent for 217 s and then printed the
whole table: progress appeared only for a single process on a terminal, never under ``--launch``,
srun, torchrun or mpirun, the documented way to run. Now:

* on a terminal: rich's live status line on stderr (replaced as the run goes, gone at the end);
* anywhere else (a launched rank, whose stderr the launcher streams with its ``[rank 0]`` prefix;
  an srun or batch log; a pipe): plain lines on stderr, flushed at once;
* with ``--json`` and no terminal: nothing (a machine reads the document; its stderr stays the
  one error line when something fails).

A collective's rows go through the same sink as nccl-tests prints them, one as each size
completes (:func:`collective_row_sink`); the table on stdout at the end is unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

Show = Callable[[str], None]


@contextmanager
def progress_sink(json_out: bool, stream: IO[str] | None = None) -> Iterator[Show | None]:
    """A callable taking one progress line, or None when nothing should be shown."""
    out = stream or sys.stderr
    terminal = out.isatty()
    if json_out and not terminal:
        yield None
        return
    if not terminal:

        def line(text: str) -> None:
            out.write(f"# {text}\n" if not text.startswith("#") and not text[:1].isspace() else f"{text}\n")
            out.flush()

        yield line
        return
    from fabricscope.report.terminal import console

    status = console(stderr=True).status("starting")
    status.start()
    try:

        def live(text: str) -> None:
            if text.startswith(" ") or text.startswith("#"):  # a table row: keep it on screen
                status.console.print(text, highlight=False, markup=False)
            else:
                status.update(text)

        yield live
    finally:
        status.stop()


def collective_row_sink(show: Show | None, params: dict[str, Any]) -> Callable[[Any], None] | None:
    """For ``bench collective``'s worker: a stage (text) becomes a progress line, a finished size
    (its SizeResult) its nccl-tests row, the column heads before the first."""
    if show is None:
        return None
    from fabricscope.bench.results.schema import BenchResult, CollectiveEntry
    from fabricscope.report.bench import collective_columns, collective_row

    started = []
    stub = BenchResult(kind="collective", params=params)

    def sink(item: Any) -> None:
        if isinstance(item, str):
            show(item)
            return
        if not started:
            started.append(True)
            for head in collective_columns():
                show(head)
        show(collective_row(stub, CollectiveEntry.model_validate(item.to_dict())))

    return sink
