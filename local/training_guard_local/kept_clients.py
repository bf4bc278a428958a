"""boto3 clients kept for the process and lent to one emulation at a time, as good as new each time.

Making a botocore client costs ~20 ms of CPU (its event handlers copied from the session's, a class with a method
per operation, the endpoint resolver): the unit tests made about 2,000 of them, 1,300 for their emulations alone, for a
fifth of their CPU (42 s of it). An emulation borrows its clients (its own and the functions') from here and gives
them back when it ends; the next one gets them back as they were made:

- the event handlers a test or a fault campaign registered on a client (`client.meta.events.register...`) are gone:
  the client's emitter gets back the handlers it had when it was made;
- the standard retry mode's retry quota is full again (a campaign of throttles drains it; a new client's is full).

What a client is made with is part of its key: the service, the region, the session and the `AWS_*` environment at
the time (profile, retry mode, endpoints; a session resolves its credentials once and keeps them). A client whose key
is lent already (an emulation inside another) is made anew and kept beside it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Hashable
from typing import Any

# What botocore reads from the environment when it makes a client (credentials, profile, retry mode, endpoints), but
# the region, which is part of the key on its own.
_NOT_KEYED = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION"})


def environment_key() -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in os.environ.items() if k.startswith("AWS_") and k not in _NOT_KEYED)


class _Kept:
    """One client and what it was when made."""

    def __init__(self, client: Any) -> None:
        self.client = client
        # botocore: client.meta.events is an EventAliaser over the client's HierarchicalEmitter (botocore/hooks.py),
        # whose __copy__ copies its handler trie and unique ids, not the handlers themselves.
        self._emitter = client.meta.events._emitter
        self._made = _unshared(copy.copy(self._emitter))
        _watch(self._emitter)

    def as_made(self) -> Any:
        """The client, its emitter given back the handlers it was made with if anything registered or unregistered
        one since (a copy of what it was made with: about 1.6 ms, against 10 to 20 ms to make a client)."""
        if _changed(self._emitter):
            self._emitter.__dict__.update(_unshared(copy.copy(self._made)).__dict__)
            self._emitter.__dict__.pop(_CHANGED, None)
        for entry in self._emitter._unique_id_handlers.values():
            _refill_retry_quota(getattr(entry["handler"], "__self__", None))
        return self.client


# Set on an emitter's instance by the first register or unregister after it was made or given back as made.
_CHANGED = "_training_guard_changed"
_watched: dict[type, type] = {}


def _watch(emitter: Any) -> None:
    """Makes `emitter` note any change to its handlers: every registration (register, register_first, register_last,
    counted or not) goes through `_register_section` and every removal through `unregister` (botocore/hooks.py), the
    only methods that write its handler trie and unique ids. Any change counts, one that misses too (an unregister
    whose event name misses drops the unique id and keeps the rest). An emitter of another kind is copied back on
    every loan."""
    cls = type(emitter)
    if cls not in _watched:
        if not all(callable(getattr(cls, name, None)) for name in ("_register_section", "unregister")):
            return

        def _register_section(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.__dict__[_CHANGED] = True
            return cls._register_section(self, *args, **kwargs)

        def unregister(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.__dict__[_CHANGED] = True
            return cls.unregister(self, *args, **kwargs)

        _watched[cls] = type(cls.__name__, (cls,), {"_register_section": _register_section, "unregister": unregister})
    emitter.__class__ = _watched[cls]


def _changed(emitter: Any) -> bool:
    return type(emitter) not in _watched.values() or bool(emitter.__dict__.get(_CHANGED))


def _unshared(emitter: Any) -> Any:
    """A copy of a HierarchicalEmitter shares its lookup cache (rebuilt on the next emit) and each unique id's entry
    (whose count a counted registration changes in place) with the original: these are its own."""
    emitter._lookup_cache = {}
    emitter._unique_id_handlers = {key: dict(entry) for key, entry in emitter._unique_id_handlers.items()}
    return emitter


def _refill_retry_quota(handler_owner: Any) -> None:
    """The standard retry mode's RetryHandler (botocore/retries/standard.py, registered with the unique id
    `retry-config-<service>`) holds a RetryQuotaChecker whose RetryQuota a retried call drains."""
    checker = getattr(handler_owner, "_retry_quota", None)
    quota = getattr(checker, "_quota", None)
    if checker is not None and quota is not None and hasattr(quota, "_max_capacity"):
        quota._available_capacity = quota._max_capacity
        checker._last_amount_acquired = None


class KeptClients:
    def __init__(self) -> None:
        self._free: dict[Hashable, list[_Kept]] = {}
        self._lent: dict[int, tuple[Hashable, _Kept]] = {}
        self.made = 0  # clients made (not lent again), for the tests

    def lend(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """A client for `key` (with boto3's default session and the `AWS_*` environment added to it), as made;
        `make` makes one with that session."""
        import boto3

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()  # what boto3.client would do in `make`, before the key names it
        full = (key, boto3.DEFAULT_SESSION, environment_key())
        free = self._free.get(full)
        if free:
            kept = free.pop()
            client = kept.as_made()
        else:
            self.made += 1
            client = make()
            kept = _Kept(client)
        self._lent[id(client)] = (full, kept)
        return client

    def give_back(self, client: Any) -> None:
        full, kept = self._lent.pop(id(client))
        self._free.setdefault(full, []).append(kept)


# The process's clients, shared by every emulation in it.
KEPT = KeptClients()
