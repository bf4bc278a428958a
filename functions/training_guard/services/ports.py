"""The responder's ports: what the domain needs from the outside world, and the records it keeps.

Light on purpose: adapters and the Slack notifier import these without pulling in the policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from training_guard.config.frozen import frozen

if TYPE_CHECKING:
    from training_guard.domain.events import TrainingJob
    from training_guard.domain.metric_guards import AlarmObservation, FleetAlarmState, JobAlarmSpec
    from training_guard.domain.pricing import PriceQuote
    from training_guard.render.messages import Notification


class JobsPort(Protocol):
    def describe(self, name: str) -> TrainingJob | None: ...

    def tags(self, arn: str) -> dict[str, str]: ...

    def running(self) -> list[str]: ...

    def stop(self, name: str) -> bool:
        """Stop a running job; False when it had already left InProgress (not an error)."""
        ...

    def tag(self, arn: str, tags: Mapping[str, str]) -> None: ...


@frozen
class StopSpend:
    """What a stop avoided and what the job had cost, in US dollars at list price; None is unknown, never zero."""

    avoided_usd: float | None  # "up to": until the job's MaxRuntimeInSeconds
    so_far_usd: float | None
    price_source: str | None
    instance_types: tuple[str, ...] = ()


@frozen
class StopRecord:
    job: str
    rule: str
    reason: str
    at: datetime
    event_id: str
    # Written before StopTrainingJob, confirmed once it took effect: only a confirmed stop has folds.
    confirmed: bool = False
    folded: tuple[str, ...] = ()
    # Written after the stop took effect; None until then.
    spend: StopSpend | None = None
    # Epoch seconds until which the attempt that wrote it before its stop (the stop's one write) may still be acting.
    lease_until: int | None = None


@frozen
class StopClaim:
    granted: bool
    # What was there before: our earlier attempt (granted) or another rule's stop; None when the claim created it.
    previous: StopRecord | None
    # The same rule's record, written by an attempt still within its lease: come back later (TransitionBusy).
    busy: bool = False


class Claim(StrEnum):
    GRANTED = "granted"  # ours to act on, until the lease ends
    DONE = "done"
    BUSY = "busy"  # another attempt holds an unexpired lease: come back later, never drop it


class LedgerPort(Protocol):
    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim: ...

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None: ...

    def release(self, key: str) -> None: ...

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim: ...

    def claim_first_stop(
        self, record: StopRecord, *, now: datetime, lease_seconds: int, ttl_seconds: int, check_mutes: bool
    ) -> bool:
        """The stop's one write before StopTrainingJob: the job's stop record with a lease, written only when the job
        has none and (`check_mutes`) no mute of the job is in force. False, with nothing written, otherwise."""
        ...

    def release_stop_lease(self, job: str) -> None:
        """The attempt that made the stop's one write failed (it did not die): a retry may take the stop over now."""
        ...

    def get_stop(self, job: str) -> StopRecord | None: ...

    def drop_stop(self, job: str) -> None: ...

    def confirm_stop(self, job: str) -> None: ...

    def fold(self, job: str, key: str) -> bool:
        """Fold `key` into the guard's confirmed stop of `job`; False when there is none (announce it)."""
        ...

    def record_stop_spend(self, job: str, spend: StopSpend) -> None: ...


class PricesPort(Protocol):
    """Hourly on-demand list prices. Never raises for want of a price: a type it cannot price maps to None."""

    def prices(
        self, region: str, instance_types: tuple[str, ...], *, now: datetime
    ) -> dict[str, PriceQuote | None]: ...

    def take_problems(self) -> list[str]: ...


class MeterPort(Protocol):
    """The guard's own metrics that the domain reports (the handlers count the rest from receipts)."""

    def spend_avoided(self, rule: str, usd: float) -> None:
        """One stop by the guard avoided up to `usd` (list price) of a job's spend; `rule` stopped it."""
        ...


class PublisherPort(Protocol):
    def publish(self, notification: Notification) -> None: ...


class CardPort(Protocol):
    def update_card(self, notification: Notification) -> None:
        """Show a folded `notification` on the job's Slack card. Raises a GuardError when it cannot be handed over."""
        ...


class AlarmsPort(Protocol):
    def put_job_alarm(self, spec: JobAlarmSpec) -> None: ...

    def job_alarm_names(self, job: str | None = None) -> list[str]: ...

    def delete_alarms(self, names: Sequence[str]) -> None: ...

    def firing_job_alarms(self) -> list[AlarmObservation]: ...

    def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]: ...

    def fleet_alarm_states(self, names: Sequence[str]) -> dict[str, FleetAlarmState]:
        """The fleet guards' alarms that exist, with their state, reason and EvaluationState (one read)."""
        ...


class TrainingMetricsPort(Protocol):
    def jobs_with_datapoints(
        self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
    ) -> set[str]:
        """Of the (job, metric) series, the jobs that published at least one datapoint in the window."""
        ...

    def host_averages(
        self, hosts: Sequence[str], *, metric: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        """Each host's one-minute averages of an instance metric in [since, until), for hosts that published any."""
        ...

    def series_values(
        self, dimension: str, values: Sequence[str], *, metric: str, statistic: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        """One-minute `statistic` datapoints of `metric` per `dimension` value in [since, until), for those with any."""
        ...
