"""`prepare` returns a run decided in full, which nothing changes after (issue 36, item 4)."""

from __future__ import annotations

import dataclasses

import pytest

from margin.guards.make import describe_guard, guard_shapes
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare, prepare_inputs


def test_a_prepared_run_is_complete_when_prepare_returns_it():
    config = RunConfig(guard="keyword", dataset="sample", suite="quick", limit=6, seed=2)
    prepared = prepare(config)
    spec = config.guard_spec()
    assert prepared.spec == spec and prepared.guard is None
    assert prepared.info == describe_guard(spec) and prepared.shapes == guard_shapes(spec)
    assert len(prepared.prompts) == 6 and prepared.record.guard == prepared.info


def test_a_prepared_run_is_never_changed_after_it_is_made():
    prepared = prepare(RunConfig(guard="keyword", dataset="sample", suite="quick", limit=6))
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.prompts = prepared.prompts[:1]  # type: ignore[misc]
    shard = dataclasses.replace(prepared, prompts=prepared.prompts[:1])  # a part of it is a new run
    assert len(prepared.prompts) == 6 and len(shard.prompts) == 1 and shard.record == prepared.record


def test_inputs_alone_name_no_guard():
    inputs = prepare_inputs(RunConfig(guard="keyword", dataset="sample", suite="quick", limit=6))
    assert inputs.spec is None and inputs.info is None
