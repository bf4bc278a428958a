"""boto3 sessions that share the service models the process has read: each reads its credentials and profile anew."""

from __future__ import annotations

import functools
import os
from typing import Any

import boto3
import botocore.session
from botocore.loaders import JSONFileLoader, Loader


class _ReadOnce(JSONFileLoader):  # type: ignore[misc]  # botocore is untyped
    """botocore's JSON file loader, keeping what it parsed: the endpoints file and a service's model are read once
    per process, not once per session (~0.1 s each; a test process makes hundreds of sessions)."""

    def __init__(self) -> None:
        self._parsed: dict[str, Any] = {}

    def load_file(self, file_path: str) -> Any:
        if file_path not in self._parsed:
            self._parsed[file_path] = super().load_file(file_path)
        return self._parsed[file_path]


@functools.cache
def _files() -> _ReadOnce:
    return _ReadOnce()


def new_session(**kwargs: Any) -> boto3.Session:
    """`boto3.Session(**kwargs)`, its loader reading through the process's kept files (botocore's public component
    API; the loader is made lazily as botocore's own, so a missing profile still raises where boto3 raises it)."""
    core = botocore.session.Session()

    def loader() -> Loader:
        # as botocore.loaders.create_loader: AWS_DATA_PATH (or the profile's data_path) searched first
        paths = core.get_config_variable("data_path")
        extra = [os.path.expanduser(os.path.expandvars(p)) for p in paths.split(os.pathsep)] if paths else None
        return Loader(extra_search_paths=extra, file_loader=_files())

    core.lazy_register_component("data_loader", loader)
    return boto3.Session(botocore_session=core, **kwargs)
