"""The fast path of the NCCL log reader: most lines of a big log cost one dict lookup.

A 10,000-GPU job writes about 100 GB of ``NCCL_DEBUG=INFO`` output; nearly all of it is lines the
verdicts only count ("AllReduce: opCount ...", "Connected to proxy ..."), and most of the rest is
channel lines. :class:`BatchReader` learns, from lines it classified the slow way, which line
*beginnings* are plain: the text up to and including the first word of the message
(``host:pid:tid [dev] NCCL INFO AllReduce: ``). A later line with a known beginning is plain
without parsing it, because whether an INFO message means anything to
:func:`fabricscope.nccl.log.parse.classify_info` depends only on its header and its first word (see
:func:`word_class`). Channel lines are cut at the first `` : ``: both halves repeat (``Channel 05/0``;
``: 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`` for every channel of a rank), so each is parsed once,
and their counts are booked per rank and transport in bulk.

Most of a big log is long runs of such lines (the collectives' lines of every rank, after init).
A chunk of ASCII is first tried whole (:meth:`BatchReader.feed_chunk`): a few ``bytes.count``
calls and one set of its headers, all in C, prove that every line carries exactly one
`` NCCL INFO ``, a known header and a first word that is plain; then the chunk costs no Python
step per line. A chunk of channel lines (the second phase of a job's init: tens of lines per
rank) is proven the same way to hold only channel lines of known headers, specs and rests; its
lines are counted per (header, rest) in C and booked on the ranks in bulk later
(:meth:`BatchReader._settle`). Any doubt sends the chunk down the per-line loop.

Everything else -- a new header, WARN lines, return codes, init lines -- goes through
:meth:`fabricscope.nccl.log.aggregate.LogAggregator.feed_line`, so the result
is the one of feeding every line alone (the property test in tests/nccl holds the two equal).
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from fabricscope.nccl.log.parse import INFO_PREFIXES
from fabricscope.nccl.log.place import ZERO_DIGITS

if TYPE_CHECKING:
    from fabricscope.nccl.log.aggregate import FileStats, LogAggregator, RankState

SEP = " NCCL INFO "
_AFTER = len(SEP)
_SEP_B = SEP.encode()
_CHANNEL_B = b" NCCL INFO Channel "
_FIRST, _MIDDLE, _LAST = itemgetter(0), itemgetter(1), itemgetter(2)
WHOLE_BATCH_MIN_LINES = 32  # smaller batches: the per-line loop is as cheap
_MARKERS_TRIED = 8  # plain first words counted per batch before giving up on the whole-batch path
_MAX_MARKERS = 256  # plain first words remembered (a real log has a handful; a hostile one no quadratic cost)
_CACHE_LIMIT = 1 << 17  # entries per cache; cleared when full (a cache, not state)
_PENDING_LIMIT = 1 << 16  # (header, rest) pairs counted by whole channel chunks before they are booked
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


def _spec(text: str) -> tuple[Any, ...]:
    """What ``05/0`` of ``Channel 05/0 : ...`` stands for: ``("", True)``, or _BAD if malformed."""
    return ("", True) if _SPEC.fullmatch("Channel " + text) else _BAD


def _rest(text: str) -> tuple[Any, ...]:
    """``(via, local rank)`` of what follows a channel line's first `` : ``, or _BAD. Right-stripped
    first, as :func:`fabricscope.nccl.log.parse.parse_line` strips the message."""
    match = _REST.match(text.rstrip())
    if match is None:
        return _BAD
    src, dst, direction, via = match.groups()
    return (via, int(dst if direction == "receive" else src))


class _Channels:
    """What a channel line's beginning (``host:pid:tid [dev] NCCL INFO Channel ``) stands for."""

    __slots__ = ("counts", "key", "rank")

    def __init__(self, key: tuple[Any, ...], rank: RankState | None, counts: dict[str, int] | None) -> None:
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
        self.plain: dict[Any, Any] = {}  # (header, first word of the message) -> (host, pid)
        self.other: dict[Any, Any] = {}  # (header, first word) -> _Channels, or ((host, pid), continuations)
        self.specs: dict[Any, Any] = {}  # "05/0" of "Channel 05/0 : ..." -> ("", True) or _BAD
        self.rests: dict[
            Any, Any
        ] = {}  # "3[3] -> 11[3] [send] via NET/IB/3/GDRDMA" -> (via, local rank) or _BAD

    def store(self, cache: dict[Any, Any], key: str, value: object) -> None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[self.mark(key)] = value


def _remember(table: dict[bytes, Any], known: set[bytes], head: bytes, value: Any) -> None:
    """``table[head] = value`` in a cache of at most ``_CACHE_LIMIT`` heads (emptied when full),
    ``known`` its keys as a set (``set <= set`` runs in C on the whole-chunk paths)."""
    if len(table) >= _CACHE_LIMIT:
        table.clear()
        known.clear()
    table[head] = value
    known.add(head)


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
        self.heads: dict[bytes, tuple[Any, ...]] = {}
        self.known: set[bytes] = set()  # the keys of heads, as a set: set[Any] <= set is the fast subset test
        self.markers: list[tuple[bytes, tuple[bytes, ...]]] = []  # (word's place, its continuations')
        self.min_whole = WHOLE_BATCH_MIN_LINES
        self.whole_chunks = 0  # chunks booked at once (tests and benchmarks read it)
        # The whole-channel-chunk path: what a channel line's header, spec ("05/0") and rest stand
        # for, as bytes; and its counts per (header, rest) not yet booked on the ranks. Entries are
        # only learnt or dropped inside feed(), which books the pending counts first.
        self.channel_heads: dict[bytes, _Channels] = {}
        self.channel_known: set[bytes] = set()  # the keys of channel_heads (set <= set runs in C)
        self.good_specs: set[bytes] = set()
        self.good_rests: dict[bytes, tuple[Any, ...]] = {}  # rest -> (via, local rank)
        self.good_rest_set: set[bytes] = set()
        self.pending: Counter[tuple[bytes, bytes]] = Counter()

    def feed(self, lines: list[Any], stats: FileStats) -> None:
        """Account for ``lines`` (already counted in ``stats.lines``), in order."""
        if not lines:
            return
        if self.pending:  # channel lines before these come first on their ranks
            self._settle()
        raw = isinstance(lines[0], bytes)
        c = self.raw if raw else self.text
        sep, space, colon, kind = c.sep, c.space, c.colon, type(lines[0])
        partition, startswith = kind.partition, kind.startswith
        plain_get, other_get, specs_get, rests_get = c.plain.get, c.other.get, c.specs.get, c.rests.get
        agg, touched, first_local = self.agg, self.touched, self.first_local
        channels = slow = unplaced = 0
        last_key = agg.last_key
        skips, zero = agg.placer.skips, ZERO_DIGITS
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
                # A line of a shape already set aside (a training log's progress line): no decoding,
                # header parse or catalogue look-up, one translate and one set look-up.
                shape = line.rstrip() if raw else line.rstrip().encode("utf-8", "surrogatepass")
                if skips(shape.translate(zero)):  # log.place.shape_of, inlined
                    unplaced += 1
                    continue
                agg.last_key = last_key
                self.slow(line.decode("utf-8", "replace") if raw else line, stats)
                last_key = agg.last_key
            elif other.__class__ is tuple:  # plain unless a continuation follows
                if startswith(rest, other[1]):
                    slow += 1
                    agg.last_key = last_key
                    self.slow(line.decode("utf-8", "replace") if raw else line, stats)
                    last_key = agg.last_key
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
        agg.last_key = last_key
        stats.unrecognised_lines += unplaced
        plain = len(lines) - channels - slow
        agg.info_lines += plain
        stats.nccl_lines += plain + channels
        if channels:
            agg.events["channel"] = agg.events.get("channel", 0) + channels

    def feed_chunk(self, body: bytes, lines: int, stats: FileStats) -> None:
        """Account for ``body``: ``lines`` whole lines of ASCII without NUL, none overlong (already
        counted in ``stats.lines``), joined by newlines. Tried whole first, else line by line."""
        if lines >= self.min_whole:
            # The first line tells which path could take the chunk: a channel line is never plain.
            if body.startswith(_CHANNEL_B, body.find(_SEP_B)):
                if self._all_channels(body, lines, stats):
                    return
            elif self._all_plain(body, lines, stats):
                return
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
        agg.last_key = heads[last]
        agg.info_lines += n
        stats.nccl_lines += n
        self.whole_chunks += 1
        return True

    def _all_channels(self, body: bytes, n: int, stats: FileStats) -> bool:
        """Count the ``n`` lines of ``body`` at once when every one is a channel line the per-line
        loop would count (known header, spec and rest); False (nothing counted) otherwise.

        Cut at `` NCCL INFO Channel ``, each piece but the first is a message (the per-line loop's
        ``rest``), then a newline and the next line's header. The message is cut at its first
        `` : `` into a spec and a rest, each of which must be one the per-line loop parses as well
        formed. That proves one cut per line: a piece without a newline leaves an empty spec, one
        with two a newline in the rest, a missing `` : `` an empty rest, and none of these is ever
        taken (a rest is right-stripped before it is parsed, so for a blank line between two
        channel lines it is :meth:`_learn_rests` that refuses the newline; the piece count backs
        it). Each header must be known: a known header holds no `` NCCL `` and ends in a digit or
        ``]``, so the cut is where the line reader finds the level and the first word."""
        known = self.channel_known
        if not known or not self.good_rest_set:
            return False
        pieces = body.split(_CHANNEL_B)  # head 0 | rest 0 \n head 1 | ... | rest n-1
        if len(pieces) != n + 1 or b"\n" in pieces[0]:  # early exits; the specs and rests decide
            return False
        heads = [pieces[0]]
        if n > 1:
            tails = list(map(bytes.rpartition, pieces[1:-1], repeat(b"\n")))
            heads += map(_LAST, tails)
            rests = list(map(_FIRST, tails))
            rests.append(pieces[-1])
        else:
            rests = [pieces[1]]
        if not known.issuperset(heads):
            return False
        parts = list(map(bytes.partition, rests, repeat(b" : ")))
        if not self.good_specs.issuperset(map(_FIRST, parts)) and not self._learn_specs(
            set(map(_FIRST, parts))
        ):
            return False
        rests = list(map(_LAST, parts))
        if not self.good_rest_set.issuperset(rests) and not self._learn_rests(set(rests)):
            return False
        self.pending.update(zip(heads, rests))  # first-seen order kept: the ranks' first channels
        agg = self.agg
        agg.last_key = self.channel_heads[heads[-1]].key
        stats.nccl_lines += n
        agg.events["channel"] = agg.events.get("channel", 0) + n
        self.whole_chunks += 1
        if len(self.pending) >= _PENDING_LIMIT:
            self._settle()
        return True

    def _learn_specs(self, specs: set[bytes]) -> bool:
        """Learn the new specs of a channel chunk (a new channel number per round of a job's
        init): True when all are well formed, else False (the chunk goes line by line)."""
        new = specs - self.good_specs
        if len(self.good_specs) + len(new) >= _CACHE_LIMIT or any(_spec(s.decode()) is _BAD for s in new):
            return False
        self.good_specs |= new
        return True

    def _learn_rests(self, rests: set[bytes]) -> bool:
        """As :meth:`_learn_specs`, for the rests (``3[3] -> 11[3] [send] via NET/IB/3/GDRDMA``)."""
        new = rests - self.good_rest_set
        if len(self.good_rests) + len(new) >= _CACHE_LIMIT:
            return False  # (clearing would drop rests that pending counts still name)
        parsed = {rest: _rest(rest.decode()) for rest in new}
        if _BAD in parsed.values() or any(b"\n" in rest for rest in new):  # a blank line's newline
            return False
        self.good_rests.update(parsed)
        self.good_rest_set |= new
        return True

    def _settle(self) -> None:
        """Put the channel lines counted by whole chunks where the per-line loop puts them, in the
        order their (header, rest) pairs were first seen: the same counts, ranks first touched in
        the same order, and the same first local rank of an unnumbered rank."""
        heads, rests = self.channel_heads, self.good_rests
        touched, first_local = self.touched, self.first_local
        for (head, rest), count in self.pending.items():
            entry = heads[head]
            counts = entry.counts
            if counts is None:
                continue
            via, local = rests[rest]
            if not counts:
                touched.append(entry)
            counts[via] = counts.get(via, 0) + count
            rank = entry.rank
            if rank.rank is None and rank not in first_local:
                first_local[rank] = local
        self.pending.clear()

    def flush(self) -> None:
        """Book the channel lines counted so far on their ranks, in first-seen order."""
        if self.pending:
            self._settle()
        for entry in self.touched:
            rank = entry.rank
            for via, count in entry.counts.items():
                rank.add_channel(via, self.first_local.get(rank), count)
            entry.counts.clear()
        self.touched.clear()
        self.first_local.clear()

    def _learn(self, c: _Caches, rest: str | bytes) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """Parse what follows ``Channel `` on a line whose header is known, and remember it.

        The message is right-stripped first, as :func:`fabricscope.nccl.log.parse.parse_line` does."""
        text = rest.decode("utf-8", "replace") if isinstance(rest, bytes) else rest
        spec_text, found, after_text = text.partition(" : ")
        if not found:
            return _BAD, _BAD
        spec, after = _spec(spec_text), _rest(after_text)
        c.store(c.specs, spec_text, spec)
        c.store(c.rests, after_text, after)
        if c is self.raw:  # the whole-channel-chunk path's sets (learnt inside feed(): nothing pending)
            if len(self.good_rests) >= _CACHE_LIMIT or len(self.good_specs) >= _CACHE_LIMIT:
                self.good_rests.clear()
                self.good_rest_set.clear()
                self.good_specs.clear()
            if spec is not _BAD:
                self.good_specs.add(spec_text.encode())
            if after is not _BAD:
                self.good_rests[after_text.encode()] = after
                self.good_rest_set.add(after_text.encode())
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
            _remember(self.heads, self.known, begin[0].encode(), key)
        if kind == "channel" and word == "Channel":
            rank = self.agg.rank_of(header) if header.cuda_dev is not None else None
            counts = None if rank is None else self.counts.setdefault(rank, {})
            entry = _Channels(key, rank, counts)
            for c in self._caches(line):
                c.store(c.other, begin, entry)
            if line.isascii():  # (inside feed(): nothing pending)
                _remember(self.channel_heads, self.channel_known, begin[0].encode(), entry)
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
