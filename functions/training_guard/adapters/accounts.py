"""Acting in a member account: STS AssumeRole into the member's role, one session per account."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from training_guard.adapters.clients import RETRY_CONFIG
from training_guard.config.frozen import frozen
from training_guard.domain.accounts import member_role_arn, scoped
from training_guard.domain.errors import ActionFailed

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.config import Config
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sts import STSClient

    from training_guard.config.model import OrganizationConfig
    from training_guard.services.ports import Claim, LedgerPort, StopClaim, StopRecord, StopSpend
    from training_guard.services.responder import Responder
    from training_guard.services.sweeper import Sweeper

# Longer than any invocation (the sweeper's 4 minutes). AssumeRole credentials last an hour by default
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html, "Role session duration").
REFRESH_MARGIN_SECONDS = 5 * 60
# Shown in the member's CloudTrail as assumed-role/<member role>/<this> (at most 64 characters,
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html).
SESSION_NAME = "training-guard-hub"


@frozen
class _Session:
    expires_at: float  # epoch seconds
    session: Any
    clients: dict[str, Any] = field(default_factory=dict)


class CredentialedClients:
    """Clients with one set of AssumeRole credentials, made through the default boto3 session."""

    # A Session of its own would reload the service models: ~350 ms of CPU per member against ~15 ms (process_time).

    def __init__(self, **credentials: Any) -> None:
        self._credentials = credentials

    def client(self, service: str, config: Config | None = None) -> BaseClient:
        made: BaseClient = boto3.client(service, config=config, **self._credentials)
        return made


class MemberSessions:
    def __init__(
        self,
        organization: OrganizationConfig,
        *,
        sts: STSClient,
        partition: str,
        now: Callable[[], float] = time.time,
        session_factory: Callable[..., Any] = CredentialedClients,
    ) -> None:
        self.organization = organization
        self._sts = sts
        self.partition = partition
        self._now = now
        self._session_factory = session_factory
        self._sessions: dict[str, _Session] = {}

    def role_arn(self, account: str) -> str:
        return member_role_arn(self.organization, account, self.partition)

    @overload
    def client(self, account: str, service: Literal["sagemaker"]) -> SageMakerClient: ...
    @overload
    def client(self, account: str, service: Literal["cloudwatch"]) -> CloudWatchClient: ...
    def client(self, account: str, service: str) -> Any:
        """A client of `service` acting in `account` (refused with NotAMember for anything not configured)."""
        held = self._session(account)
        made = held.clients.get(service)
        if made is None:
            made = held.clients[service] = held.session.client(service, config=RETRY_CONFIG)
        return made

    def _session(self, account: str) -> _Session:
        arn = self.role_arn(account)  # before any call: an account that is not a member gets nothing
        held = self._sessions.get(account)
        if held is not None and self._now() < held.expires_at - REFRESH_MARGIN_SECONDS:
            return held
        try:
            answer = self._sts.assume_role(RoleArn=arn, RoleSessionName=SESSION_NAME)
        except (ClientError, BotoCoreError) as exc:
            raise ActionFailed(f"AssumeRole {arn}", exc) from exc
        credentials = answer["Credentials"]
        expiration: datetime | str = credentials["Expiration"]  # the stubs say datetime; a stubbed answer: str
        if isinstance(expiration, datetime):
            expires_at = (expiration if expiration.tzinfo else expiration.replace(tzinfo=UTC)).timestamp()
        else:  # botocore parses it; a stubbed answer may keep the ISO text
            expires_at = datetime.fromisoformat(str(expiration).replace("Z", "+00:00")).timestamp()
        held = _Session(
            expires_at=expires_at,
            session=self._session_factory(
                aws_access_key_id=credentials["AccessKeyId"],
                aws_secret_access_key=credentials["SecretAccessKey"],
                aws_session_token=credentials["SessionToken"],
                region_name=self.organization.region,
            ),
        )
        self._sessions[account] = held
        return held


class MemberAccess:
    def __init__(self, sessions: MemberSessions) -> None:
        self.sessions = sessions

    def responder_for(self, base: Responder, account: str) -> Responder:
        """`base` acting in `account`: the member's jobs and alarms, the ledger scoped to the account."""
        from training_guard.adapters.cloudwatch import CloudWatchAlarms
        from training_guard.adapters.sagemaker import SageMakerJobs

        return base.acting(
            jobs=SageMakerJobs(self.sessions.client(account, "sagemaker")),
            alarms=CloudWatchAlarms(self.sessions.client(account, "cloudwatch")) if base.alarms is not None else None,
            ledger=AccountLedger(base.ledger, account),
            account_scope=account,  # the member's mutes (its job names may be the hub's too)
        )

    def sweeper_for(self, base: Sweeper, account: str) -> Sweeper:
        from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
        from training_guard.adapters.sagemaker import SageMakerJobs
        from training_guard.services.sweeper import Sweeper

        responder = self.responder_for(base.responder, account)
        cloudwatch = self.sessions.client(account, "cloudwatch")
        return Sweeper(
            responder,
            SageMakerJobs(self.sessions.client(account, "sagemaker")),
            CloudWatchAlarms(cloudwatch),
            TrainingMetrics(cloudwatch),
            said=base.said_in(account),
        )


class AccountLedger:
    """The ledger of one member account: its transition keys and stop records carry the account."""

    def __init__(self, ledger: LedgerPort, account: str) -> None:
        self.inner = ledger
        self.account = account

    def _unscoped(self, record: StopRecord) -> StopRecord:
        prefix = scoped(self.account, "")
        return replace(record, job=record.job.removeprefix(prefix))

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        return self.inner.claim(scoped(self.account, key), now=now, lease_seconds=lease_seconds)

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
        self.inner.complete(scoped(self.account, key), now=now, ttl_seconds=ttl_seconds, outcome=outcome)

    def release(self, key: str) -> None:
        self.inner.release(scoped(self.account, key))

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim:
        claim = self.inner.claim_stop(replace(record, job=scoped(self.account, record.job)), ttl_seconds=ttl_seconds)
        if claim.previous is None:
            return claim
        return replace(claim, previous=self._unscoped(claim.previous))

    def claim_first_stop(
        self, record: StopRecord, *, now: datetime, lease_seconds: int, ttl_seconds: int, check_mutes: bool
    ) -> bool:
        return self.inner.claim_first_stop(
            replace(record, job=scoped(self.account, record.job)),
            now=now,
            lease_seconds=lease_seconds,
            ttl_seconds=ttl_seconds,
            check_mutes=check_mutes,
        )

    def release_stop_lease(self, job: str) -> None:
        self.inner.release_stop_lease(scoped(self.account, job))

    def get_stop(self, job: str) -> StopRecord | None:
        record = self.inner.get_stop(scoped(self.account, job))
        return None if record is None else self._unscoped(record)

    def drop_stop(self, job: str) -> None:
        self.inner.drop_stop(scoped(self.account, job))

    def confirm_stop(self, job: str) -> None:
        self.inner.confirm_stop(scoped(self.account, job))

    def fold(self, job: str, key: str) -> bool:
        return self.inner.fold(scoped(self.account, job), scoped(self.account, key))

    def record_stop_spend(self, job: str, spend: StopSpend) -> None:
        self.inner.record_stop_spend(scoped(self.account, job), spend)
