"""boto3 sessions that share the service models the process has read: each reads its credentials and profile anew."""

from __future__ import annotations

import functools
from typing import Any

import boto3
import botocore.session
from botocore.loaders import JSONFileLoader, Loader, create_loader


class _ReadOnce(JSONFileLoader):  # type: ignore[misc]  # botocore is untyped
    """botocore's JSON file loader, keeping what it parsed: the endpoints file and a service's model are read once
    per process, not once per session (~0.1 s each; a test process makes hundreds of sessions)."""

    def __init__(self) -> None:
        self._parsed: dict[str, Any] = {}

    def load_file(self, file_path: str) -> Any:
        parsed = self._parsed.get(file_path)
        if parsed is None:
            parsed = super().load_file(file_path)
            if parsed is not None:  # a file missing now may be there later
                self._parsed[file_path] = parsed
        return parsed


@functools.cache
def _files() -> _ReadOnce:
    return _ReadOnce()


def new_session(**kwargs: Any) -> boto3.Session:
    """`boto3.Session(**kwargs)`, its loader reading through the process's kept files (botocore's public component
    API; the loader is made lazily as botocore's own, so a missing profile still raises where boto3 raises it).
    botocore merges a service's sdk-extras into the model it read, in place: the same built-in extras every time,
    so sharing is safe, but a session with a data path of its own (AWS_DATA_PATH) gets botocore's own loader."""
    core = botocore.session.Session()

    def loader() -> Loader:
        paths = core.get_config_variable("data_path")
        if paths:  # AWS_DATA_PATH or a profile's data_path: its sdk-extras merge into the model read, so none shared
            return create_loader(paths)
        return Loader(file_loader=_files())

    core.lazy_register_component("data_loader", loader)
    return boto3.Session(botocore_session=core, **kwargs)
