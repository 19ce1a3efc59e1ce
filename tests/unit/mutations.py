"""A seeded generator of broken inputs: YAML documents mutated as people and tools break them.

Each mutation starts from valid documents and applies one to three changes, either to the parsed
tree (a value of the wrong type, a missing or extra field, a renamed key, a huge number, a
unicode or empty name, a duplicated or dropped document) or to the rendered bytes (truncated,
binary bytes, a tab, a stray indicator, deep nesting, an alias, a tag, a huge literal). The same
seed gives the same inputs, so a failure names the case that reproduces it.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from typing import Any, Final

import yaml

_STRINGS: Final = (
    "", "x", " ", "ñandú", "名前", "\u202eevil", "💥", "a" * 300, "a" * 70_000, "1.30", "09:30",
    "24:00", "2026-02-30", "spec.warmReplicas", "metadata.labels", "status.inUse", "*", "../..",
    "XNYS", "XXXX", "Deny", "mon-fri", "-1", "true", "null", "Ünïcödé-Näme", "UPPER", "a.b.c",
    "spec." + ".".join(["x"] * 20), "http://", "\\", "'", '"', "${HOME}", "%s", "0x10",
)
_NUMBERS: Final = (0, -1, 1, 7, 2**31, 2**63, 10**40, -(10**40), 1.5, -0.0, 1e308,
                   float("inf"), float("-inf"), float("nan"))
_KEYS: Final = ("extra", "spec", "kind", "metadata", "name", "namespaces", "ñ", "名前", "",
                "x" * 200, "apiVersion", "status", "capacityPaths", "drainPath", "years")
_TEXT_INSERTS: Final = (
    b"\x00", b"\xff\xfe", b"\xc3\x28", b"\t", b": :", b"- [", b"{{", b"}", b"]", b"&a ", b"*a",
    b"*undefined", b"!!python/object/apply:os.system ['true'] ", b"!!binary ", b"!!float ",
    b"%YAML 1.1\n", b"---\n", b"...\n", b"? ", b"\r", b"\xef\xbb\xbf", b"|", b">-\n", b"#",
    b"<<: *a\n", b"'", b'"', b"@", b"`", b"\n  - ", b"\n\t", b":", b"!!set ", b"!!omap ",
)


def _values(rng: random.Random) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return rng.choice(_STRINGS)
    if choice == 1:
        return rng.choice(_NUMBERS)
    if choice == 2:
        return rng.choice((None, True, False))
    if choice == 3:
        return [rng.choice(_STRINGS) for _ in range(rng.choice((0, 1, 2, 300)))]
    if choice == 4:
        return {rng.choice(_KEYS): rng.choice(_STRINGS + _NUMBERS)}
    if choice == 5:
        return rng.choice((dt.date(2026, 1, 1), dt.datetime(2026, 1, 1, 9, 30)))
    if choice == 6:
        return rng.randbytes(rng.choice((0, 1, 16)))  # dumped as !!binary
    if choice == 7:
        nested: Any = rng.choice(_STRINGS)
        for _ in range(rng.choice((5, 60))):
            nested = [nested] if rng.random() < 0.5 else {"n": nested}
        return nested
    return rng.getrandbits(rng.choice((8, 64, 200)))


def _containers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every dict and list in `node` (depth-first)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        found.append(path)
        for key, value in node.items():
            found += _containers(value, (*path, key))
    elif isinstance(node, list):
        found.append(path)
        for index, value in enumerate(node):
            found += _containers(value, (*path, index))
    return found


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _mutate_tree(rng: random.Random, document: Any) -> Any:
    """One structural change somewhere in `document` (returns the changed document)."""
    containers = _containers(document)
    if not containers:
        return _values(rng)
    target = _at(document, rng.choice(containers))
    operation = rng.randrange(5)
    if isinstance(target, dict):
        keys = list(target)
        if operation == 0 and keys:
            target[rng.choice(keys)] = _values(rng)
        elif operation == 1 and keys:
            del target[rng.choice(keys)]
        elif operation == 2:
            target[rng.choice(_KEYS)] = _values(rng)
        elif operation == 3 and keys:
            key = rng.choice(keys)
            target[f"{key}{rng.choice(('s', '_', 'X', ''))}".swapcase()] = target.pop(key)
        else:
            if keys:
                key = rng.choice(keys)
                target[key] = [target[key]] if rng.random() < 0.5 else {"wrapped": target[key]}
    elif isinstance(target, list):
        if operation == 0 and target:
            target[rng.randrange(len(target))] = _values(rng)
        elif operation == 1 and target:
            del target[rng.randrange(len(target))]
        elif operation == 2:
            target.append(copy.deepcopy(rng.choice(target)) if target else _values(rng))
        else:
            target.insert(0, _values(rng))
    return document


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One change to a file's bytes."""
    at = rng.randrange(len(data) + 1)
    operation = rng.randrange(8)
    if operation == 0:
        return data[:at]
    if operation == 1:
        return data[:at] + rng.choice(_TEXT_INSERTS) + data[at:]
    if operation == 2:
        return rng.randbytes(rng.choice((1, 64, 4096)))
    if operation == 3:
        depth = rng.choice((100, 1_000, 20_000))
        return data + b"\ndeep: " + b"[" * depth + b"]" * depth + b"\n"
    if operation == 4:
        return data + b"\nhuge: " + b"9" * rng.choice((30, 5_000, 100_000)) + b"\n"
    if operation == 5:  # aliases, nested: a small billion-laughs
        levels, width = rng.choice(((3, 3), (8, 10), (12, 12)))
        lines = [b"a0: &a0 [lol]"]
        for level in range(1, levels):
            refs = b", ".join([b"*a%d" % (level - 1)] * width)
            lines.append(b"a%d: &a%d [%s]" % (level, level, refs))
        return data + b"\n---\n" + b"\n".join(lines) + b"\n"
    if operation == 6:
        return data.replace(b"  ", b"\t", 1)
    flipped = bytearray(data)
    if flipped:
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
    return bytes(flipped)


def _dump(documents: list[Any]) -> bytes:
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True).encode()


class RepoMutator:
    """Broken copies of a repo given as {relative path: [documents]}: 1 to 3 mutations each.

    Files a mutation leaves alone keep the bytes rendered once, which makes a case cheap."""

    def __init__(self, files: dict[str, list[Any]]) -> None:
        self.files = files
        self.rendered = {name: _dump(documents) for name, documents in files.items()}

    def mutate(self, rng: random.Random) -> dict[str, bytes]:
        trees = dict(self.files)
        changed: set[str] = set()
        byte_changes: list[str] = []
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(sorted(trees))
            kind = rng.randrange(10)
            if kind < 8 and trees[name] and name not in changed:
                trees[name] = copy.deepcopy(trees[name])
                changed.add(name)
            if kind < 6 and trees[name]:
                index = rng.randrange(len(trees[name]))
                trees[name][index] = _mutate_tree(rng, trees[name][index])
            elif kind == 6 and trees[name]:
                documents = trees[name]
                documents.insert(rng.randrange(len(documents) + 1),
                                 copy.deepcopy(rng.choice(documents)))
            elif kind == 7 and trees[name]:
                del trees[name][rng.randrange(len(trees[name]))]
            elif kind == 8 and len(trees) > 1:
                del trees[name]
            else:
                byte_changes.append(name)
        rendered = {name: _dump(documents) if name in changed else self.rendered[name]
                    for name, documents in trees.items()}
        for name in byte_changes:
            if name in rendered:
                rendered[name] = _mutate_bytes(rng, rendered[name])
        return rendered


