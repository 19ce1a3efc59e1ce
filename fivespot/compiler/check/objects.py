"""`fivespot check`: the API server's admission verdict on objects, without a cluster.

`check` reads compiled output (CRDs, ValidatingAdmissionPolicies, bindings, params objects) and
objects to admit. The decisions themselves are `fivespot.policies.admission_eval`'s; this module reads
files, pairs old and new objects and decides them (on forked workers for a large input,
`fivespot.compiler.check.pool`); `render` shows the results, `fixtures` runs `fivespot test` on the checker
built here. Bad input is never a traceback: it is an InputError carrying `FILE:LINE:COL: field:
message` diagnostics (exit 2).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Any, Final

from msgspec import Struct
from msgspec.structs import replace

from fivespot.compiler import folders
from fivespot.compiler.check import cache as checkcache
from fivespot.compiler.check import pool
from fivespot.compiler.check.governance import Checked, field_governance, object_claim, object_writer
from fivespot.compiler.check.pool import MIN_PER_WORKER, usable_cores
from fivespot.compiler.diagnostics import Diagnostic, InputError, Location
from fivespot.compiler.check.objectyaml import (
    Document,
    STDIN,
    Part,
    read_documents,
    read_each_part,
    read_file,
    read_parts,
    read_text,
    split_text,
)
from fivespot.policies.admission_eval import (
    Checker,
    FieldValidation,
    NamespaceRequired,
    PolicyConfigError,
    Request,
    SchemaError,
    UnknownKind,
    Verdict,
    group_of,
)
from fivespot.policies.admission_eval.gotext import quote
from fivespot.policies.cel import authz
from fivespot.policies.cel.engine import compiled_programs, restore_programs
from fivespot.policies import kubeversions
from fivespot.policies.kubeversions import KubernetesVersion

if TYPE_CHECKING:
    from fivespot.api.fieldgovernance import Claim, OtherWriter


_POLICY_SUFFIXES: Final = (".yaml", ".yml")


_META_STRINGS: Final = ("name", "namespace", "generateName", "uid", "resourceVersion")
_META_STRING_MAPS: Final = ("labels", "annotations")


def envelope_problems(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each part of the object's envelope that the API server would not
    decode (apiVersion, kind, metadata and its typed fields), so no check runs on it."""
    problems = [(key, "required field is missing" if key not in obj
                 else f"expected a string, got {type(obj[key]).__name__}")
                for key in ("apiVersion", "kind") if not isinstance(obj.get(key), str)]
    meta = obj.get("metadata", {})
    if meta is None:
        return problems
    if not isinstance(meta, dict):
        return [*problems, ("metadata", f"expected a mapping, got {type(meta).__name__}")]
    for key in _META_STRINGS:
        if key in meta and not isinstance(meta[key], str):
            problems.append((f"metadata.{key}", f"expected a string, got {type(meta[key]).__name__}"))
    for key in _META_STRING_MAPS:
        value = meta.get(key)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            problems.append((f"metadata.{key}", "expected a mapping of strings to strings"))
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list)
                                       and all(isinstance(f, str) for f in finalizers)):
        problems.append(("metadata.finalizers", "expected a list of strings"))
    return problems


def _objects(documents: Iterable[Document]) -> list[Document]:
    """The documents that are Kubernetes objects; raises InputError for any that is not."""
    problems = []
    found = []
    for document in documents:
        data = document.data
        if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
            found += [Document(document.file, item, document.line, document.column)
                      for item in data["items"]]
            continue
        if not isinstance(data, dict) or not data.get("apiVersion") or not data.get("kind"):
            problems.append(Diagnostic(document.locate(), "",
                                       "not a Kubernetes object (a mapping with apiVersion and kind)"))
            continue
        malformed = envelope_problems(data)
        problems += [Diagnostic(document.locate(*field.split(".")), field, message)
                     for field, message in malformed]
        if not malformed:
            found.append(document)
    if problems:
        raise InputError(problems)
    return found


# --- loading policies ------------------------------------------------------------------------------


def yaml_files(root: Path, suffixes: tuple[str, ...] = _POLICY_SUFFIXES) -> list[Path]:
    """Every YAML file (or file with one of `suffixes`) under a folder, in path order (hidden
    files and folders skipped, the folder a boundary for symlinks: `fivespot.compiler.folders`), or the
    file itself; raises InputError naming each symlink refused."""
    return folders.yaml_files(root, suffixes)


_CHECKED_KINDS: Final = ("CustomResourceDefinition", "ValidatingAdmissionPolicy")
"""What a file must mention to be read for the checker (VAPs' params objects aside): the rest of
a compiled output (RBAC, workloads, Argo CD and Flux objects) is not parsed at all."""


def load_checker(roots: Sequence[Path], cache: bool = True,
                 server: KubernetesVersion | None = None) -> Checker:
    """A Checker from compiled output folders or files, deciding as the API server of version
    `server` (default: `default_server`); raises InputError. With `cache`, what reading and
    compiling these exact files gave an earlier run is reused and this run's is kept
    (`fivespot.compiler.check.cache`)."""
    checker, keep = _load_checker(roots, cache, server)
    keep()
    return checker


def _load_checker(roots: Sequence[Path], cache: bool, server: KubernetesVersion | None
                  ) -> tuple[Checker, Callable[[], None]]:
    """The Checker, and what keeps its work for later runs: called after deciding, so the CEL
    compiled on first use (the batches of the policies a request matches) is kept too."""
    problems: list[Diagnostic] = []
    files: list[tuple[Path, str, str]] = []  # (path, name relative to its root, text)
    for root in roots:
        if not root.exists():
            problems.append(Diagnostic(Location(str(root), 0, 0), "",
                                       "policies folder does not exist; pass the OUT_DIR of "
                                       "`fivespot compile`"))
            continue
        try:
            paths = yaml_files(root)
        except InputError as error:
            problems += error.diagnostics
            continue
        for path in paths:
            try:
                text = read_file(path, str(path))
            except InputError as error:
                problems += error.diagnostics
                continue
            files.append((path, path.relative_to(root).as_posix() if path != root else path.name,
                          text))
    if problems:
        try:  # every problem in one run: the files read may have theirs too
            _policy_objects(files)
        except InputError as error:
            problems += error.diagnostics
        raise InputError(problems)
    where = ", ".join(str(r) for r in roots)
    if not cache:
        objects = _policy_objects(files)
        return checker_from_objects(objects, where, server=server), lambda: None
    name = checkcache.key([(relative, text) for _, relative, text in files])
    kept = checkcache.load(name)
    if kept is not None:
        restore_programs(kept.programs)
        objects, known = kept.objects, len(kept.programs)
    else:
        objects, known = _policy_objects(files), -1
    # An entry is kept only for policies that compiled: each kind's schema is then compiled
    # when an object of that kind is first checked, not all of them up front.
    checker = checker_from_objects(objects, where, lazy_schemas=kept is not None, server=server)

    def keep() -> None:
        programs = compiled_programs()
        if len(programs) != known:
            checkcache.save(name, checkcache.Entry(objects, programs))

    return checker, keep


def _policy_objects(files: Sequence[tuple[Path, str, str]]) -> list[Mapping[str, Any]]:
    """The objects of the files that may matter to the checker; raises InputError."""
    objects: list[Mapping[str, Any]] = []
    problems: list[Diagnostic] = []
    others: list[tuple[Path, str]] = []
    for path, _, text in files:
        try:
            if any(kind in text for kind in _CHECKED_KINDS):
                objects += [d.data for d in read_text(text, str(path)) if isinstance(d.data, dict)]
            else:
                others.append((path, text))
        except InputError as error:
            problems += error.diagnostics
    param_kinds = {str((o.get("spec") or {}).get("paramKind", {}).get("kind", ""))
                   for o in objects if o.get("kind") == "ValidatingAdmissionPolicy"
                   and isinstance(o.get("spec"), dict)
                   and isinstance(o["spec"].get("paramKind"), dict)} - {""}
    for path, text in others:  # the files that may hold params objects
        if any(kind in text for kind in param_kinds):
            try:
                objects += [d.data for d in read_text(text, str(path)) if isinstance(d.data, dict)]
            except InputError as error:
                problems += error.diagnostics
    if problems:
        raise InputError(problems)
    return objects


def default_server(objects: Sequence[Mapping[str, Any]]) -> KubernetesVersion:
    """The version a compiled output targets newest (its CRDs' TARGETS_ANNOTATION, the first
    found), else the newest supported."""
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            continue
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(kubeversions.TARGETS_ANNOTATION) if isinstance(annotations, dict) else None
        if isinstance(text, str):
            try:
                return kubeversions.newest_target(text)
            except kubeversions.UnsupportedVersion:
                continue
    return kubeversions.NEWEST


def checker_from_objects(objects: Sequence[Mapping[str, Any]], where: str,
                         lazy_schemas: bool = False, server: KubernetesVersion | None = None
                         ) -> Checker:
    """Compile, deciding as `server` (default: `default_server`); raises InputError when a
    schema or policy cannot be compiled, or has no kinds (`lazy_schemas`: see
    `crd.compile_crds`)."""
    try:
        checker = Checker.compile(objects, lazy_schemas=lazy_schemas,
                                  server=server or default_server(objects))
    except (SchemaError, PolicyConfigError) as error:
        raise InputError([Diagnostic(Location(where, 0, 0), "", str(error))]) from None
    if not checker.kinds:
        raise InputError([Diagnostic(Location(where, 0, 0), "",
                                     "no CustomResourceDefinition found; pass the OUT_DIR of "
                                     "`fivespot compile`")])
    return checker


# --- fivespot check --------------------------------------------------------------------------------


class Result(Struct, frozen=True):
    """The verdict for one object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    operation: str
    verdict: Verdict
    file: str = ""
    line: int = 0
    """Where the object starts in its input file."""
    skipped: str = ""
    """Why no policy given applies to the object, so it was not checked (its verdict is then
    the plain admission: nothing fivespot checks denies it)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "object": {"apiVersion": self.api_version, "kind": self.kind,
                       "namespace": self.namespace, "name": self.name},
            "source": {"file": self.file, "line": self.line},
            "operation": self.operation, **self.verdict.as_json(),
            **({"skipped": self.skipped} if self.skipped else {}),
        }

    @property
    def label(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}/{where}"


def _key(checker: Checker, obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name); raises UnknownKind for a kind the policies should
    know (an object no policy applies to keys by the namespace it names)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    try:
        namespace = checker.namespace_of(obj)
    except UnknownKind as error:
        if error.governed:
            raise
        namespace = str(meta.get("namespace") or "")
    return (str(obj.get("apiVersion")), str(obj.get("kind")), namespace,
            str(meta.get("name") or ""))


def _not_checked(error: UnknownKind) -> str:
    group = group_of(error.api_version)
    return (f"not checked: no CRD or ValidatingAdmissionPolicy given covers the API group "
            f"{group or 'core'!r} of {error.kind}")


def _unknown_kind(document: Document, error: UnknownKind) -> Diagnostic:
    why = ("" if error.group_defined else
           "; a ValidatingAdmissionPolicy given may match its API group, and check decides only "
           "the custom resources of the CRDs given")
    return Diagnostic(document.locate("kind"), "kind",
                      f"no matches for kind {quote(error.kind)} in version "
                      f"{quote(error.api_version)}, as kubectl would say (the policies define "
                      f"{', '.join(error.known)}){why}")



def check(policies: Sequence[Path], objects: Sequence[Path], old: Path | None = None,
          namespaces: Path | None = None, field_validation: FieldValidation = "Strict",
          jobs: int | None = None, cache: bool = True,
          server: KubernetesVersion | None = None, user_roles: Path | None = None) -> list[Result]:
    """Decide every object in `objects` (UPDATE where `old` holds its previous version), with
    the request's `fieldValidation` (kubectl's default: Strict), as the API server of version
    `server` (default: the newest the policies target), on at most `jobs` processes (default:
    every usable core, for large inputs); `cache`: see `load_checker`. The policies' authorizer
    checks are decided by the rules of the Roles and ClusterRoles in `user_roles` (the
    requesting user's), else assumed allowed (`fivespot.policies.cel.authz`)."""
    authorizer = read_user_roles(user_roles) if user_roles is not None else authz.assumed()
    checker, keep = _load_checker(policies, cache, server)
    sources = [_source(path) for path in input_files(objects)]
    found = _check_in_workers(checker, sources, old, namespaces, field_validation, jobs,
                              authorizer)
    results, checked = found if found is not None else _check_here(
        checker, sources, old, namespaces, field_validation, authorizer)
    keep()
    governed = field_governance(checked)  # one field, one governor among the objects given
    return [r if v is r.verdict else replace(r, verdict=v) for r, v in zip(results, governed)]


_Source = tuple[str, "str | InputError", "list[Part] | None"]
"""An input file: its name, its text (or why it cannot be read), and its parts (`split_text`;
None when it must be read whole)."""


_OBJECT_SUFFIXES: Final = (".yaml", ".yml", ".json")
"""What `kubectl apply -f FOLDER` reads."""


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files to read: each file as given, each folder's YAML and JSON files (`yaml_files`);
    raises InputError for a folder that holds none or a symlink leaving it."""
    found: list[Path] = []
    problems: list[Diagnostic] = []
    for path in paths:
        if not path.is_dir():
            found.append(path)
            continue
        try:
            inside = yaml_files(path, _OBJECT_SUFFIXES)
        except InputError as error:
            problems += error.diagnostics
            continue
        if not inside:
            problems.append(Diagnostic(Location(str(path), 0, 0), "",
                                       "no .yaml, .yml or .json file in this folder (hidden "
                                       "ones are skipped)"))
        found += inside
    if problems:
        raise InputError(problems)
    return found


def _source(path: Path) -> _Source:
    name = "STDIN" if str(path) == STDIN else str(path)  # as kubectl names it
    try:
        text = read_file(path, name)
    except InputError as error:
        return name, error, None
    return name, text, split_text(text)


def _documents(sources: Sequence[_Source]) -> Iterator[Document]:
    """Every document of every file, in order; raises the InputError of the first that cannot
    be read, when it is reached (as reading the files one after the other would)."""
    for name, text, parts in sources:
        if isinstance(text, InputError):
            raise text
        yield from (read_text(text, name) if parts is None else read_parts(text, name, parts))


def _decide(checker: Checker, document: Document,
            previous: Mapping[tuple[str, str, str, str], Document],
            namespace_objects: Mapping[str, Mapping[str, Any]],
            field_validation: FieldValidation, authorizer: Mapping[str, Any]
            ) -> tuple[Result, Claim | None, Claim | None, OtherWriter | None]:
    """One document decided (UPDATE when `previous` holds its old version), with its
    field-governance claim and its old version's when that matters, and the other writer it is
    (an autoscaler, a manifest); raises NamespaceRequired."""
    key = _key(checker, document.data)
    before = previous.get(key)
    old = before.data if before is not None else None
    request = Request("UPDATE" if before is not None else "CREATE", document.data, old,
                      namespace_objects.get(key[2]) if key[2] else None,
                      field_validation=field_validation, duplicate_fields=document.duplicates,
                      authorizer=authorizer)
    try:
        verdict = checker.check(request)
    except UnknownKind as error:
        if error.governed:
            raise
        return (Result(key[0], key[1], key[2], key[3], request.operation, _PLAIN, document.file,
                       document.line, _not_checked(error)), None, None,
                object_writer(document.data, key[2] or "default"))
    result = Result(key[0], key[1], key[2], key[3], request.operation, verdict,
                    document.file, document.line)
    claim = object_claim(document.data, result.namespace)
    old_claim = object_claim(old, result.namespace) if claim is not None and old is not None else None
    return result, claim, old_claim, object_writer(document.data, result.namespace or "default")


def _check_here(checker: Checker, sources: Sequence[_Source], old: Path | None,
                namespaces: Path | None, field_validation: FieldValidation,
                authorizer: Mapping[str, Any]) -> tuple[list[Result], list[Checked]]:
    """Every object read and decided in this process, each problem of the input reported (as
    one InputError, in the order the files give them)."""
    documents = _objects(_documents(sources))
    old_documents = _objects(read_documents(old)) if old is not None else []
    namespace_objects = _namespaces(namespaces)
    problems = []
    for document in documents + old_documents:
        try:
            checker.kind_of(document.data)
        except UnknownKind as error:
            if error.governed:
                problems.append(_unknown_kind(document, error))
    if problems:
        raise InputError(problems)
    previous = {_key(checker, d.data): d for d in old_documents}
    keys = {_key(checker, d.data) for d in documents}
    problems = _old_without_new(checker, previous, keys)
    if problems:
        raise InputError(problems)
    results: list[Result] = []
    checked: list[Checked] = []
    for document in documents:
        try:
            result, claim, old_claim, writer = _decide(checker, document, previous,
                                                       namespace_objects, field_validation,
                                                       authorizer)
        except NamespaceRequired as error:
            problems.append(_namespace_needed(document, error, namespaces))
            continue
        results.append(result)
        checked.append(Checked(claim, old_claim, result.verdict,
                               functools.partial(document.locate, "metadata", "name"), writer))
    if problems:
        raise InputError(problems)
    return results, checked


def _old_without_new(checker: Checker, previous: Mapping[tuple[str, str, str, str], Document],
                     keys: Collection[tuple[str, str, str, str]]) -> list[Diagnostic]:
    """An old object of a kind the policies decide, without its new version (one no policy
    covers is not checked either way)."""
    return [Diagnostic(document.locate("metadata", "name"), "metadata.name",
                       f"old object {key[1]} {key[2] + '/' if key[2] else ''}{key[3]} has no new "
                       "version among the objects to check")
            for key, document in previous.items() if key not in keys and _known_kind(checker, document)]


def _known_kind(checker: Checker, document: Document) -> bool:
    try:
        checker.kind_of(document.data)
    except UnknownKind:
        return False
    return True


def _check_in_workers(checker: Checker, sources: Sequence[_Source], old: Path | None,
                      namespaces: Path | None, field_validation: FieldValidation,
                      jobs: int | None, authorizer: Mapping[str, Any]
                      ) -> tuple[list[Result], list[Checked]] | None:
    """The results of a large input, read and decided on forked workers (`pool`), each
    reading its own run of documents; None when the input is small or one core is all there is,
    or when anything in it is a problem: `_check_here` then does it all again and words each
    problem exactly as it always does (bad input costs the time, never the wording)."""
    if (jobs or usable_cores()) < 2 or any(not isinstance(text, str) or parts is None
                                           for _, text, parts in sources):
        return None
    runs = [(index, part) for index, (_, _, parts) in enumerate(sources)
            for part in range(len(parts or ()))]
    if len(runs) < 2 * MIN_PER_WORKER:
        return None
    try:
        old_documents = _objects(read_documents(old)) if old is not None else []
        namespace_objects = _namespaces(namespaces)
        previous = {_key(checker, d.data): d for d in old_documents}
    except (InputError, UnknownKind):
        return None

    def work(start: int, end: int) -> list[_Decided] | None:
        found: list[_Decided] = []
        try:
            for index, group in itertools.groupby(runs[start:end], key=operator.itemgetter(0)):
                name, text, parts = sources[index]
                assert isinstance(text, str) and parts is not None
                numbers = [part for _, part in group]
                each = read_each_part(text, name, [parts[part] for part in numbers])
                for part, read in zip(numbers, each):
                    for position, document in enumerate(_objects(read)):
                        found.append(_decided(_decide(checker, document, previous,
                                                      namespace_objects, field_validation,
                                                      authorizer),
                                              index, part, position))
        except (InputError, UnknownKind, NamespaceRequired):
            return None
        return found

    def taken_in(part: list[_Decided]) -> list[tuple[Result, Checked]]:
        """A run's results as the parent keeps them (made while the workers go on)."""
        found = []
        for (api_version, kind, namespace, name, operation, verdict, line, claim, old_claim,
             writer, index, number, position, skipped) in part:
            result = Result(api_version, kind, namespace, name, operation,
                            _plain_verdict(verdict) if isinstance(verdict, tuple) else verdict,
                            sources[index][0], line,
                            skipped)
            found.append((result, Checked(claim, old_claim, result.verdict, functools.partial(
                _name_in_part, sources[index], number, position), writer)))
        return found

    done = pool.run(work, len(runs), jobs, each=taken_in)
    if done is None:
        return None
    results = [result for result, _ in done]
    if previous and _old_without_new(checker, previous, {
            (r.api_version, r.kind, r.namespace, r.name) for r in results}):
        return None
    return results, [checked for _, checked in done]


_Decided = tuple[str, str, str, str, str, "Verdict | tuple[str, ...]", int, "Claim | None",
                 "Claim | None", "OtherWriter | None", int, int, int, str]
"""What a worker sends back for an object: apiVersion, kind, namespace, name, operation, the
verdict (a plain one as the policies it assumed the authorizer of: `_plain_verdict`), its
line, its claim and its old version's, the other writer it is (an autoscaler, a manifest),
where it is (file, part, position among the part's objects), and why it was skipped ('' when
checked)."""


def _decided(decided: tuple[Result, Claim | None, Claim | None, OtherWriter | None], index: int,
             part: int, position: int) -> _Decided:
    """An object's `_Decided`: the strings most objects share interned (pickled once), a plain
    admission as the names of the policies it assumed the authorizer of (unpickling is the
    parent's share of the work)."""
    result, claim, old_claim, writer = decided
    verdict = result.verdict
    sent = tuple(intern(p) for p in verdict.assumed) if _plain(verdict) else verdict
    return (intern(result.api_version), intern(result.kind), intern(result.namespace),
            result.name, result.operation, sent, result.line, claim, old_claim, writer, index,
            part, position, result.skipped)


_PLAIN: Final = Verdict(True)


def _plain(verdict: Verdict) -> bool:
    """Allowed with nothing to say but what it assumed: the verdict most objects get."""
    return (verdict.allowed and not verdict.violations and not verdict.warnings
            and not verdict.audit and verdict.status is None)


@functools.lru_cache(maxsize=16)
def _plain_verdict(assumed: tuple[str, ...]) -> Verdict:
    """The plain admission that assumed the authorizer of these policies (one per set)."""
    return Verdict(True, assumed=assumed) if assumed else _PLAIN


def _name_in_part(source: _Source, part: int, position: int) -> Location:
    """Where the `position`-th object of a part gives its name (the part read again: asked only
    of the few objects a diagnostic names)."""
    name, text, parts = source
    assert isinstance(text, str) and parts is not None
    return _objects(read_parts(text, name, parts[part:part + 1]))[position].locate(
        "metadata", "name")


def _namespaces(path: Path | None) -> dict[str, Mapping[str, Any]]:
    if path is None:
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    problems = []
    for document in _objects(read_documents(path)):
        data = document.data
        if data.get("kind") != "Namespace" or data.get("apiVersion") != "v1":
            problems.append(Diagnostic(document.locate("kind"), "kind",
                                       f"expected Namespace objects (apiVersion v1), got "
                                       f"{data.get('kind')} ({data.get('apiVersion')})"))
            continue
        name = str((data.get("metadata") or {}).get("name") or "")
        found[name] = data
    if problems:
        raise InputError(problems)
    return found


_ROLE_KINDS: Final = ("Role", "ClusterRole")
_RULE_LISTS: Final = (("verbs", "verbs"), ("apiGroups", "api_groups"), ("resources", "resources"),
                      ("resourceNames", "resource_names"),
                      ("nonResourceURLs", "non_resource_urls"))


def read_user_roles(path: Path) -> dict[str, Any]:
    """The authorizer of a user holding the Roles and ClusterRoles in the file (a Role's rules
    in its namespace, a ClusterRole's everywhere); raises InputError naming file, line and
    field of anything else."""
    rules: list[authz.Rule] = []
    problems: list[Diagnostic] = []
    documents = _objects(read_documents(path))
    for document in documents:
        data = document.data
        if data.get("kind") not in _ROLE_KINDS or \
                data.get("apiVersion") != "rbac.authorization.k8s.io/v1":
            problems.append(Diagnostic(document.locate("kind"), "kind",
                                       "expected Role or ClusterRole objects "
                                       "(rbac.authorization.k8s.io/v1), the user's, got "
                                       f"{data.get('kind')} ({data.get('apiVersion')})"))
            continue
        namespace = None
        if data["kind"] == "Role":
            namespace = str((data.get("metadata") or {}).get("namespace") or "default")
        found, wrong = _rules(document, namespace)
        rules += found
        problems += wrong
    if not documents:
        problems.append(Diagnostic(Location(str(path), 0, 0), "",
                                   "no Role or ClusterRole: give the roles the user holds "
                                   "(a Role with `rules: []` states that they hold none)"))
    if problems:
        raise InputError(problems)
    return authz.stated(rules, f"the roles in {path}")


def _rules(document: Document, namespace: str | None) -> tuple[list[authz.Rule], list[Diagnostic]]:
    entries = document.data.get("rules")
    if entries is None:
        return [], []
    if not isinstance(entries, list):
        return [], [Diagnostic(document.locate("rules"), "rules", "expected a list of rules")]
    rules: list[authz.Rule] = []
    problems: list[Diagnostic] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(Diagnostic(document.locate("rules"), f"rules[{index}]",
                                       "expected a rule (a mapping with verbs)"))
            continue
        fields: dict[str, tuple[str, ...]] = {}
        for key, name in _RULE_LISTS:
            value = entry.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                problems.append(Diagnostic(document.locate("rules"),
                                           f"rules[{index}].{key}", "expected a list of strings"))
                continue
            fields[name] = tuple(value)
        if len(fields) == len(_RULE_LISTS):
            rules.append(authz.Rule(namespace=namespace, **fields))
    return rules, problems


def _namespace_needed(document: Document, error: NamespaceRequired, namespaces: Path | None
                      ) -> Diagnostic:
    source = f"in {namespaces}" if namespaces is not None else "(pass --namespaces NS.yaml)"
    return Diagnostic(document.locate("metadata", "namespace"), "metadata.namespace",
                      f"namespace {error.namespace!r} has no Namespace object {source}, and "
                      f"{error.needed_by} needs its labels to decide")
