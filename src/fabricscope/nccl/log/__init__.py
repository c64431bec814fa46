"""Reading NCCL_DEBUG logs: :mod:`.parse` (one line), :mod:`.aggregate` (the per-process state),
:mod:`.batch` (the fast path), :mod:`.read` (files), :mod:`.merge` (files read apart),
:mod:`.verdicts` and :mod:`.errors` (the findings), :mod:`.report` (the report)."""
