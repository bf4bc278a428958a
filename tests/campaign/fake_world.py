"""The time campaign's unit tier: the real handlers over `tests/fakes.py`, each port call one AWS call of the model.

Each method below stands for the one AWS call its adapter makes, named as `lambda_model.step_label` names it, so the
model kills, delays and duplicates at the same points as on the emulation; `test_timeouts.py` checks that every
scenario makes the same calls and ends the same on both tiers, and that sampled kills end the same.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, cast

from botocore.exceptions import ClientError

from tests.campaign.lambda_model import FIRST_STOP_WRITE, LambdaModel
from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakeMeter, FakePublisher
from tests.fakes_slack_app import FakeMutes
from tests.log_deliveries import FakeLogStates
from training_guard import contract
from training_guard.adapters.price_list import PriceList
from training_guard.adapters.sns import sns_message
from training_guard.config.model import GuardConfig
from training_guard.domain.accounts import scoped
from training_guard.domain.events import TrainingJob, parse_job
from training_guard.domain.log_rules import StreamState
from training_guard.domain.metric_guards import AlarmObservation, FleetAlarmState, JobAlarmSpec
from training_guard.domain.mutes import Mutes
from training_guard.handlers import wiring
from training_guard.render.messages import Notification
from training_guard.services.log_watch import LogWatch
from training_guard.services.ports import Claim, StopClaim, StopRecord, StopSpend
from training_guard.services.responder import Responder
from training_guard_local.sagemaker_ext import LIFECYCLE, keeps_its_state


class HookedLedger:
    """The ledger's calls, each the DynamoDB call `DynamoLedger` makes (FakeLedger's conditions are DynamoDB's)."""

    def __init__(self, model: LambdaModel, fake: FakeLedger) -> None:
        self._model = model
        self.fake = fake

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        act = partial(self.fake.claim, key, now=now, lease_seconds=lease_seconds)
        return self._model.call("PutItem claim", act, accepted=lambda r: r is Claim.GRANTED, subject=key)

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
        act = partial(self.fake.complete, key, now=now, ttl_seconds=ttl_seconds, outcome=outcome)
        self._model.call("UpdateItem complete", act, subject=key)

    def release(self, key: str) -> None:
        busy = self.fake.items.get(key, {}).get("state") == "in_progress"  # DeleteItem's condition
        self._model.call("DeleteItem release", lambda: self.fake.release(key), accepted=lambda _: busy, subject=key)

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim:
        return self._model.call(
            "UpdateItem stop record", partial(self.fake.claim_stop, record, ttl_seconds=ttl_seconds)
        )

    def claim_first_stop(
        self, record: StopRecord, *, now: datetime, lease_seconds: int, ttl_seconds: int, check_mutes: bool
    ) -> bool:
        def act() -> bool:
            return self.fake.claim_first_stop(
                record, now=now, lease_seconds=lease_seconds, ttl_seconds=ttl_seconds, check_mutes=check_mutes
            )

        return self._model.call(FIRST_STOP_WRITE, act)

    def release_stop_lease(self, job: str) -> None:
        self._model.call("UpdateItem release stop lease", lambda: self.fake.release_stop_lease(job))

    def get_stop(self, job: str) -> StopRecord | None:
        return self._model.call("GetItem stop record", lambda: self.fake.get_stop(job))

    def drop_stop(self, job: str) -> None:
        self._model.call("DeleteItem drop stop record", lambda: self.fake.drop_stop(job))

    def confirm_stop(self, job: str) -> None:
        self._model.call("UpdateItem confirm stop", lambda: self.fake.confirm_stop(job))

    def fold(self, job: str, key: str) -> bool:
        return self._model.call("UpdateItem fold", lambda: self.fake.fold(job, key))

    def record_stop_spend(self, job: str, spend: StopSpend) -> None:
        self._model.call("UpdateItem record spend", lambda: self.fake.record_stop_spend(job, spend))


class HookedJobs:
    """SageMaker as the emulation plays it: a job's state follows its events until it ends (or while it stops)."""

    def __init__(self, model: LambdaModel) -> None:
        self._model = model
        self.fake = FakeJobs()
        self.details: dict[str, dict[str, Any]] = {}

    def put(self, detail: Mapping[str, Any]) -> None:
        name = str(detail["TrainingJobName"])
        known = self.details.get(name)
        if known is None:
            known = self.details[name] = {}
            self.fake.tags_by_arn[str(detail["TrainingJobArn"])] = {
                k: str(v) for k, v in (detail.get("Tags") or {}).items()
            }
        status = self.status(name)
        kept = status is not None and keeps_its_state(status, detail.get("TrainingJobStatus"))  # as the emulation's
        known.update({k: v for k, v in detail.items() if k != "Tags" and not (kept and k in LIFECYCLE)})
        self._sync(name)

    def status(self, name: str) -> str | None:
        job = self.fake.jobs.get(name)
        return job.status if job is not None else None

    def finish_stopping(self, name: str) -> bool:
        if self.status(name) != "Stopping":
            return False
        self.details[name].update(TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
        self._sync(name)
        return True

    def _sync(self, name: str) -> None:
        self.fake.jobs[name] = parse_job(self.details[name])  # DescribeTrainingJob carries no tags

    def describe(self, name: str) -> TrainingJob | None:
        return self._model.call("DescribeTrainingJob", lambda: self.fake.describe(name))

    def tags(self, arn: str) -> dict[str, str]:
        return self._model.call("ListTags", lambda: self.fake.tags(arn))

    def running(self) -> list[str]:
        return self._model.call("ListTrainingJobs", self.fake.running)

    def stop(self, name: str) -> bool:
        stopped = self._model.call("StopTrainingJob", lambda: self.fake.stop(name), accepted=bool, subject=name)
        if stopped:
            self.details[name].update(TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
        return stopped

    def tag(self, arn: str, tags: Mapping[str, str]) -> None:
        self._model.call("AddTags", lambda: self.fake.tag(arn, tags))


class HookedPublisher:
    def __init__(self, model: LambdaModel) -> None:
        self._model = model
        self.fake = FakePublisher()

    def publish(self, notification: Notification) -> None:
        self._model.call("Publish", partial(self.fake.publish, notification), subject=notification.transition)


class HookedAlarms:
    def __init__(self, model: LambdaModel) -> None:
        self._model = model
        self.fake = FakeAlarms()

    def put_job_alarm(self, spec: JobAlarmSpec) -> None:
        def act() -> None:  # PutMetricAlarm replaces an alarm of the same name
            self.fake.delete_alarms([spec.alarm_name])
            self.fake.put_job_alarm(spec)

        self._model.call("PutMetricAlarm", act)

    def job_alarm_names(self, job: str | None = None) -> list[str]:
        names = self._model.call("DescribeAlarms", lambda: self.fake.job_alarm_names(job))
        return [n for n in names if job is None or n.startswith(f"{contract.JOB_ALARM_PREFIX}{job}-")]

    def delete_alarms(self, names: Sequence[str]) -> None:
        self._model.call("DeleteAlarms", lambda: self.fake.delete_alarms(names))

    def firing_job_alarms(self) -> list[AlarmObservation]:
        return self._model.call("DescribeAlarms", self.fake.firing_job_alarms)

    def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]:
        return self._model.call("DescribeAlarmContributors", lambda: self.fake.firing_contributors(alarm_name))

    def fleet_alarm_states(self, names: Sequence[str]) -> dict[str, FleetAlarmState]:
        return self._model.call("DescribeAlarms", lambda: self.fake.fleet_alarm_states(names))


class HookedMutes:
    def __init__(self, model: LambdaModel) -> None:
        self._model = model
        self.fake = FakeMutes()

    def read(self, job: str, account: str | None = None) -> Mutes:
        return self._model.call("GetItem mutes", lambda: self.fake.read(job, account))


class HookedLogStates:
    """The log path's stream states, each call the one `DynamoLogState` makes (a first save lists the stream first)."""

    def __init__(self, model: LambdaModel) -> None:
        self._model = model
        self.fake = FakeLogStates()

    def get(self, stream: str, *, account: str | None = None) -> tuple[StreamState | None, int]:
        return self._model.call("GetItem log state", lambda: self.fake.get(stream, account=account))

    def put(
        self, job: str, stream: str, state: StreamState, *, version: int, now: datetime, account: str | None = None
    ) -> bool:
        if version == 0:  # FakeLogStates.put lists the stream too: listing it twice is the ADD DynamoDB makes
            listed = self.fake.streams_of.setdefault(scoped(account, job) if account else job, set())
            self._model.call("UpdateItem log job", lambda: listed.add(stream))
        return self._model.call("PutItem log state", lambda: self._put(stream, state, version, account))

    def _put(self, stream: str, state: StreamState, version: int, account: str | None) -> bool:
        """FakeLogStates.put's condition (DynamoDB's), without its listing of the stream: that is its own call here."""
        key = scoped(account, stream) if account else stream
        if key in self.fake.items and self.fake.items[key][1] != version:
            return False
        self.fake.puts += 1
        self.fake.items[key] = (json.loads(json.dumps(state.to_json())), version + 1)
        return True

    def streams(self, job: str, *, account: str | None = None) -> list[str]:
        return self._model.call("GetItem log job", lambda: self.fake.streams(job, account=account))

    def first_report(self, job: str, problem: str, *, now: datetime, account: str | None = None) -> bool:
        return self._model.call(
            "UpdateItem log job", partial(self.fake.first_report, job, problem, now=now, account=account)
        )


class PriceCache:
    """The state table's price items as the emulation has them: none (moto has no Price List API to fill them)."""

    def __init__(self, model: LambdaModel) -> None:
        self._model = model

    def get_item(self, **params: Any) -> dict[str, Any]:
        return self._model.call("GetItem price", dict)

    def put_item(self, **params: Any) -> dict[str, Any]:
        return self._model.call("PutItem price", dict)


class NoPriceList:
    """The Price List API as the emulation answers it: not there (moto serves no `pricing`)."""

    def get_products(self, **params: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "GetProducts")


class FakeWorld:
    """AWS as the handlers see it through the responder's ports; the same questions as the emulation answers."""

    def __init__(self, model: LambdaModel, config: GuardConfig) -> None:
        self.ledger = HookedLedger(model, FakeLedger())
        self.jobs = HookedJobs(model)
        self.publisher = HookedPublisher(model)
        self.alarms = HookedAlarms(model)
        self.mutes = HookedMutes(model)
        self.ledger.fake.mutes_in_force = self.mutes.fake.in_force
        self.prices = PriceList(
            pricing_factory=lambda: cast(Any, NoPriceList()),
            dynamodb=cast(Any, PriceCache(model)),
            table="fake",
            memory={},
        )
        self.responder = Responder(
            config,
            self.jobs,
            self.ledger,
            self.publisher,
            alarms=self.alarms,
            prices=self.prices,
            meter=FakeMeter(),
            mutes=self.mutes,
            sleep=model.sleep,
        )
        self.log_states = HookedLogStates(model)
        self.log_watch = LogWatch(self.responder, self.log_states)
        self._read = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """This world as the container's composition root, for as long as the caller holds it (then the one before)."""
        previous = wiring.root()
        root = wiring.Root(clients=_no_aws, sleep=self.responder.sleep)
        root.__dict__.update(
            responder=self.responder, price_list=self.prices, log_watch=self.log_watch, parker=None, members=None
        )
        wiring.install(root)
        try:
            yield
        finally:
            wiring.install(previous)

    # --- what the campaign asks of AWS ---------------------------------------------------------------
    def put_job(self, detail: Mapping[str, Any]) -> None:
        self.jobs.put(detail)

    def notifications(self) -> list[dict[str, Any]]:
        """The notification documents published since the last call, as the capture queue holds them."""
        published = self.publisher.fake.published[self._read :]
        self._read += len(published)
        return [json.loads(json.loads(sns_message(n))["sqs"]) for n in published]

    def job_status(self, name: str) -> str | None:
        return self.jobs.status(name)

    def finish_stopping(self, name: str) -> bool:
        return self.jobs.finish_stopping(name)

    def job_tags(self, name: str) -> dict[str, str]:
        job = self.jobs.details[name]
        return dict(self.jobs.fake.tags_by_arn.get(str(job["TrainingJobArn"]), {}))

    def alarm_names(self) -> list[str]:
        return sorted(self.alarms.fake.names)

    def log_state_version(self, stream: str) -> int:
        return self.log_states.fake.items.get(stream, (None, 0))[1]

    def ledger_item(self, key: str) -> tuple[str, str | None] | None:
        """(state, outcome) of a ledger key, None when there is no item."""
        item = self.ledger.fake.items.get(key)
        return None if item is None else (str(item["state"]), cast("str | None", item.get("outcome")))


def _no_aws(service: str) -> Any:
    raise AssertionError(f"the unit tier reaches no AWS (asked for a {service} client)")
