"""The two request bodies the capacity controller ever sends, built in one place.

`target_patch` is the only mutation of a foreign object: a JSON merge patch (RFC 7386) that sets
one field and, because a merge patch names only what it changes, cannot touch any other. It
re-checks the field-path rule, so even a caller that skipped `decide` cannot aim it at
`metadata`. `status_patch` turns the desired status into the merge patch for `/status`, or None
when the object already says exactly that, so an unchanged reconcile makes no API call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fivespot.api.fieldpath import capacity_path_error, split_path
from fivespot.api.kinds.scheduled_capacity import ScheduledCapacityStatus


def target_patch(path: str, value: int) -> dict[str, Any]:
    """The merge-patch body setting `path` (a capacity path) to `value` and nothing else."""
    error = capacity_path_error(path)
    if error is not None:
        raise ValueError(f"refusing to build a target patch: path {error}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"refusing to build a target patch: {value!r} is not a count")
    body: Any = value
    for segment in reversed(split_path(path)):
        body = {segment: body}
    patch: dict[str, Any] = body
    return patch


def status_patch(
    prior: Mapping[str, Any] | None, desired: ScheduledCapacityStatus
) -> dict[str, Any] | None:
    """The merge-patch body for `/status` that turns `prior` (the object's raw `status`) into
    `desired`, or None when they already agree.

    Fields the desired status leaves unset are sent as null, which a merge patch reads as
    "delete". Lists (the conditions) are replaced whole, as merge patches do.
    """
    after = _json(desired)
    diff = _diff(_canonical(prior), after)
    return {"status": diff} if diff else None


def _json(status: ScheduledCapacityStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _canonical(prior: Mapping[str, Any] | None) -> dict[str, Any]:
    """`prior` in the exact spelling `_json` produces, so formatting alone never causes a patch."""
    if not prior:
        return {}
    try:
        return _json(ScheduledCapacityStatus.model_validate(prior))
    except ValidationError:
        return dict(prior)


def _diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key, value in after.items():
        old = before.get(key)
        if key in before and old == value:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            nested = _diff(old, value)
            if nested:
                patch[key] = nested
        else:
            patch[key] = value
    for key in before:
        if key not in after:
            patch[key] = None
    return patch


def as_scaled(observed: Mapping[str, Any] | None, observed_version: str, value: int,
              answer: Mapping[str, Any]) -> dict[str, Any] | None:
    """The target as a write through its `/scale` subresource left it, from the object the write
    was conditional on and the Scale the API server answered (which holds only the replicas and
    the new resourceVersion): `spec.replicas` set, the new version, the generation moved on when
    the value changed. None when `observed` is not the version the write was conditional on
    (nothing then stands in for the target until its watch event arrives)."""
    meta = observed.get("metadata") if observed is not None else None
    scale_meta = answer.get("metadata")
    if observed is None or not isinstance(meta, Mapping) or not isinstance(scale_meta, Mapping) \
            or str(meta.get("resourceVersion")) != observed_version \
            or not isinstance(scale_meta.get("resourceVersion"), str):
        return None
    spec = observed.get("spec")
    before = spec.get("replicas") if isinstance(spec, Mapping) else None
    new_meta = {**meta, "resourceVersion": scale_meta["resourceVersion"]}
    generation = meta.get("generation")
    if before != value and isinstance(generation, int) and not isinstance(generation, bool):
        new_meta["generation"] = generation + 1
    return {**observed, "metadata": new_meta,
            "spec": {**(spec if isinstance(spec, Mapping) else {}), "replicas": value}}


def scale_apply(namespace: str, name: str, value: int) -> dict[str, Any]:
    """The server-side apply of a target's Scale setting `spec.replicas` to `value`. An apply, not
    a merge patch: a Scale leaves `replicas: 0` out (`omitempty`), so a merge patch to 0 records
    no owner of the field, and a GitOps engine then reads git's value as drift; the applied
    configuration names the field whatever its value, so the controller owns it at 0 too."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"refusing to build a scale: {value!r} is not a count")
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": value}}
