"""`fivespot schedule preview`: when will capacity be on? Offline, before anything is pushed.

Reads provider objects (ManualSchedule, TimeBasedSpotSchedule, CapitalMarketsSchedule,
CompositeSchedule) and the ScheduledCapacities that follow them from YAML files or folders
(tenant manifests, or a compiled OUT_DIR), with `--config DIR` the objects a config repo
compiles to (its exchange calendars), and with `--kubeconfig` those of a live cluster (read
only). For each schedule it prints the next transitions (or
those between `--from` and `--until`), in the schedule's own time zone and in UTC, and for each
ScheduledCapacity following it the value it would write then, and its marks: holidays, early
closes, late opens, special sessions, an override. `-o svg` and `-o html` draw the same as a
week's picture (or `--from` to `--until`), one row per schedule, a composite's children under it.
The transitions come from `fivespot.controllers.spotschedules.timeline`, that is, from the decision functions
the provider controllers run, so the preview says what the cluster will do.

Exit codes: 0 printed, 2 bad input (FILE:LINE:COL: field: message).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from fivespot.api.kinds.scheduled_capacity import INACTIVE_VALUE, PROVIDER_GROUP, ScheduledCapacitySpec, api_group
from fivespot.commandline import exitcodes
from fivespot.compiler.diagnostics import CompileError, Diagnostic, InputError, Location
from fivespot.compiler.folders import yaml_files
from fivespot.compiler.check.objectyaml import read_documents
from fivespot.controllers.spotschedules.composite import parse_spec, references
from fivespot.controllers.spotschedules.timeline import Provider, Timeline, timelines

PROVIDER_KINDS: Final = ("ManualSchedule", "TimeBasedSpotSchedule", "CapitalMarketsSchedule",
                         "CompositeSchedule")
SCAP_KIND: Final = ("5spot.finos.org", "ScheduledCapacity")
PICTURE_SPAN: Final = dt.timedelta(days=7)
"""What `-o svg|html` draws without `--until`: the week from `--from`."""
_UTC: Final = dt.timezone.utc


@dataclass(frozen=True)
class Follower:
    """A ScheduledCapacity that follows a schedule: what it writes where."""

    namespace: str
    name: str
    schedule: tuple[str, str, str, str]
    target: str
    path: str
    active_value: int
    enabled: bool
    kill_switch: bool

    def value(self, active: bool | None) -> int | None:
        """The value written when the schedule turns `active`; None: nothing is written (it holds)."""
        if self.kill_switch or not self.enabled:
            return INACTIVE_VALUE
        if active is None:
            return None
        return self.active_value if active else INACTIVE_VALUE


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "schedule", help="preview schedules offline, or override one on a live cluster",
        description="Preview schedules offline (as a table, JSON or a picture of the week), or "
                    "hold one on or off for a while on a live cluster.")
    sub = parser.add_subparsers(dest="schedule_command", metavar="SUBCOMMAND", required=True)
    preview = sub.add_parser(
        "preview", help="the next transitions of each schedule and the values written then",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    preview.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                         help="YAML files or folders with provider objects and ScheduledCapacities")
    preview.add_argument("--config", type=Path, metavar="DIR",
                         help="also the objects this config repo compiles to (its calendars)")
    preview.add_argument("--kubeconfig", type=Path, metavar="FILE",
                         help="also read the provider objects and ScheduledCapacities of a live "
                         "cluster (read only: get and list)")
    preview.add_argument("--namespace", "-n", metavar="NS",
                         help="with --kubeconfig: only this namespace (default: all)")
    preview.add_argument("--count", type=int, default=5, metavar="N",
                         help="transitions per schedule (default 5; ignored with --until)")
    preview.add_argument("--from", dest="start", type=_instant, metavar="TIME",
                         help="start instant, RFC 3339 with an offset (default: now)")
    preview.add_argument("--until", type=_instant, metavar="TIME",
                         help="list every transition up to this instant instead of --count")
    preview.add_argument("--output", "-o", choices=("table", "json", "svg", "html"),
                         default="table",
                         help="a table (default), the same report as JSON, or a picture of it: an "
                         "SVG, or an HTML page with the SVG and the table (a week from --from "
                         "unless --until is given)")
    preview.add_argument("--timezone", metavar="ZONE", type=_zone,
                         help="with -o svg|html: the time axis's IANA zone (default: the zone "
                         "every schedule shares, else UTC)")
    preview.set_defaults(handler=run)
    from fivespot.cli.override import register as register_override

    register_override(sub)
    return parser


def _zone(text: str) -> str:
    from fivespot.api.kinds.providers import load_timezone

    try:
        load_timezone(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _instant(text: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 instant such as "
                                         "2026-03-02T09:00:00-05:00") from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset; add Z or +HH:MM")
    return parsed


class BadPreview(Exception):
    """Input the preview cannot work with; each line is a message (FILE:LINE:COL: ... or a flag)."""

    def __init__(self, lines: Sequence[str]):
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def run(args: argparse.Namespace) -> int:
    try:
        sys.stdout.write(render(args))
    except BadPreview as bad:
        for line in bad.lines:
            print(line, file=sys.stderr)
        return exitcodes.BAD_INPUT
    return exitcodes.OK


def render(args: argparse.Namespace) -> str:
    """What `fivespot schedule preview` prints for `args` (the docs build draws its pictures with
    this too); BadPreview on bad input."""
    report = build(args)
    if args.output == "json":
        return json.dumps(report, indent=2) + "\n"
    if args.output in ("svg", "html"):
        from fivespot.cli import picture

        zone = args.timezone or picture.shared_zone(report)
        return (picture.svg(report, zone) + "\n" if args.output == "svg"
                else picture.html(report, zone, table(report)))
    return table(report)


def build(args: argparse.Namespace) -> dict[str, Any]:
    """The report `args` ask for (`preview`); BadPreview on bad input."""
    if args.count < 1:
        raise BadPreview(["fivespot schedule preview: --count must be at least 1"])
    start = (args.start or dt.datetime.now(_UTC)).astimezone(_UTC)
    if args.until is not None and args.until <= start:
        raise BadPreview(["fivespot schedule preview: --until must be after --from"])
    picture = args.output in ("svg", "html")
    until = args.until or (start + PICTURE_SPAN if picture else None)
    try:
        objects = list(_read(args.paths))
        if args.config is not None:
            objects += _compiled(args.config)
        if args.kubeconfig is not None:
            objects += _live(args.kubeconfig, args.namespace)
        providers, followers = _parse(objects)
    except (InputError, CompileError) as error:
        raise BadPreview([str(d) for d in error.diagnostics]) from None
    if not providers:
        raise BadPreview(["fivespot schedule preview: no provider objects found in the given paths"])
    found = timelines(providers, start, until=until, count=args.count)
    return preview(providers, followers, found, start, until)


# --- reading --------------------------------------------------------------------------------------

_Obj = tuple[Mapping[str, Any], Callable[..., Location]]


def _read(paths: Sequence[Path]) -> Iterable[_Obj]:
    for path in paths:
        # a folder's files as `check` reads them: hidden ones skipped, the folder a boundary
        for file in yaml_files(path, (".yaml", ".yml", ".json")):
            for document in read_documents(file):
                if isinstance(document.data, Mapping):
                    yield document.data, document.locate


def _compiled(config: Path) -> list[_Obj]:
    from fivespot.compiler.pipeline import compile_repo

    compiled = compile_repo(config)
    def compiled_at(path: str) -> Callable[..., Location]:
        return lambda *field: Location(f"{config} (compiled {path})", 1, 1)

    return [(a.obj, compiled_at(a.path)) for a in compiled.artifacts]


def _live(kubeconfig: Path, namespace: str | None) -> list[_Obj]:
    """The cluster's provider objects and ScheduledCapacities, each kind in its served version."""
    from fivespot.runtime import kube

    try:
        api = kube.load_client(kubeconfig)
    except kube.KubeconfigError as error:
        raise InputError([Diagnostic(Location(str(kubeconfig), 0, 0), "", str(error))]) from None
    found: list[_Obj] = []
    try:
        for group, kind in [*((PROVIDER_GROUP, k) for k in PROVIDER_KINDS), SCAP_KIND]:
            resolved = kube.resolve_kind(api, group, kind)
            if resolved is None:
                continue
            listed = kube.request(api, "GET", kube.resource_path(
                resolved.group, resolved.version, resolved.plural, namespace=namespace))
            for item in listed.get("items") or []:
                item.setdefault("apiVersion", f"{group}/{resolved.version}")
                item.setdefault("kind", kind)
                ns, name = _meta(item)
                where = Location(f"{kubeconfig} ({kind} {ns}/{name})", 0, 0)
                found.append((item, lambda *field, at=where: at))
    except kube.ApiError as error:
        raise InputError([Diagnostic(Location(str(kubeconfig), 0, 0), "",
                                     f"reading the cluster failed: {error}")]) from None
    finally:
        api.close()
    return found


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _parse(objects: Iterable[_Obj]) -> tuple[list[Provider], list[Follower]]:
    providers: dict[tuple[str, str, str, str], Provider] = {}
    followers: list[Follower] = []
    problems: list[Diagnostic] = []
    for obj, locate in objects:
        group, kind = api_group(str(obj.get("apiVersion", ""))), obj.get("kind")
        namespace, name = _meta(obj)
        raw_spec = obj.get("spec")
        spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
        if group == PROVIDER_GROUP and kind in PROVIDER_KINDS:
            providers[(namespace, group, str(kind), name)] = Provider(str(kind), namespace, name, spec)
        elif (group, kind) == SCAP_KIND:
            try:
                parsed = ScheduledCapacitySpec.model_validate(spec)
            except ValidationError as error:
                for item in error.errors(include_url=False):
                    loc = ("spec", *(str(p) for p in item["loc"]))
                    message = str(item["msg"]).removeprefix("Value error, ")
                    problems.append(Diagnostic(locate(*loc), ".".join(loc), message))
                continue
            followers.append(Follower(
                namespace, name,
                (namespace, api_group(parsed.schedule.api_version), parsed.schedule.kind,
                 parsed.schedule.name),
                f"{parsed.target_ref.kind}/{parsed.target_ref.name}", parsed.capacity.path,
                parsed.capacity.active_value, parsed.enabled, parsed.kill_switch))
    if problems:
        raise InputError(problems)
    return sorted(providers.values(), key=lambda p: p.key), sorted(
        followers, key=lambda f: (f.namespace, f.name))


# --- the report -----------------------------------------------------------------------------------


def _state(value: bool | None) -> str:
    return {True: "active", False: "inactive", None: "unresolved"}[value]


def _local(instant: dt.datetime, zone: str) -> str:
    return instant.astimezone(ZoneInfo(zone)).isoformat()


def _utc(instant: dt.datetime) -> str:
    return instant.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def preview(providers: Sequence[Provider], followers: Sequence[Follower],
            found: Mapping[tuple[str, str, str, str], Timeline], start: dt.datetime,
            until: dt.datetime | None = None) -> dict[str, Any]:
    """The report as plain data (the JSON output; the table and the picture are drawn from it)."""
    schedules = []
    for provider in providers:
        timeline = found[provider.key]
        mine = [f for f in followers if f.schedule == provider.key]

        def writes(active: bool | None) -> list[dict[str, Any]]:
            return [{"scheduledCapacity": f"{f.namespace}/{f.name}", "target": f.target,
                     "path": f.path, "value": f.value(active)} for f in mine]

        schedules.append({
            "kind": provider.kind, "namespace": provider.namespace, "name": provider.name,
            "timezone": timeline.timezone, "problem": timeline.problem,
            "now": {"at": _utc(start), "local": _local(start, timeline.timezone),
                    "state": _state(timeline.initial), "writes": writes(timeline.initial)},
            "transitions": [{"at": _utc(when), "local": _local(when, timeline.timezone),
                             "state": _state(value), "writes": writes(value)}
                            for when, value in timeline.transitions],
            "marks": [{"kind": m.kind, "label": m.label, "start": _utc(m.start), "end": _utc(m.end),
                       "startLocal": _local(m.start, timeline.timezone),
                       "endLocal": _local(m.end, timeline.timezone)} for m in timeline.marks],
            "children": _children(provider),
        })
    unfollowed = [f"{f.namespace}/{f.name}" for f in followers
                  if f.schedule not in found]
    return {"from": _utc(start), "until": _utc(until) if until is not None else None,
            "schedules": schedules, "scheduledCapacitiesWithoutTheirSchedule": unfollowed}


def _children(provider: Provider) -> list[str]:
    """A composite's references as `Kind/name`, in spec order, once each."""
    if provider.kind != "CompositeSchedule":
        return []
    parsed = parse_spec(provider.spec)
    if isinstance(parsed, ValidationError):
        return []
    return list(dict.fromkeys(f"{ref.kind}/{ref.name}" for ref in references(parsed)
                              if ref.group == PROVIDER_GROUP))


def table(report: Mapping[str, Any]) -> str:
    lines: list[str] = [f"       {'LOCAL':22} {'UTC':20}  {'STATE':10} WRITES"]
    for schedule in report["schedules"]:
        lines.append(f"{schedule['kind']} {schedule['namespace']}/{schedule['name']} "
                     f"({schedule['timezone']})")
        if schedule["problem"]:
            lines.append(f"  unresolved: {schedule['problem']}")
        rows = [("from", schedule["now"])] + [("", t) for t in schedule["transitions"]]
        for label, row in rows:
            when = _short(row["local"])
            writes = ", ".join(
                f"{w['scheduledCapacity']} -> {w['target']} {w['path']}="
                f"{'holds' if w['value'] is None else w['value']}" for w in row["writes"])
            lines.append(f"  {label:4} {when:22} {row['at']:20}  {row['state']:10} {writes}".rstrip())
        if not schedule["transitions"]:
            lines.append("       no transition in the window")
        for mark in schedule["marks"]:
            lines.append(f"  mark {_short(mark['startLocal'])} to {_short(mark['endLocal'])}  "
                         f"{mark['label']}")
    for orphan in report["scheduledCapacitiesWithoutTheirSchedule"]:
        lines.append(f"ScheduledCapacity {orphan}: its schedule is not among the objects given")
    return "\n".join(lines) + "\n"


def _short(local: str) -> str:
    """`2026-03-27T09:30:00-04:00` as the table prints it: `2026-03-27 09:30 -04:00`."""
    return f"{local[:16].replace('T', ' ')} {local[19:]}"
