"""The field-path rule accepts and rejects exactly what docs/design/contracts/scheduled-capacity.md
says."""

from __future__ import annotations

import pytest

from fivespot.api.fieldpath import capacity_path_error, drained_path_error


@pytest.mark.parametrize(
    "path",
    ["spec.warmReplicas", "spec.a", "spec.pool.size", "spec.a.b.c.d.e.f.g", "spec.x9Y"],
)
def test_capacity_path_accepts_camel_case_segments_under_spec(path: str) -> None:
    assert capacity_path_error(path) is None


@pytest.mark.parametrize(
    "path",
    [
        "spec",  # the whole spec is not one numeric field
        "metadata.labels",
        "metadata.ownerReferences",
        "status.inUse",
        "spec.a.b.c.d.e.f.g.h",  # nine segments
        "spec..replicas",
        "spec.replicas[0]",
        "spec.*",
        "spec.'a'",
        'spec."a"',
        "spec/replicas",
        "/spec/replicas",
        "spec.Replicas",
        "spec.warm_replicas",
        "spec.warm-replicas",
        "spec.replicas.",
        ".spec.replicas",
        "spec.replicas\n",
        "spec.rеplicas",  # Cyrillic e
        "",
    ],
)
def test_capacity_path_rejects_everything_outside_the_allowlist(path: str) -> None:
    assert capacity_path_error(path) is not None


def test_capacity_path_rejects_non_strings() -> None:
    assert capacity_path_error(3) is not None


def test_drained_path_must_start_with_status() -> None:
    assert drained_path_error("status.inUse") is None
    assert drained_path_error("spec.inUse") is not None
    assert drained_path_error("status") is not None
