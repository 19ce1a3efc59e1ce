"""Partitions: the Platform's named sets of namespaces, each with its own Lease-elected leader.

A partition is the unit of sharding (docs/design/contracts/partitions.md: a bug or a stuck loop
affects one partition, and adding partitions never grows one loop). Every namespace belongs to
exactly one partition: the one that lists it, else the partition named `default`. A namespace no
partition takes (there is no `default`) is reconciled by nobody, and `of()` says so with None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from fivespot.api.bundle import Bundle

DEFAULT: Final = "default"


@dataclass(frozen=True)
class Partitions:
    """namespace -> partition name, from the compiled bundle's `partitions`.

    `campaign` is the partitions this replica runs for (all by default; `--partitions` narrows
    it), while the namespace mapping always covers every partition.
    """

    names: tuple[str, ...]
    by_namespace: Mapping[str, str]
    campaign: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.campaign:
            object.__setattr__(self, "campaign", self.names)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, Iterable[str]]]) -> "Partitions":
        names: list[str] = []
        by_namespace: dict[str, str] = {}
        for name, namespaces in pairs:
            if name in names:
                raise ValueError(f"partition {name!r} is declared twice")
            names.append(name)
            for namespace in namespaces:
                if namespace in by_namespace:
                    raise ValueError(
                        f"namespace {namespace!r} is in partitions {by_namespace[namespace]!r} "
                        f"and {name!r}"
                    )
                by_namespace[namespace] = name
        if not names:
            names = [DEFAULT]
        return cls(tuple(sorted(names)), dict(by_namespace))

    @classmethod
    def from_bundle(cls, bundle: Bundle) -> "Partitions":
        return cls.from_pairs((p.name, p.namespaces) for p in bundle.partitions)

    def of(self, namespace: str | None) -> str | None:
        """The partition that owns `namespace`, or None when no partition takes it."""
        if namespace is not None and namespace in self.by_namespace:
            return self.by_namespace[namespace]
        return DEFAULT if DEFAULT in self.names else None

    def only(self, selected: Iterable[str]) -> "Partitions":
        """The same mapping, campaigning only for `selected` (each must exist)."""
        chosen = tuple(sorted(set(selected)))
        unknown = [n for n in chosen if n not in self.names]
        if unknown or not chosen:
            raise ValueError(f"unknown partitions {unknown}; the bundle has {list(self.names)}")
        return Partitions(self.names, self.by_namespace, chosen)
