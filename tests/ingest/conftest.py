"""Shared, session-wide synthetic data sets (generated once; every test treats them read-only)."""

from __future__ import annotations

import uuid

import pytest

from auditflow_app.settings import Settings

from ingest.amlworld import read_transactions
from ingest.synthetic import Dataset, generate, write_dataset


@pytest.fixture(scope="session")
def default_dataset() -> Dataset:
    """The demo's default: 2000 accounts, 3 days, 0.1% laundering, seed 7."""
    return generate()


@pytest.fixture(scope="session")
def rich_dataset() -> Dataset:
    """More laundering than the defaults, so typologies take their full range of sizes."""
    return generate(accounts=1500, days=3, laundering_rate=0.01, seed=21, tx_per_account_day=3.0)


@pytest.fixture(scope="session")
def small_dataset() -> Dataset:
    return generate(accounts=200, days=1, seed=5)


@pytest.fixture(scope="session")
def default_files(tmp_path_factory, default_dataset):
    """The default data set written once: (transactions CSV, patterns file)."""
    return write_dataset(default_dataset, tmp_path_factory.mktemp("default"), name="demo")


@pytest.fixture(scope="session")
def default_read_back(default_files) -> list:
    """Everything read_transactions yields for the written default data set."""
    return list(read_transactions(default_files[0]))


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return Settings().kafka_bootstrap


@pytest.fixture(scope="module")
def topic_name(request, bootstrap):
    """Unique topic names for this module's run (prefix: the module's ``TOPIC_PREFIX``); every
    topic named through it is deleted at the end."""
    prefix = getattr(request.module, "TOPIC_PREFIX", "t")
    run = uuid.uuid4().hex[:10]
    made: list[str] = []

    def name(what: str) -> str:
        t = f"{prefix}.{run}.{what}"
        made.append(t)
        return t

    yield name
    if made:
        from ingest import kafka_io

        kafka_io.delete_topics(bootstrap, made)
