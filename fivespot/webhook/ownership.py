"""Field ownership (`metadata.managedFields`) as the target guard judges it.

managedFields is not metadata the API server keeps to itself: a client may send it, and the API
server then stores what was sent (an empty entry wipes the ownership of every field). It is also
rewritten by the API server on every write, so it cannot simply be compared like other fields:
the capacity controller's own merge patch adds or refreshes its entry, moves ownership of the
allowlisted field to it (other managers lose that field, and an entry left empty disappears),
and bumps timestamps. What the capacity identity may therefore do to field ownership is exactly
what the API server does for a write of the allowlisted field, and nothing else:

- for every manager entry (keyed, as the API server keys them, by manager, operation and
  subresource), the fields it owns *outside* the allowlisted paths are the same before and after;
- an entry may appear or disappear only if it owns nothing outside the allowlisted paths;
- the exceptions are the API server's own bookkeeping: past ten Update managers it folds the
  oldest into a single `ancient-changes` entry, whose fields are then the union of theirs; and
  the first server-side apply to an object whose ownership was not tracked gives every field it
  already had to a `before-first-apply` entry.

Timestamps, `apiVersion` and the allowlisted paths themselves are free to change. A fieldsV1
tree is compared as the set of paths it owns (`f:spec` / `f:template`; a `.` member means its
node, so `{"f:spec": {".": {}}}` and `{"f:spec": {}}` are the same set, as the API server
re-encodes one as the other), so how the API server serialises it does not matter.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, cast

ANCIENT_CHANGES: Final = ("ancient-changes", "Update", "")
"""The entry the API server folds its oldest Update managers into (apiserver fieldmanager)."""
BEFORE_FIRST_APPLY: Final = ("before-first-apply", "Update", "")
"""The entry the API server gives an untracked object's fields at its first apply."""

Key = tuple[str, str, str]
FieldPath = tuple[str, ...]


def identical(a: object, b: object) -> bool:
    """Whether two decoded JSON values are the same, strictly (`1`, `1.0` and `true` differ),
    decided in C. `==` alone equates those three; their `marshal` encodings (format 0: no
    back-references, so how the values share objects does not matter) tell them apart. A pair
    that is equal but encodes differently (the same keys in another order), or that cannot be
    encoded (nested too deep, not plain JSON values), is not called identical: the caller's
    own walk decides it."""
    try:
        return a == b and marshal.dumps(cast(Any, a), 0) == marshal.dumps(cast(Any, b), 0)
    except (RecursionError, ValueError):
        return False


def _key(entry: Mapping[str, Any]) -> Key:
    return (str(entry.get("manager", "")), str(entry.get("operation", "")),
            str(entry.get("subresource", "")))


def _leaves(tree: object) -> set[FieldPath]:
    """The paths a fieldsV1 tree owns (an empty tree owns nothing); anything that is not a tree
    is a single opaque member."""
    if not isinstance(tree, Mapping):
        return {(f"<{tree!r}>",)}
    found: set[FieldPath] = set()
    stack: list[tuple[FieldPath, Mapping[str, Any]]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        if not node and path:
            found.add(path)
        for key, child in node.items():
            if key == "." and path:
                found.add(path)  # `.` marks the node itself: {"f:spec": {".": {}}} == {"f:spec": {}}
            elif isinstance(child, Mapping):
                stack.append((path + (str(key),), child))
            else:
                found.add(path + (str(key), f"<{child!r}>"))
    return found


def _field_path(path: Sequence[str]) -> FieldPath:
    return tuple(f"f:{segment}" for segment in path)


def _outside(entry: Mapping[str, Any], allowed: Sequence[FieldPath]) -> frozenset[FieldPath]:
    """What the entry owns outside the allowlisted paths."""
    owned = _leaves(entry.get("fieldsV1", {}))
    return frozenset(p for p in owned if not any(p[:len(a)] == a for a in allowed))


def _entries(managed: object) -> dict[Key, Mapping[str, Any]] | None:
    """The entries by key; None when managedFields is not a list of objects with unique keys."""
    if managed is None:
        return {}
    if not isinstance(managed, list) or not all(isinstance(e, Mapping) for e in managed):
        return None
    entries = {_key(e): e for e in managed}
    return entries if len(entries) == len(managed) else None


def _show(paths: Iterable[FieldPath], limit: int = 3) -> str:
    shown = sorted({".".join(s.removeprefix("f:") for s in p if s != ".") or "(the object)"
                    for p in paths})
    text = ", ".join(shown[:limit])
    return text + (f" and {len(shown) - limit} more" if len(shown) > limit else "")


def _manager(key: Key) -> str:
    name, operation, subresource = key
    details = [d for d in (operation if operation != "Update" else "", subresource) if d]
    return f"{name} ({', '.join(details)})" if details else name


def ownership_changes(old: object, new: object, capacity_paths: Sequence[Sequence[str]]) -> list[str]:
    """How the write changes the ownership of fields outside `capacity_paths` (empty: it does
    not); each item names a manager and the fields whose ownership it gains or loses."""
    before, after = _entries(old), _entries(new)
    if before is None or after is None:
        return [] if old == new else ["managedFields is not a list of distinct manager entries"]
    allowed = [_field_path(p) for p in capacity_paths]
    unchanged = {k for k in before.keys() & after.keys() if k != ANCIENT_CHANGES
                 and identical(before[k].get("fieldsV1"), after[k].get("fieldsV1"))}
    owned_before = {k: _outside(e, allowed) for k, e in before.items() if k not in unchanged}
    owned_after = {k: _outside(e, allowed) for k, e in after.items() if k not in unchanged}
    _fold_ancient_changes(owned_before, owned_after)
    if not before:
        owned_after.pop(BEFORE_FIRST_APPLY, None)
    changes = []
    for key in sorted(set(owned_before) | set(owned_after)):
        lost = owned_before.get(key, frozenset()) - owned_after.get(key, frozenset())
        gained = owned_after.get(key, frozenset()) - owned_before.get(key, frozenset())
        manager = _manager(key)
        if lost:
            changes.append(f"{manager} would no longer own {_show(lost)}")
        if gained:
            changes.append(f"{manager} would own {_show(gained)}")
    return changes


def _fold_ancient_changes(before: dict[Key, frozenset[FieldPath]],
                          after: dict[Key, frozenset[FieldPath]]) -> None:
    """Accept the API server's compaction: Update entries that vanished into `ancient-changes`
    (whose fields become exactly the union of theirs and its own) count as unchanged."""
    if ANCIENT_CHANGES not in after:
        return
    vanished = [k for k in before if k not in after and k[1] == "Update"]
    union = before.get(ANCIENT_CHANGES, frozenset()).union(*(before[k] for k in vanished))
    if after[ANCIENT_CHANGES] != union:
        return
    for key in vanished:
        del before[key]
    before[ANCIENT_CHANGES] = union
