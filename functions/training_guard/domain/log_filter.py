"""The subscription filter pattern a configuration deploys, pure: infra subscribes with it, `simulate` applies it."""

from __future__ import annotations

import re

from training_guard import contract
from training_guard.config.model import LogRules

# A metric name the configuration names, added to the default regex when CloudWatch Logs' dialect can spell it.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_\-]+")


def default_filter_pattern(metrics: tuple[str | None, ...] = ()) -> str:
    """The contract's pattern, widened by the configured loss and validation metrics the pattern would not select."""
    regex = re.compile(contract.LOG_FILTER_PATTERN.strip("%"))
    extra = [m for m in metrics if m and _PLAIN_NAME.fullmatch(m) and not regex.search(m)]
    return contract.LOG_FILTER_PATTERN if not extra else contract.LOG_FILTER_PATTERN[:-1] + "|" + "|".join(extra) + "%"


def effective_filter_pattern(rules: LogRules) -> str:
    """`log_rules.filter_pattern` when set; every line ("") when `log_rules.patterns` has a user's regex (CloudWatch
    Logs' dialect cannot express Python's); otherwise the default, widened by the configured metric names."""
    if rules.filter_pattern is not None:
        return rules.filter_pattern
    if rules.patterns:
        return ""
    return default_filter_pattern((rules.loss_metric, rules.validation_metric))
