"""What a training job costs: list prices, spend so far, spend a stop avoids, and GPUs per instance type.

Pure: no boto3, no clock. Sources, lookup order and arithmetic: docs/design/pricing.md."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from training_guard.config.frozen import frozen
from training_guard.domain.events import (
    COMPLETED,
    FAILED,
    STOPPED,
    InstanceGroup,
    TrainingJob,
)
from training_guard.domain.values import cents, mapping

if TYPE_CHECKING:
    from training_guard.domain.price_data.training_prices import TablePrice

SECONDS_PER_HOUR: Final = 3600.0

PRICE_LIST_SERVICE_CODE: Final = "AmazonSageMaker"
# The Price List Query API has two endpoints, us-east-1 and ap-south-1, whatever the region priced (docs/limits.md).
PRICE_LIST_API_REGION: Final = "us-east-1"
TRAINING_COMPONENT: Final = "Training"
ON_DEMAND: Final = "OnDemand"
HOURLY_UNIT: Final = "hrs"  # priceDimensions.unit, compared case-insensitively
PRICE_CACHE_TTL_SECONDS: Final = 86400  # a day: list prices change rarely, the API is not free of quotas
PRICE_KEY_PREFIX: Final = "price#"  # state-table items price#<region>#<type>, beside the ledger's t# and stop#

SOURCE_API: Final = "price-list-api"
SOURCE_TABLE: Final = "table"

_ENDED = frozenset({COMPLETED, FAILED, STOPPED})


@frozen
class PriceQuote:
    instance_type: str
    region: str
    usd_per_hour: float
    source: str
    as_of: str | None = None  # the price list's publicationDate, or the table entry's date
    reference: str | None = None
    second_hand: bool = False  # a table entry that records another project's reading of the Price List API

    def label(self) -> str:
        if self.source == SOURCE_TABLE:
            second = ", second-hand" if self.second_hand else ""
            return f"shipped price table ({self.as_of or 'undated'}{second})"
        return f"AWS Price List API ({self.as_of})" if self.as_of else "AWS Price List API"

    def as_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "region": self.region,
            "usd_per_hour": self.usd_per_hour,
            "source": self.source,
            "as_of": self.as_of,
            "reference": self.reference,
        }


@frozen
class PriceParse:
    """What one GetProducts answer said about one instance type: a price, or why there is none."""

    quote: PriceQuote | None
    reason: str | None = None
    products: int = 0


def price_cache_key(region: str, instance_type: str) -> str:
    return f"{PRICE_KEY_PREFIX}{region}#{instance_type}"


def get_products_filters(region: str, instance_type: str) -> list[dict[str, str]]:
    # No AWS page lists SageMaker's attribute values: llmeter's names for the same lookup (docs/design/pricing.md).
    wanted = {"regionCode": region, "instanceName": instance_type, "component": TRAINING_COMPONENT}
    return [{"Type": "TERM_MATCH", "Field": name, "Value": value} for name, value in wanted.items()]


def parse_usd(value: Any) -> float | None:
    """A `pricePerUnit.USD` string ("0.1150000000") as a positive finite float; zero, negative or else: None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount <= 0:
        return None
    usd = float(amount)
    return usd if math.isfinite(usd) else None  # "1e999" is a finite Decimal but no float


def parse_price_list(items: Iterable[Any], *, region: str, instance_type: str) -> PriceParse:
    """`instance_type`'s hourly on-demand USD price in `region` from GetProducts' items (docs/design/pricing.md)."""
    prices: dict[float, str | None] = {}
    published: list[str] = []
    count = 0
    for item in items:
        count += 1
        product = _decode(item)
        if product is None or not _is_on_demand_training(product, region, instance_type):
            continue
        for usd in _hourly_usd(product):
            sku = _text(mapping(product.get("product")).get("sku"))
            prices.setdefault(usd, sku)
            if published_at := _text(product.get("publicationDate")):
                published.append(published_at)
    if not prices:
        reason = "no products" if count == 0 else f"none of {count} products has a usable hourly USD price"
        return PriceParse(None, f"{instance_type} in {region}: {reason}", count)
    if len(prices) > 1:
        listed = ", ".join(f"{p:g}" for p in sorted(prices))
        return PriceParse(None, f"{instance_type} in {region}: products disagree ({listed} USD/h)", count)
    ((usd, sku),) = prices.items()
    as_of = max(published)[:10] if published else None
    return PriceParse(PriceQuote(instance_type, region, usd, SOURCE_API, as_of, sku), None, count)


def _decode(item: Any) -> Mapping[str, Any] | None:
    if isinstance(item, Mapping):
        return item
    if not isinstance(item, str | bytes):
        return None
    try:
        decoded = json.loads(item)
    except ValueError:
        return None
    return decoded if isinstance(decoded, Mapping) else None


def _is_on_demand_training(product: Mapping[str, Any], region: str, instance_type: str) -> bool:
    attributes = mapping(mapping(product.get("product")).get("attributes"))
    # The filters asked for these; an answer that says otherwise is not about this job's instances.
    for name, wanted in (("instanceName", instance_type), ("regionCode", region), ("component", TRAINING_COMPONENT)):
        value = attributes.get(name)
        if value is not None and value != wanted:
            return False
    # Managed spot training is billed differently; a spot product is never the list price.
    return not any(isinstance(v, str) and "spot" in v.lower() for v in attributes.values())


def _hourly_usd(product: Mapping[str, Any]) -> list[float]:
    found: list[float] = []
    for offer in mapping(mapping(product.get("terms")).get(ON_DEMAND)).values():
        for raw in mapping(mapping(offer).get("priceDimensions")).values():
            dimension = mapping(raw)
            if str(dimension.get("unit", "")).strip().lower() != HOURLY_UNIT:
                continue
            usd = parse_usd(mapping(dimension.get("pricePerUnit")).get("USD"))
            if usd is not None:
                found.append(usd)
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def table_quote(region: str, instance_type: str) -> PriceQuote | None:
    entry = _table().get((region, instance_type))
    if entry is None:
        return None
    usd = parse_usd(entry.usd_per_hour)
    if usd is None:
        return None
    return PriceQuote(instance_type, region, usd, SOURCE_TABLE, entry.as_of, entry.source, not entry.first_hand)


@cache
def _table() -> dict[tuple[str, str], TablePrice]:
    """The shipped table by (region, type), loaded on first use: the Price List API's fallback, rarely read."""
    from training_guard.domain.price_data.training_prices import TRAINING_PRICES

    return {(p.region, p.instance_type): p for p in TRAINING_PRICES}


@frozen
class Spend:
    """Spend so far and spend a stop avoids, at list price. None means unknown, never zero for want of data."""

    so_far_usd: float | None
    avoided_usd: float | None  # "up to": the job may have ended sooner on its own
    price_source: str | None
    hourly_usd: float | None = None  # all instances of the job together
    upper_bound: bool = False  # managed spot training: the list price is an upper bound
    estimate: bool = True  # False once BillableTimeInSeconds gives the billed time
    billed_seconds: float | None = None  # the time `so_far_usd` is for
    seconds_left: float | None = None  # until MaxRuntimeInSeconds: the time `avoided_usd` is for
    unknown_instance_types: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    quotes: tuple[PriceQuote, ...] = field(default=())
    # False where no stop is in question: spend avoided is then not applicable, not unknown.
    avoided_applies: bool = True

    def without_avoided(self) -> Spend:
        return replace(self, avoided_usd=None, seconds_left=None, avoided_applies=False)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form carried by notifications, records and `simulate` (US dollars rounded to cents)."""
        return {
            "so_far_usd": cents(self.so_far_usd),
            "avoided_usd": cents(self.avoided_usd),
            "avoided_label": "up to" if self.avoided_applies else None,
            "price_source": self.price_source,
            "hourly_usd": None if self.hourly_usd is None else round(self.hourly_usd, 4),
            "list_price": True,
            "upper_bound": self.upper_bound,
            "estimate": self.estimate,
            "billed_seconds": self.billed_seconds,
            "seconds_left": self.seconds_left,
            "unknown_instance_types": list(self.unknown_instance_types),
            "notes": list(self.notes),
            "prices": [q.as_dict() for q in self.quotes],
        }


def job_instance_types(job: TrainingJob) -> tuple[str, ...]:
    return _types(job.billed_instances)


def _types(groups: Iterable[InstanceGroup]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(g.instance_type for g in groups if g.instance_type))


def job_spend(job: TrainingJob, prices: Mapping[str, PriceQuote | None], *, now: datetime) -> Spend:
    # Billed time, the max runtime's default and the instances: docs/design/pricing.md cites each.
    return compute_spend(
        job.billed_instances,
        prices,
        start=job.training_start_time,
        end=job.training_end_time,
        now=now,
        ended=job.status in _ENDED,
        max_runtime_seconds=job.max_runtime_seconds,
        billable_seconds=job.billable_seconds,
        training_seconds=job.training_time_seconds,
        spot=job.managed_spot,
    )


def compute_spend(
    groups: Iterable[InstanceGroup],
    prices: Mapping[str, PriceQuote | None],
    *,
    start: datetime | None,
    end: datetime | None,
    now: datetime,
    ended: bool,
    max_runtime_seconds: float | None,
    billable_seconds: float | None = None,
    training_seconds: float | None = None,
    spot: bool = False,
) -> Spend:
    """so far = Σ count x hourly price x billed hours; avoided = the same rate x hours left to the max runtime."""
    notes: list[str] = []
    rate, quotes, unknown = _rate(tuple(groups), prices, notes)

    ran: float | None = None
    if ended and training_seconds is not None:
        ran = training_seconds
    elif start is not None:
        stop_at = end if (ended and end is not None) else now
        ran = (stop_at - start).total_seconds()
        if ran < 0:
            notes.append("clock before TrainingStartTime: counted as not started")
            ran = 0.0

    estimate = True
    billed: float | None
    if ended and billable_seconds is not None:
        billed, estimate = billable_seconds, False
    else:
        billed = ran if start is not None else None
        if start is None:
            notes.append("no TrainingStartTime: spend so far unknown")

    seconds_left: float | None = None
    if max_runtime_seconds is None:
        notes.append("no MaxRuntimeInSeconds: spend avoided unknown")
    else:
        seconds_left = max(0.0, max_runtime_seconds - (ran or 0.0))
    if spot:
        notes.append("managed spot training: the list price is an upper bound")

    return Spend(
        so_far_usd=None if rate is None or billed is None else rate * billed / SECONDS_PER_HOUR,
        avoided_usd=None if rate is None or seconds_left is None else rate * seconds_left / SECONDS_PER_HOUR,
        price_source="; ".join(dict.fromkeys(q.label() for q in quotes)) or None,
        hourly_usd=rate,
        upper_bound=spot,
        estimate=estimate,
        billed_seconds=billed,
        seconds_left=seconds_left,
        unknown_instance_types=unknown,
        notes=tuple(notes),
        quotes=quotes,
    )


def _rate(
    groups: tuple[InstanceGroup, ...], prices: Mapping[str, PriceQuote | None], notes: list[str]
) -> tuple[float | None, tuple[PriceQuote, ...], tuple[str, ...]]:
    if not groups:
        notes.append("no instance type: price unknown")
        return None, (), ()
    rate = 0.0
    known = True
    quotes: dict[str, PriceQuote] = {}
    unknown: dict[str, None] = {}
    for group in groups:
        quote = prices.get(group.instance_type) if group.instance_type else None
        if group.instance_type is None:
            notes.append(f"instance group {group.name or '?'} has no instance type")
            known = False
        elif quote is None:
            unknown[group.instance_type] = None
            known = False
        else:
            quotes.setdefault(group.instance_type, quote)
        if group.count is None or group.count <= 0:
            notes.append(f"no instance count for {group.instance_type or group.name or '?'}")
            known = False
        if known and quote is not None and group.count:
            rate += group.count * quote.usd_per_hour
    if unknown:
        notes.append("no price for " + ", ".join(unknown))
    return (rate if known else None), tuple(quotes.values()), tuple(unknown)


# policy.Kind.STOP_REQUESTED (not imported): a person's stop says what the job cost, not what the guard avoided.
_STOP_REQUESTED_KIND = "stop_requested"


def usd(value: Any) -> str | None:
    """An amount as people read it ("$1,234.56"); None when it is not a number (unknown stays unknown)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return f"${value:,.2f}"


def spend_line(spend: Mapping[str, Any] | None, outcome: str, kind: str = "") -> str | None:
    """One line about a job's spend in every channel ("$0.13 so far · up to $36.23 avoided"); None without spend."""
    if not isinstance(spend, Mapping):
        return None
    listed = spend.get("notes")
    notes = [str(n) for n in listed if "spot" not in str(n)] if isinstance(listed, list) else []
    so_far = usd(spend.get("so_far_usd"))
    if so_far is None:
        why = "; ".join(_without_unknown(n) for n in notes)
        return f"unknown: {why}" if why else "unknown"
    line = f"{so_far} billed" if spend.get("estimate") is False else f"{so_far} so far"
    if spend.get("upper_bound"):
        line += " at most (spot)"
    if outcome == "stopped" and kind != _STOP_REQUESTED_KIND and spend.get("avoided_label"):
        avoided = usd(spend.get("avoided_usd"))
        why = "; ".join(_without_unknown(n) for n in notes if "avoided" in n)
        line += f" · up to {avoided} avoided" if avoided else " · avoided: unknown" + (f" ({why})" if why else "")
    return line


def _without_unknown(note: str) -> str:
    """A note without its own "...: spend so far unknown" tail: the line says "unknown" once, then why."""
    for tail in (": spend so far unknown", ": spend avoided unknown", ": price unknown"):
        if note.endswith(tail):
            return note[: -len(tail)]
    return note


def gpu_count(instance_type: str | None) -> int | None:
    """GPUs of a SageMaker instance type ("ml.p4d.24xlarge"; the EC2 name without "ml." too); None if unknown."""
    if not instance_type:
        return None
    name = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    entry = _gpus()[0].get(name)
    return entry[0] if entry else None


@cache
def _gpus() -> tuple[Mapping[str, tuple[int, str]], frozenset[str]]:
    """The GPU table (cited counts, uncited GPU types), loaded on first use: only the idle-GPU guard reads it."""
    from training_guard.domain.price_data.gpu_counts import GPU_COUNTS, UNCITED_GPU_TRAINING_TYPES

    return GPU_COUNTS, UNCITED_GPU_TRAINING_TYPES


def has_gpus(instance_type: str | None) -> bool:
    """Whether a SageMaker instance type has GPUs, its count known or not (any `ml.p*` or `ml.g*` type does)."""
    if not instance_type:
        return False
    name = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    counted, uncited = _gpus()
    return name in counted or name in uncited or name.startswith(("ml.p", "ml.g"))


def normalised_utilisation(host_value: float, instance_type: str | None) -> float | None:
    """A host's GPUUtilization (0 to 100 x GPUs) as a percentage of all its GPUs; None when the count is unknown."""
    count = gpu_count(instance_type)
    if count is None or not math.isfinite(host_value):
        return None
    return host_value / count
