"""RepeatLimiter: a flood of one kind of log line becomes a few lines and a count."""

from __future__ import annotations

import logging
import time

from fabricscope.logfilter import RepeatLimiter
from tests.loopback_attacker import Recorder


def _logger(name: str, limiter: RepeatLimiter) -> tuple[logging.Logger, Recorder]:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    recorder = Recorder()
    logger.addHandler(recorder)
    logger.addFilter(limiter)
    return logger, recorder


def test_repeats_are_counted_not_written() -> None:
    limiter = RepeatLimiter(burst=3, window_s=0.3)
    logger, recorder = _logger("fabricscope.test.repeats", limiter)
    for port in range(1000):
        logger.warning("refused %s: %s", f"10.0.0.7:{port}", "too many")
    logger.info("listening on %s", "x")  # another kind passes on its own
    assert [r.getMessage() for r in recorder.records][:3] == [
        f"refused 10.0.0.7:{p}: too many" for p in range(3)
    ]
    assert len(recorder.records) == 4 and limiter.dropped() == 997
    time.sleep(0.35)
    logger.warning("refused %s: %s", "10.0.0.8:1", "too many")  # next window: says what was held back
    assert recorder.records[-1].getMessage() == "refused 10.0.0.8:1: too many (997 similar lines suppressed)"


def test_flush_reports_a_flood_that_stopped() -> None:
    limiter = RepeatLimiter(burst=1, window_s=60)
    logger, recorder = _logger("fabricscope.test.flush", limiter)
    for _ in range(5):
        logger.warning("peer %s timed out", "a")
    limiter.flush(logger)  # window not over: nothing yet
    assert len(recorder.records) == 1
    limiter.flush(logger, force=True)
    assert recorder.records[-1].getMessage() == "4 similar lines suppressed like: peer %s timed out"
    assert recorder.records[-1].levelno == logging.WARNING
