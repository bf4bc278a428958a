"""What a training log line says: the job's own MetricDefinitions first, then readers for the common formats.

Pure and fast: cheap substring checks pick the regexes to run (docs/design/log-rules.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from math import isfinite

from training_guard.config.frozen import frozen

TAB = "#011"  # how CloudWatch Logs shows a tab written by a SageMaker training container
MAX_NAME = 255  # a metric name's length, as in the configuration: the state must fit a DynamoDB item
MAX_COVER_CACHE = 4096  # (definition, key) answers kept; a log's keys are few, a hostile log's are not

# A number as Python, C and the frameworks print it, nan and inf included (float() reads every form).
_NUM = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[nN][aA][nN]|[iI][nN][fF](?:inity|INITY)?)"
# Hugging Face Trainer: `{'loss': 0.6931, 'epoch': 0.5}`; Transformers 5 quotes the values: `{'loss': '2.192'}`.
_DICT_ITEM = re.compile(r"""['"]([A-Za-z_][\w/.\-]{0,254})['"]: ['"]?(""" + _NUM + r""")['"]?(?=[,}\s])""")
# XGBoost `[12]\ttrain-rmse:0.1\tvalidation-rmse:0.2`, LightGBM `[10]\tvalid_0's l2: 0.123`.
_XGB_ITEM = re.compile(r"(?:^|\t)([A-Za-z_][\w.@\-]{0,254}):(" + _NUM + r")(?=\t|\s*$)")
_LGBM_ITEM = re.compile(r"(?:^|\t)(\w{1,127})'s ([\w.@\-]{1,127}): (" + _NUM + r")(?=\t|\s*$)")
# SageMaker's built-in algorithms: `#quality_metric: host=algo-1, epoch=0, train mse_objective <loss>=0.12`.
_QUALITY = re.compile(r"#quality_metric: .*?\b(train|validation|test) (\S{1,200}) <(\w+)>=(" + _NUM + r")")
# Keras: `469/469 [===] - 3s 6ms/step - loss: 0.2345 - accuracy: 0.91 - val_loss: 0.31` (Keras 3: any order).
_KERAS_ITEM = re.compile(r"- ([A-Za-z_]\w{0,254}): (" + _NUM + r")(?![\w.])")  # a literal first: re skips fast
# PyTorch Lightning's progress bar: `... 30.00it/s, loss=0.123, v_num=0, train_loss=0.123, val_loss=0.2]`.
_LIGHTNING_ITEM = re.compile(r"(?<![\w.])([A-Za-z_][\w/.]{0,254})=(" + _NUM + r")(?=[,\]\s]|$)")
# Anything naming a loss (`loss = nan`, `Average loss: 0.0335`), after str.find("oss"): 10x faster than a regex.
_AFTER_LOSS = re.compile(r"'?\s*[:=]\s*(" + _NUM + r")(?![\w.])")
_HAS_TAB = re.compile(TAB).search
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
_LOSS_INITIALS = frozenset("lL")


class DefinitionsError(ValueError):
    """The job's MetricDefinitions cannot be read: the message names the metric and the fix."""


@frozen
class Point:
    """One value a line gives a metric; nan and inf are kept, they are the signal."""

    metric: str
    value: float
    reader: str


DEFINED = "MetricDefinitions"  # the reader of a point the job's own definitions read
# A point as the evaluator handles it (a tuple costs a tenth of a frozen dataclass): (metric, value, reader).
RawPoint = tuple[str, float, str]
# A line's points for the evaluator's fast path: (reader, [(metric, the number as written)]); float() is the caller's.
TextPoints = tuple[str, list[tuple[str, str]]]
RESCAN: TextPoints = ("", [])  # the line must be read by `scan` (its points come from more than one reader)


class LineReader:
    """Reads points from log lines: the job's definitions, then the built-in readers for what they do not name."""

    def __init__(self, definitions: Sequence[tuple[str, str]] = ()) -> None:
        compiled: list[tuple[str, re.Pattern[str], str]] = []
        for name, regex in definitions:
            try:
                pattern = re.compile(regex)
            except (re.error, TypeError) as exc:
                raise DefinitionsError(
                    f"MetricDefinitions {name!r}: its Regex is not a valid regular expression ({exc}); fix it in the "
                    "estimator's metric_definitions"
                ) from None
            if pattern.groups < 1:
                raise DefinitionsError(
                    f"MetricDefinitions {name!r}: its Regex has no capture group, so it captures no value; put the "
                    "number in parentheses, e.g. loss: ([0-9.eE+-]+|nan)"
                )
            # What the regex is written against, tabs as tabs, for `_covers` (SageMaker's own regexes say `#011`).
            compiled.append((name, pattern, pattern.pattern.replace(TAB, "\t")))
        self._definitions = tuple(compiled)
        self._searches = tuple((name, pattern.search) for name, pattern, _ in compiled)
        # only definitions naming a training loss replace the built-in readers' loss (XGBoost's declare validation)
        self._names_a_loss = any((role := loss_role(name)) is not None and not role[0] for name, _, _ in compiled)
        self._covers: dict[tuple[int, str], bool] = {}
        self._scan: Callable[[str], tuple[list[RawPoint], str | None]] = (
            self._scan_own_series if self._names_a_loss else self._scan_with_definitions if compiled else _builtin_only
        )
        # For the evaluator: a line's points as written, of one reader (RESCAN: ask `scan`); None: `scan` every line.
        self.texts: Callable[[str], TextPoints | None] | None = None
        if type(self).scan is LineReader.scan:  # a subclass's own `scan` sees every line
            if not compiled:
                self.texts = _builtin_text
            elif self._names_a_loss:
                self.texts = self._texts_own_series

    @property
    def definitions(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, pattern.pattern) for name, pattern, _ in self._definitions)

    def read(self, message: str) -> tuple[Point, ...]:
        points, _ = self.scan(message)
        return tuple(Point(metric, value, reader) for metric, value, reader in points)

    def scan(self, message: str) -> tuple[list[RawPoint], str | None]:
        """The line's points, and the name of a definition whose capture is not a number (or None).

        A subclass that overrides it sees every line `evaluate` reads (it then reads none through `texts`)."""
        return self._scan(message)

    def _scan_with_definitions(self, message: str) -> tuple[list[RawPoint], str | None]:
        """Definitions that name no training loss: a built-in point is dropped where a matching one spells its key."""
        out: list[RawPoint] = []
        unparsed: str | None = None
        matched: list[int] = []
        for index, (name, pattern, _) in enumerate(self._definitions):
            match = pattern.search(message)
            if match is not None and (captured := match.group(1)) is not None:
                matched.append(index)
                try:
                    out.append((name, float(captured), DEFINED))
                except ValueError:
                    unparsed = name
        if not matched:
            return _builtin(message), unparsed
        out.extend(p for p in _builtin(message) if not isfinite(p[1]) or not self._covered_by(matched, p[0]))
        return out, unparsed

    def _scan_own_series(self, message: str) -> tuple[list[RawPoint], str | None]:
        """Definitions naming a training loss own the series; built-in readers add only the `nan`/`inf` they miss."""
        out: list[RawPoint] = []
        unparsed: str | None = None
        for name, pattern, _ in self._definitions:
            match = pattern.search(message)
            if match is not None and (captured := match.group(1)) is not None:
                try:
                    out.append((name, float(captured), DEFINED))
                except ValueError:
                    unparsed = name
        if not out and unparsed is None:
            return _builtin(message), None
        # nan and inf, in any case, hold an n: two one-letter scans spare most lines the lower() and its copy
        if ("n" in message or "N" in message) and ("nan" in (lowered := message.lower()) or "inf" in lowered):
            out.extend(p for p in _builtin(message) if not isfinite(p[1]))
        return out, unparsed

    def _texts_own_series(self, message: str) -> TextPoints | None:
        """`_scan_own_series` with the numbers as written; a line with a built-in reader's nan or inf is RESCAN."""
        out: list[tuple[str, str]] = []
        for name, search in self._searches:
            match = search(message)
            if match is not None and (captured := match.group(1)) is not None:
                out.append((name, captured))
        if not out:
            return _builtin_text(message)
        nan_or_inf = ("n" in message or "N" in message) and ("nan" in (low := message.lower()) or "inf" in low)
        if nan_or_inf and any(not isfinite(p[1]) for p in _builtin(message)):
            return RESCAN
        return DEFINED, out

    def _covered_by(self, matched: list[int], key: str) -> bool:
        return any(self._covered(i, key) for i in matched)

    def _covered(self, index: int, key: str) -> bool:
        """Whether definition `index` names metric `key` of a built-in reader: its regex spells the key as a word."""
        answer = self._covers.get((index, key))
        if answer is None:
            text = self._definitions[index][2]
            answer = re.search(r"(?<![\w\-])" + re.escape(key) + r"(?!\w)", text) is not None
            if len(self._covers) >= MAX_COVER_CACHE:
                self._covers.clear()
            self._covers[(index, key)] = answer
        return answer


def _builtin_only(message: str) -> tuple[list[RawPoint], str | None]:
    return _builtin(message), None


def _builtin(message: str) -> list[RawPoint]:
    found = _builtin_text(message)
    if found is None:
        return []
    reader, pairs = found
    return [(metric, float(number), reader) for metric, number in pairs]


def _builtin_text(message: str) -> TextPoints | None:
    """The common formats, each behind a substring check that most lines fail; the numbers as written."""
    hashed = "#" in message  # one scan rules out both `#011` and `#quality_metric` on most lines
    if hashed and _HAS_TAB(message) is not None:
        message = message.replace(TAB, "\t")
    if "{" in message and ("{'" in message or '{"' in message):
        found: list[tuple[str, str]] = _DICT_ITEM.findall(message)
        if found:
            return "huggingface", found
    if "\t" in message and "]\t" in message:  # a tab first: one char is found fast, a pair only slowly
        rounds = _rounds(message)
        if rounds is not None:
            return rounds
    if hashed and "#quality_metric" in message:
        found = [
            (f"{part}:objective_loss" if tag == "loss" else f"{part}:{metric}", v)
            for part, metric, tag, v in _QUALITY.findall(message)
        ]
        if found:
            return "sagemaker", found
    if "- " in message and ": " in message:
        found = _KERAS_ITEM.findall(message)
        if found:
            return "keras", found
    if "=" in message and ("it/s" in message or "s/it" in message or "loss=" in message):
        found = _LIGHTNING_ITEM.findall(message)
        if found:
            return "lightning", found
    if "oss" in message and (found := _generic(message)):
        return "generic", found
    return None


def _generic(message: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = message.find("oss", 1)
    while at > 0:
        end = at + 3
        match = _AFTER_LOSS.match(message, end)
        if match is not None and message[at - 1] in _LOSS_INITIALS and message[end : end + 1] not in _NAME_CHARS:
            start = at - 1
            while start > 0 and message[start - 1] in _NAME_CHARS and end - start < MAX_NAME:
                start -= 1
            if end - start == 4 and start > 1 and message[start - 1] == " ":  # `Average loss`, `train loss`
                word = start - 1
                while word > 0 and message[word - 1].isalpha():
                    word -= 1
                start = word if word < start - 1 and end - word <= MAX_NAME else start
            out.append((message[start:end], match.group(1)))
        at = message.find("oss", end)
    return out


def _rounds(message: str) -> TextPoints | None:
    if "'s " in message:
        found = [(f"{part}-{metric}", v) for part, metric, v in _LGBM_ITEM.findall(message)]
        return ("lightgbm", found) if found else None
    found = _XGB_ITEM.findall(message)
    return ("xgboost", found) if found else None


_ROLE = re.compile(r"^(validation|valid|val|eval|test|dev|training|train)(?:_\d+)?(?:[:_/\-. ]+|(?=loss))(.+)$")
_VALIDATION_ROLES = frozenset({"validation", "valid", "val", "eval", "test", "dev"})
# XGBoost's and LightGBM's loss metrics (smdebug's `losses` collection takes every `<set>-<metric>` but auc/map).
_BOOSTING_LOSSES = frozenset(
    (
        *("rmse", "rmsle", "mse", "mae", "mape", "mphe", "logloss", "mlogloss", "error", "merror", "l1", "l2"),
        *("l2_root", "binary_logloss", "multi_logloss", "binary_error", "multi_error", "huber", "fair", "poisson"),
        *("gamma", "tweedie", "quantile", "cross_entropy", "poisson-nloglik", "gamma-nloglik", "cox-nloglik"),
        *("tweedie-nloglik", "aft-nloglik", "objective_loss"),
    )
)


def loss_role(name: str) -> tuple[bool, str, int] | None:
    """(is validation, the metric's own name, rank: 0 `loss`, 1 a loss word, 2 a boosting loss) or None."""
    lowered = name.lower()
    match = _ROLE.match(lowered)
    role, metric = (match.group(1), match.group(2)) if match else ("", lowered)
    metric = metric.split("@", 1)[0]
    if metric == "loss":
        rank = 0
    elif "loss" in metric and "scale" not in metric:
        rank = 1
    elif metric in _BOOSTING_LOSSES and role:
        rank = 2
    else:
        return None
    return role in _VALIDATION_ROLES, metric, rank


def loss_metrics(names: Iterable[str], *, loss: str | None, validation: str | None) -> tuple[str | None, str | None]:
    """Which metric is the loss and which the validation loss: as configured (or tagged), else the best-ranked name."""
    train: list[tuple[int, int, str, str]] = []
    valid: list[tuple[int, int, str, str]] = []
    for name in set(names):
        role = loss_role(name)
        if role is not None:
            (valid if role[0] else train).append((role[2], len(name), name, role[1]))
    chosen = loss
    metric_of_loss = None
    if chosen is None and train:
        _, _, chosen, metric_of_loss = min(train)
    elif chosen is not None:
        role = loss_role(chosen)
        metric_of_loss = role[1] if role else None
    if validation is None and valid:
        # The validation series of the same metric as the loss first (validation-rmse for train-rmse).
        validation = min(valid, key=lambda v: (v[3] != metric_of_loss, v[0], v[1], v[2]))[2]
    return chosen, validation
