"""The AWS Price List API, behind a cache in the container's memory and one in the state table.

Never raises: a price is information; what went wrong is kept in `problems`. Lookup order: docs/design/pricing.md."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from training_guard import contract
from training_guard.domain.pricing import (
    PRICE_CACHE_TTL_SECONDS,
    PRICE_LIST_API_REGION,
    PRICE_LIST_SERVICE_CODE,
    SOURCE_API,
    PriceQuote,
    get_products_filters,
    parse_price_list,
    parse_usd,
    price_cache_key,
    table_quote,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_pricing import PricingClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE
PAGE_SIZE: Final = 100  # GetProducts MaxResults: 1 to 100 (API reference)
MAX_PAGES: Final = 5  # the filters select one instance type in one region: more pages mean a filter was ignored
# After a failure, asked again only after this long (chosen: a sweep must not pay the SDK's retries for every job).
RETRY_AFTER_FAILURE_SECONDS: Final = 900

# Entries: (expires at, epoch seconds; the quote, or None when the API answered without a usable price).
Memory = MutableMapping[str, tuple[float, PriceQuote | None]]
_CONTAINER_MEMORY: Memory = {}


def pricing_client() -> PricingClient:
    """A boto3 `pricing` client in PRICE_LIST_API_REGION, with few retries and short timeouts (a choice)."""
    import boto3
    from botocore.config import Config

    made: PricingClient = boto3.client(  # boto3 returns Any: the stubs name what it returns for "pricing"
        "pricing",
        region_name=PRICE_LIST_API_REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=2, read_timeout=5),
    )
    return made


class PriceList:
    """Hourly on-demand list prices of SageMaker training instances; without `dynamodb` and `table`, memory only."""

    def __init__(
        self,
        pricing: PricingClient | None = None,
        *,
        pricing_factory: Callable[[], PricingClient] = pricing_client,
        dynamodb: DynamoDBClient | None = None,
        table: str | None = None,
        memory: Memory | None = None,
        ttl_seconds: int = PRICE_CACHE_TTL_SECONDS,
    ) -> None:
        self._pricing = pricing
        self._pricing_factory = pricing_factory
        self._dynamodb = dynamodb
        self._table = table
        self._memory = _CONTAINER_MEMORY if memory is None else memory
        self._ttl = ttl_seconds
        self.problems: list[str] = []

    def hourly_price(self, region: str, instance_type: str, *, now: datetime) -> PriceQuote | None:
        key = price_cache_key(region, instance_type)
        epoch = now.timestamp()
        remembered = self._memory.get(key)
        if remembered is not None and remembered[0] > epoch:
            return remembered[1] or table_quote(region, instance_type)

        cached = self._read_cached(key, region, instance_type, epoch)
        if cached is not None:
            self._memory[key] = cached
            return cached[1]

        answered, quote = self._ask(region, instance_type)
        if quote is not None:
            self._write_cached(key, quote, epoch)
        # Remember an answer for the TTL, a failure for a short while, so neither is asked again at once.
        self._memory[key] = (epoch + (self._ttl if answered else RETRY_AFTER_FAILURE_SECONDS), quote)
        return quote or table_quote(region, instance_type)

    def prices(self, region: str, instance_types: tuple[str, ...], *, now: datetime) -> dict[str, PriceQuote | None]:
        return {t: self.hourly_price(region, t, now=now) for t in instance_types}

    def forget(self) -> None:
        """Forget what this container remembers, as a new container would (the state table's items stay)."""
        self._memory.clear()

    def take_problems(self) -> list[str]:
        problems, self.problems = self.problems, []
        return problems

    def _client(self) -> PricingClient:
        if self._pricing is None:
            self._pricing = self._pricing_factory()
        return self._pricing

    def _ask(self, region: str, instance_type: str) -> tuple[bool, PriceQuote | None]:
        """(whether the API answered, the price it gave)."""
        items: list[Any] = []
        request: dict[str, Any] = {
            "ServiceCode": PRICE_LIST_SERVICE_CODE,
            "Filters": get_products_filters(region, instance_type),
            "FormatVersion": "aws_v1",
            "MaxResults": PAGE_SIZE,
        }
        try:
            for _ in range(MAX_PAGES):
                page = self._client().get_products(**request)
                items.extend(page.get("PriceList") or [])
                token = page.get("NextToken")
                if not token:
                    break
                request["NextToken"] = token
            else:
                self.problems.append(f"GetProducts {instance_type} in {region}: stopped after {MAX_PAGES} pages")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            self.problems.append(f"GetProducts {instance_type} in {region} failed: {code or exc}")
            return False, None
        except BotoCoreError as exc:  # no endpoint, no credentials, a timeout: the API cannot be reached
            self.problems.append(f"GetProducts {instance_type} in {region} failed: {exc}")
            return False, None
        parsed = parse_price_list(items, region=region, instance_type=instance_type)
        if parsed.quote is None and parsed.reason:
            self.problems.append(f"GetProducts: {parsed.reason}")
        return True, parsed.quote

    def _read_cached(self, key: str, region: str, instance_type: str, epoch: float) -> tuple[float, PriceQuote] | None:
        """(when the item expires, its price), or None when there is no live item."""
        if self._dynamodb is None or not self._table:
            return None
        try:
            item = self._dynamodb.get_item(TableName=self._table, Key={_PK: {"S": key}}).get("Item")
        except (ClientError, BotoCoreError) as exc:
            self.problems.append(f"read cached price {key} failed: {exc}")
            return None
        if not item:
            return None
        # DynamoDB deletes expired items in the background, days later; until then they are still read (docs/limits.md).
        expires = _number(item.get(_TTL))
        usd = parse_usd(item.get("usd_per_hour", {}).get("N"))
        if expires is None or expires <= epoch or usd is None:
            return None
        return expires, PriceQuote(
            instance_type=instance_type,
            region=region,
            usd_per_hour=usd,
            source=SOURCE_API,
            as_of=item.get("as_of", {}).get("S"),
            reference=item.get("reference", {}).get("S"),
        )

    def _write_cached(self, key: str, quote: PriceQuote, epoch: float) -> None:
        if self._dynamodb is None or not self._table:
            return
        item: dict[str, Any] = {
            _PK: {"S": key},
            "usd_per_hour": {"N": repr(quote.usd_per_hour)},
            "source": {"S": quote.source},
            _TTL: {"N": str(int(epoch) + self._ttl)},
        }
        if quote.as_of:
            item["as_of"] = {"S": quote.as_of}
        if quote.reference:
            item["reference"] = {"S": quote.reference}
        try:
            self._dynamodb.put_item(TableName=self._table, Item=item)
        except (ClientError, BotoCoreError) as exc:
            self.problems.append(f"cache price {key} failed: {exc}")


def _number(attribute: Any) -> float | None:
    if not isinstance(attribute, dict):
        return None
    try:
        return float(attribute.get("N", ""))
    except ValueError:
        return None
