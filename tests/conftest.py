"""Fixtures shared by every test. The builders and paths live in :mod:`tests.helpers`; no test
imports this file."""

from __future__ import annotations

import os

import polars as pl
import pytest

from tests.helpers import M2V_MODEL, SAMPLE, need

# Haystack sends usage telemetry unless told not to; tests never reach the network.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


@pytest.fixture(scope="session")
def embedder():
    """The shared Model2Vec embedder (the test skips when the model is absent)."""
    from arrowdedup.embed.embedders import Model2VecEmbedder

    return Model2VecEmbedder(need(M2V_MODEL))


@pytest.fixture(scope="session")
def sample_segments() -> pl.DataFrame:
    """The bundled sample (data/sample) extracted once: the items the framework adapters'
    tests dedup (doc_id, segment_id, text, … in document order)."""
    from arrowdedup.extract import extract

    return extract([SAMPLE], root=SAMPLE)
