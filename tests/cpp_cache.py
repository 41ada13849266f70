"""One C++ build cache for every torch-using test of a pytest run, all xdist workers
included: torch's precompiled headers take a minute to build, and CI builds each once
per run (the cache locks concurrent builders of one header, so workers wait for it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def torch_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, above each worker's own
    path = base / "opbench-torch-cpp-cache"
    path.mkdir(exist_ok=True)
    return path
