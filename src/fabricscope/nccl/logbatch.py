"""The fast path of the NCCL log reader: most lines of a big log cost one dict lookup.

A 10,000-GPU job writes about 100 GB of ``NCCL_DEBUG=INFO`` output; nearly all of it is lines the
verdicts only count ("AllReduce: opCount ...", "Connected to proxy ..."), and most of the rest is
channel lines. :class:`BatchReader` learns, from lines it classified the slow way, which line
*beginnings* are plain: the text up to and including the first word of the message
(``host:pid:tid [dev] NCCL INFO AllReduce: ``). A later line with a known beginning is plain
without parsing it, because whether an INFO message means anything to
:func:`fabricscope.nccl.log.classify_info` depends only on its header and its first word (see
:func:`word_class`). Channel lines are cut at the first `` : ``: both halves repeat (``Channel 05/0``;
``: 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`` for every channel of a rank), so each is parsed once,
and their counts are booked per rank and transport in bulk.

Most of a big log is long runs of such lines (the collectives' lines of every rank, after init).
A chunk of ASCII is first tried whole (:meth:`BatchReader.feed_chunk`): a few ``bytes.count``
calls and one set of its headers, all in C, prove that every line carries exactly one
`` NCCL INFO ``, a known header and a first word that is plain; then the chunk costs no Python
step per line. Any doubt sends the chunk down the per-line loop.

Everything else -- a new header, WARN lines, return codes, init lines -- goes through
:meth:`fabricscope.nccl.logstate.LogAggregator.feed_line`, so the result
is the one of feeding every line alone (the property test in tests/nccl holds the two equal).
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING

from fabricscope.nccl.log import INFO_PREFIXES

if TYPE_CHECKING:
    from fabricscope.nccl.logstate import FileStats, LogAggregator, RankState

SEP = " NCCL INFO "
_AFTER = len(SEP)
_SEP_B = SEP.encode()
_MIDDLE, _LAST = itemgetter(1), itemgetter(2)
WHOLE_BATCH_MIN_LINES = 32  # smaller batches: the per-line loop is as cheap
_MARKERS_TRIED = 8  # plain first words counted per batch before giving up on the whole-batch path
_MAX_MARKERS = 256  # plain first words remembered (a real log has a handful; a hostile one no quadratic cost)
_CACHE_LIMIT = 1 << 17  # entries per cache; cleared when full (a cache, not state)
# A first word that could start a "file:line -> N" return code; such lines always take the slow path.
_RETCODE_WORD = re.compile(r"[^\s:]+:\d+")
_SPEC = re.compile(r"Channel \d+(?:/\d+)?")
# The part of log._CHANNEL after the first " : ", with the same groups' meaning.
_REST = re.compile(r"(\d+)(?:\[\w+\])? -> (\d+)(?:\[\w+\])?(?: \[(send|receive)\])? via (.+)$")


def word_class(word: str) -> tuple[str, ...] | None:
    """Whether an INFO message ``word + " " + rest`` is plain whatever ``rest`` is.

    Returns ``()`` when it always is, a tuple of continuations when it is plain unless ``rest``
    starts with one of them (``"Connected"`` -> ``("all rings",)``), and None when it may be more
    (it starts an interesting prefix, or it may be a ``file:line -> N`` return code)."""
    if _RETCODE_WORD.fullmatch(word):
        return None
    continuations = []
    for prefix in INFO_PREFIXES:
        if len(prefix) <= len(word):
            if word.startswith(prefix):
                return None
        elif prefix.startswith(word + " "):
            rest = prefix[len(word) + 1 :]
            if not rest:
                return None
            continuations.append(rest)
    return tuple(continuations)


_BAD = ("", None)  # a cached channel spec or rest that is not well formed


_word_classes: dict[str, tuple[str, ...] | None] = {}


def _word_class(word: str) -> tuple[str, ...] | None:
    """:func:`word_class`, cached: a log has few distinct first words."""
    found = _word_classes.get(word, _BAD)
    if found is _BAD:
        if len(_word_classes) >= _CACHE_LIMIT:
            _word_classes.clear()
        found = _word_classes[word] = word_class(word)
    return found


class _Channels:
    """What a channel line's beginning (``host:pid:tid [dev] NCCL INFO Channel ``) stands for."""

    __slots__ = ("counts", "key", "rank")

    def __init__(self, key: tuple, rank: RankState | None, counts: dict[str, int] | None) -> None:
        self.key, self.rank, self.counts = key, rank, counts


class _Caches:
    """What the fast loop knows, for lines of one type: ``str``, or ``bytes`` (ASCII chunks are not decoded)."""

    def __init__(self, kind: type) -> None:
        def mark(text):  # str, or a tuple of str
            if kind is str:
                return text
            return text.encode() if isinstance(text, str) else tuple(t.encode() for t in text)

        self.mark = mark
        self.sep, self.space, self.colon = mark(SEP), mark(" "), mark(" : ")
        self.plain: dict = {}  # (header, first word of the message) -> (host, pid)
        self.other: dict = {}  # (header, first word) -> _Channels, or ((host, pid), continuations)
        self.specs: dict = {}  # "05/0" of "Channel 05/0 : ..." -> ("", True) or _BAD
        self.rests: dict = {}  # "3[3] -> 11[3] [send] via NET/IB/3/GDRDMA" -> (via, local rank) or _BAD

    def store(self, cache: dict, key: str, value: object) -> None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[self.mark(key)] = value


class BatchReader:
    """Feeds lists of lines (``str``, or ``bytes`` of ASCII) into one ``LogAggregator``.

    Channel lines are counted per rank and transport and booked on the ranks by :meth:`flush`
    (the aggregator calls it before it books a channel line itself, and when a file ends)."""

    def __init__(self, agg: LogAggregator) -> None:
        self.agg = agg
        self.text, self.raw = _Caches(str), _Caches(bytes)
        self.counts: dict[RankState, dict[str, int]] = {}  # rank -> via -> channel lines not booked yet
        self.touched: list[_Channels] = []  # entries whose counts are not empty, in first-seen order
        self.first_local: dict[RankState, int] = {}  # unnumbered rank -> local rank of its first channel
        # The whole-batch path: headers whose process exists, and first words that are plain unless
        # a continuation follows (as " NCCL INFO " + word + " ", most useful first), learnt from slow lines.
        self.heads: dict[bytes, tuple] = {}
        self.known: set[bytes] = set()  # the keys of heads, as a set: set <= set is the fast subset test
        self.markers: list[tuple[bytes, tuple[bytes, ...]]] = []  # (word's place, its continuations')
        self.min_whole = WHOLE_BATCH_MIN_LINES
        self.whole_chunks = 0  # chunks booked at once (tests and benchmarks read it)

    def feed(self, lines: list, stats: FileStats) -> None:
        """Account for ``lines`` (already counted in ``stats.lines``), in order."""
        if not lines:
            return
        raw = isinstance(lines[0], bytes)
        c = self.raw if raw else self.text
        sep, space, colon, kind = c.sep, c.space, c.colon, type(lines[0])
        partition, startswith = kind.partition, kind.startswith
        plain_get, other_get, specs_get, rests_get = c.plain.get, c.other.get, c.specs.get, c.rests.get
        agg, touched, first_local = self.agg, self.touched, self.first_local
        channels = slow = 0
        last_key = agg._last_key
        for line in lines:
            head, _, msg = partition(line, sep)  # partition takes one argument: no argument parsing
            word, _, rest = partition(msg, space)
            key = plain_get((head, word))
            if key is not None:
                last_key = key
                continue
            other = other_get((head, word))
            if other is None:
                slow += 1
                agg._last_key = last_key
                self.slow(line.decode("utf-8", "replace") if raw else line, stats)
                last_key = agg._last_key
            elif other.__class__ is tuple:  # plain unless a continuation follows
                if startswith(rest, other[1]):
                    slow += 1
                    agg._last_key = last_key
                    self.slow(line.decode("utf-8", "replace") if raw else line, stats)
                    last_key = agg._last_key
                else:
                    last_key = other[0]
            else:  # a channel line of a known header: "Channel 05/0 : 3[3] -> 11[3] [send] via ..."
                last_key = other.key
                spec, found, after = partition(rest, colon)
                spec = specs_get(spec) if found else _BAD
                after = rests_get(after) if spec is not _BAD else _BAD
                if spec is None or after is None:  # a new spec or rest: parse both
                    spec, after = self._learn(c, rest)
                if spec is _BAD or after is _BAD:
                    continue  # not a channel line after all: plain
                channels += 1
                counts = other.counts
                if counts is not None:
                    if not counts:
                        touched.append(other)
                    counts[after[0]] = counts.get(after[0], 0) + 1
                    rank = other.rank
                    if rank.rank is None and rank not in first_local:
                        first_local[rank] = after[1]
        agg._last_key = last_key
        plain = len(lines) - channels - slow
        agg._info_lines += plain
        stats.nccl_lines += plain + channels
        if channels:
            agg.events["channel"] = agg.events.get("channel", 0) + channels

    def feed_chunk(self, body: bytes, lines: int, stats: FileStats) -> None:
        """Account for ``body``: ``lines`` whole lines of ASCII without NUL, none overlong (already
        counted in ``stats.lines``), joined by newlines. Tried whole first, else line by line."""
        if lines < self.min_whole or not self._all_plain(body, lines, stats):
            self.feed(body.split(b"\n"), stats)

    def _all_plain(self, body: bytes, n: int, stats: FileStats) -> bool:
        """Book the ``n`` lines of ``body`` at once when every one is plain; False (nothing booked)
        otherwise.

        Every line is plain when (1) the chunk holds exactly ``n`` `` NCCL INFO ``, and cut there
        every piece between two of them holds a newline (there are ``n - 1``), so every line holds
        exactly one;
        (2) each header before it is known (a slow line of it made its process), so it is where
        the line reader finds the level: a known header holds no `` NCCL `` and ends in a digit or
        ``]``, so none straddles it; (3) the first words, counted as ``" NCCL INFO " + word + " "``
        for words that are plain unless one of their continuations follows (none does anywhere in
        the chunk), cover every line: each line has one place to be counted at, so covering ``n``
        lines takes ``n`` distinct lines."""
        heads, markers = self.heads, self.markers
        if not heads or not markers:
            return False
        covered = 0
        used = []
        for marker in markers[:_MARKERS_TRIED]:
            found = body.count(marker[0])
            if found:
                if any(map(body.__contains__, marker[1])):  # "Connected all rings": not plain
                    return False
                covered += found
                used.append(marker)
                if covered >= n:
                    break
        if covered != n:
            return False
        pieces = body.split(_SEP_B)  # head 0 | msg 0 \n head 1 | ... | msg n-1
        if len(pieces) != n + 1 or b"\n" in pieces[0]:  # (the count: an early exit; the newlines decide)
            return False
        last = pieces[0]
        if n > 1:
            tails = list(map(bytes.rpartition, pieces[1:-1], repeat(b"\n")))
            if set(map(_MIDDLE, tails)) != {b"\n"}:
                return False
            known = self.known
            if pieces[0] not in known or not known.issuperset(map(_LAST, tails)):
                return False
            last = tails[-1][2]
        elif last not in heads:
            return False
        if markers[: len(used)] != used:  # the words of this chunk first: the next is likely alike
            self.markers = used + [m for m in markers if m not in used]
        agg = self.agg
        agg._last_key = heads[last]
        agg._info_lines += n
        stats.nccl_lines += n
        self.whole_chunks += 1
        return True

    def flush(self) -> None:
        """Book the channel lines counted so far on their ranks, in first-seen order."""
        for entry in self.touched:
            rank = entry.rank
            for via, count in entry.counts.items():
                rank.add_channel(via, self.first_local.get(rank), count)
            entry.counts.clear()
        self.touched.clear()
        self.first_local.clear()

    def _learn(self, c: _Caches, rest: str | bytes) -> tuple[tuple, tuple]:
        """Parse what follows ``Channel `` on a line whose header is known, and remember it.

        The message is right-stripped first, as :func:`fabricscope.nccl.log.parse_line` does."""
        text = rest.decode("utf-8", "replace") if isinstance(rest, bytes) else rest
        spec_text, found, after_text = text.partition(" : ")
        if not found:
            return _BAD, _BAD
        spec = ("", True) if _SPEC.fullmatch("Channel " + spec_text) else _BAD
        match = _REST.match(after_text.rstrip())
        if match is None:
            after = _BAD
        else:
            src, dst, direction, via = match.groups()
            after = (via, int(dst if direction == "receive" else src))
        c.store(c.specs, spec_text, spec)
        c.store(c.rests, after_text, after)
        return spec, after

    def slow(self, line: str, stats: FileStats) -> None:
        """One line the caches do not know: classified in full, and learnt from."""
        line = line.rstrip()
        fed = self.agg.feed_line(line, stats)
        i = line.find(" NCCL ")
        if fed is None or not line.startswith(SEP, i):
            return
        header, kind = fed
        key = (header.host, header.pid)
        word, space, _rest = line[i + _AFTER :].partition(" ")
        if not space or not word:
            return
        begin = (line[:i], word)
        if line.isascii():  # the whole-batch path reads bytes batches only
            if len(self.heads) >= _CACHE_LIMIT:
                self.heads.clear()
                self.known.clear()
            head = begin[0].encode()
            self.heads[head] = key
            self.known.add(head)
        if kind == "channel" and word == "Channel":
            rank = self.agg._rank_of(header) if header.cuda_dev is not None else None
            counts = None if rank is None else self.counts.setdefault(rank, {})
            for c in self._caches(line):
                c.store(c.other, begin, _Channels(key, rank, counts))
            return
        continuations = _word_class(word) if kind == "info" else None
        if continuations is None:
            return
        if line.isascii():
            start = SEP + word + " "
            marker = (start.encode(), tuple((start + more).encode() for more in continuations))
            if len(self.markers) < _MAX_MARKERS and marker not in self.markers:
                self.markers.append(marker)
        for c in self._caches(line):
            if continuations:
                c.store(c.other, begin, (key, tuple(map(c.mark, continuations))))
            else:
                c.store(c.plain, begin, key)

    def _caches(self, line: str) -> tuple[_Caches, ...]:
        """The caches a line learnt from goes to: bytes lines never hold anything but ASCII."""
        return (self.text, self.raw) if line.isascii() else (self.text,)
