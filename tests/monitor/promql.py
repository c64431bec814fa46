"""Just enough PromQL reading to list the metric names an expression selects."""

from __future__ import annotations

import re

FUNCTIONS = {
    "abs",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_quantile",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "label_values",
    "last_over_time",
    "ln",
    "log2",
    "log10",
    "max_over_time",
    "min_over_time",
    "predict_linear",
    "quantile_over_time",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_desc",
    "sqrt",
    "stddev_over_time",
    "sum_over_time",
    "time",
    "timestamp",
    "vector",
}
AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
}
KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_OFFSET = re.compile(r"\boffset\s+-?[0-9a-z]+", re.IGNORECASE)
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_NUMBER = re.compile(r"(?<![A-Za-z_:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)?\s*(\{[^}]*\})?\s*,?\s*([A-Za-z_]\w*)\s*\)\s*$"
)


class UnknownToken(ValueError):
    pass


def metric_names(expr: str) -> set[str]:
    """Metric names selected by ``expr``; raises :class:`UnknownToken` for a function that is not PromQL."""
    match = _LABEL_VALUES.match(expr)
    if match is not None:  # Grafana's label_values(metric{...}, label)
        return {match.group(1)} if match.group(1) else set()
    text = _STRING.sub('""', expr)
    text = _VARIABLE.sub(" 1m ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _OFFSET.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for ident in _IDENT.finditer(text):
        word = ident.group(0)
        following = text[ident.end() :].lstrip()[:1]
        if word in KEYWORDS:  # "or (a < b)" is an operator, not a call
            continue
        if following == "(":
            if word not in FUNCTIONS | AGGREGATIONS:
                raise UnknownToken(f"unknown function {word!r} in {expr!r}")
            continue
        if word in KEYWORDS or word in AGGREGATIONS:
            continue
        names.add(word)
    return names
