"""`fivespot schedule override NAME --on --for 3h`: hold a schedule on (or off) for a while, then
hand back to it, on a live cluster.

It writes the schedule's `spec.override` `{active, until}` (a JSON merge patch under the field
manager `fivespot-schedule-override`; `--clear` deletes it) and nothing else: the provider
publishes the override until `until` and requeues the object at exactly that instant, so the
hand-back needs neither this command nor any process of it to be running. NAME is a built-in
schedule (`tbss/office-hours`, `ManualSchedule/desk`, or a bare name found in exactly one
built-in kind) or a ScheduledCapacity (`scap/desk-pool`), whose schedule it then overrides; every
ScheduledCapacity following that schedule follows the override.

The cluster is the one kubectl would use (`--kubeconfig`, `--context`, the context's namespace
unless `-n`); the identity needs `get` and `patch` on the schedule's kind. The decisions (what
NAME names, when `--for`/`--until` end, the patch, what is printed) are pure functions here; the
shell only reads and patches.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds.providers import load_timezone, parse_until
from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP, api_group
from fivespot.api.providers import BUILTIN_PROVIDERS, ProviderKind
from fivespot.commandline import exitcodes

FIELD_MANAGER: Final = "fivespot-schedule-override"
MAX_DURATION: Final = dt.timedelta(days=366)
"""An override is temporary; a longer hold is a change of the schedule itself."""
_DURATION: Final = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_CLOCK: Final = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_UTC: Final = dt.timezone.utc
SCHEDULED_CAPACITY_NAMES: Final = frozenset(
    {scap.KIND.lower(), scap.PLURAL, *scap.SHORT_NAMES})


class Refused(ValueError):
    """Bad input or a cluster answer that stops the command: the message says what to change."""


# --- the pure part -------------------------------------------------------------------------------


def parse_duration(text: str) -> dt.timedelta:
    """`3h`, `90m`, `1h30m`, `45s`, `2d`: a positive duration of at most MAX_DURATION."""
    found = _DURATION.fullmatch(text)
    if not text or found is None:
        raise Refused(f"--for {text!r} is not a duration such as 3h, 90m, 1h30m or 2d")
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    length = dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if length <= dt.timedelta(0):
        raise Refused(f"--for {text!r} must be longer than zero")
    if length > MAX_DURATION:
        raise Refused(f"--for {text!r} is longer than {MAX_DURATION.days} days: an override is "
                      "temporary; change the schedule itself instead")
    return length


def resolve_until(now: dt.datetime, *, duration: str | None, until: str | None,
                  zone: str) -> dt.datetime:
    """When the override ends, in UTC to the second: `now` + `--for`, or `--until` (RFC 3339 with
    an offset, or HH:MM: the next time the clock in `zone`, the schedule's, shows it)."""
    if duration is not None:
        ends = now + parse_duration(duration)
    elif until is not None and _CLOCK.fullmatch(until):
        ends = _next_wall_clock(now, until, zone)
    elif until is not None:
        try:
            ends = parse_until(until)
        except ValueError:
            raise Refused(f"--until {until!r} is neither an RFC 3339 instant with its offset "
                          "(2026-03-02T21:00:00Z) nor a time of day HH:MM") from None
    else:
        raise Refused("--on and --off need --for DURATION or --until TIME")
    ends = ends.astimezone(_UTC).replace(microsecond=0)
    if ends <= now:
        raise Refused(f"--until {until!r} is not in the future (now is {_z(now)})")
    if ends - now > MAX_DURATION:
        raise Refused(f"--until {until!r} is more than {MAX_DURATION.days} days away: an override "
                      "is temporary; change the schedule itself instead")
    return ends


def _next_wall_clock(now: dt.datetime, clock: str, zone_name: str) -> dt.datetime:
    zone = load_timezone(zone_name)
    hour, minute = (int(part) for part in clock.split(":"))
    local = now.astimezone(zone)
    for days in range(3):
        wall = dt.datetime.combine(local.date() + dt.timedelta(days=days), dt.time(hour, minute))
        instant = wall.replace(tzinfo=zone).astimezone(_UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant > now:
            return instant  # (a time the clock skips shows otherwise, and is not taken)
    raise Refused(f"--until {clock} does not occur on the clock of {zone_name} in the next days")


@dataclass(frozen=True)
class Reference:
    """What NAME names: a built-in provider kind (None: look in each) or a ScheduledCapacity."""

    name: str
    provider: ProviderKind | None = None
    scheduled_capacity: bool = False


def parse_reference(text: str) -> Reference:
    """`KIND/NAME` (kind, plural, singular or short name, any case) or a bare `NAME`."""
    kind, slash, name = text.rpartition("/")
    if not name or (slash and not kind):
        raise Refused(f"{text!r} names no object: write NAME or KIND/NAME, such as "
                      "tbss/office-hours")
    if not slash:
        return Reference(name)
    wanted = kind.lower()
    if wanted in SCHEDULED_CAPACITY_NAMES:
        return Reference(name, scheduled_capacity=True)
    for provider in BUILTIN_PROVIDERS.values():
        if wanted in {provider.kind.lower(), provider.plural, provider.singular,
                      *provider.short_names}:
            return Reference(name, provider)
    known = ", ".join(sorted(p.short_names[0] for p in BUILTIN_PROVIDERS.values()))
    raise Refused(f"{kind!r} is not a built-in schedule kind ({known}) or a ScheduledCapacity "
                  "(scap); only the built-in kinds take an override")


def patch(active: bool | None, until: dt.datetime | None) -> dict[str, Any]:
    """The merge patch: `{spec: {override: {active, until}}}`, or a null override (clear)."""
    if active is None or until is None:
        return {"spec": {"override": None}}
    return {"spec": {"override": {"active": active, "until": _z(until)}}}


def _z(instant: dt.datetime) -> str:
    return instant.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(length: dt.timedelta) -> str:
    minutes = int(length.total_seconds() + 59) // 60
    days, rest = divmod(minutes, 1440)
    return " ".join(part for part in (f"{days}d" if days else "", f"{rest // 60}h" if rest >= 60 else "",
                                      f"{rest % 60}m" if rest % 60 or not minutes else "") if part)


def summary(kind: str, namespace: str, name: str, *, active: bool | None, until: dt.datetime | None,
            zone: str, now: dt.datetime, followers: Sequence[str] | None,
            previous: Mapping[str, Any] | None, via: str | None = None) -> str:
    """What the command did, for a person: the object, the override, who follows it."""
    what = f"{kind} {namespace}/{name}"
    lines = [f"{via} follows {what}" if via else ""]
    if active is None or until is None:
        had = f" (was {'on' if previous.get('active') else 'off'} until {previous.get('until')})" \
            if previous else " (there was none)"
        lines.append(f"{what}: override cleared{had}; the schedule decides again.")
    else:
        local = until.astimezone(load_timezone(zone)).strftime("%a %d %b %H:%M %Z")
        lines.append(f"{what}: held {'on' if active else 'off'} until {_z(until)} ({local}, in "
                     f"{_span(until - now)}); the provider hands back to the schedule then.")
    if followers:
        lines.append("Followed by: " + ", ".join(f"ScheduledCapacity {f}" for f in followers))
    elif followers is not None:
        lines.append("No ScheduledCapacity in the namespace follows it.")
    return "\n".join(line for line in lines if line) + "\n"


# --- the command ---------------------------------------------------------------------------------


def register(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "override", help="hold a schedule on or off for a while, then hand back (live cluster)",
        description="Write a schedule's spec.override on a live cluster: held on (--on) or off "
                    "(--off) for --for DURATION or --until TIME, after which its provider hands "
                    "back to the schedule by itself; --clear hands back now. NAME is "
                    "KIND/NAME (tbss/office-hours, cms/nyse, ms/desk, csch/desk), a bare name "
                    "found in one built-in kind, or scap/NAME for a ScheduledCapacity's schedule.")
    parser.add_argument("target", metavar="NAME", help="the schedule (or scap/NAME)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--on", dest="active", action="store_const", const=True,
                      help="hold the schedule active")
    what.add_argument("--off", dest="active", action="store_const", const=False,
                      help="hold the schedule inactive")
    what.add_argument("--clear", action="store_true", help="remove the override now")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--for", dest="duration", metavar="DURATION",
                        help="how long: 3h, 90m, 1h30m, 2d (at most 366d)")
    length.add_argument("--until", metavar="TIME",
                        help="until when: RFC 3339 with an offset, or HH:MM in the schedule's "
                        "time zone (the next such time)")
    parser.add_argument("--namespace", "-n", metavar="NS",
                        help="the namespace (default: the kubeconfig context's, else default)")
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from fivespot.runtime import kube

    try:
        if args.clear and (args.duration is not None or args.until is not None):
            raise Refused("--clear takes neither --for nor --until")
        if not args.clear and args.duration is None and args.until is None:
            raise Refused("--on and --off need --for DURATION or --until TIME")
        if args.duration is not None:
            parse_duration(args.duration)
        reference = parse_reference(args.target)
        api = kube.load_cli_client(args.kubeconfig, args.context)
        try:
            namespace = args.namespace or kube.cli_namespace(args.kubeconfig, args.context)
            sys.stdout.write(_override(api, namespace, reference, args))
        finally:
            api.close()
    except Refused as refused:
        print(f"fivespot schedule override: {refused}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except kube.ConfigError as error:
        print(f"fivespot schedule override: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except kube.ApiError as error:
        print(f"fivespot schedule override: the API server refused: {error.status} {error.reason}: "
              f"{error.message}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    return exitcodes.OK


def _override(api: Any, namespace: str, reference: Reference, args: argparse.Namespace) -> str:
    from fivespot.runtime import kube

    via = None
    if reference.scheduled_capacity:
        via = f"ScheduledCapacity {namespace}/{reference.name}"
        reference = _schedule_of(api, namespace, reference.name)
    provider, obj, path = _find(api, namespace, reference)
    raw_spec = obj.get("spec")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    zone = str(spec.get("timezone") or "UTC")
    now = dt.datetime.now(_UTC)
    until = None if args.clear else resolve_until(now, duration=args.duration, until=args.until,
                                                  zone=zone)
    active = None if args.clear else bool(args.active)
    kube.merge_patch(api, path, patch(active, until), field_manager=FIELD_MANAGER)
    previous = spec.get("override") if isinstance(spec.get("override"), Mapping) else None
    return summary(provider.kind, namespace, reference.name, active=active, until=until, zone=zone,
                   now=now, followers=_followers(api, namespace, provider.kind, reference.name),
                   previous=previous, via=via)


def _schedule_of(api: Any, namespace: str, name: str) -> Reference:
    from fivespot.runtime import kube

    try:
        found = kube.request(api, "GET", kube.resource_path(scap.GROUP, scap.VERSION, scap.PLURAL,
                                                            namespace, name))
    except kube.ApiError as error:
        if error.not_found:
            raise Refused(f"no ScheduledCapacity {name} in namespace {namespace}") from None
        raise
    schedule = (found.get("spec") or {}).get("schedule") or {}
    group, kind = api_group(str(schedule.get("apiVersion", ""))), str(schedule.get("kind", ""))
    provider = next((p for p in BUILTIN_PROVIDERS.values() if p.kind == kind), None)
    if group != PROVIDER_GROUP or provider is None:
        raise Refused(f"ScheduledCapacity {namespace}/{name} follows {kind} "
                      f"{schedule.get('name')}, not a built-in schedule kind: its own controller "
                      "decides, and only the built-in kinds take an override")
    return Reference(str(schedule.get("name")), provider)


def _find(api: Any, namespace: str, reference: Reference
          ) -> tuple[ProviderKind, dict[str, Any], str]:
    """The provider object NAME names, its kind and its path; Refused when there is not exactly
    one."""
    from fivespot.runtime import kube

    kinds = [reference.provider] if reference.provider else list(BUILTIN_PROVIDERS.values())
    found: list[tuple[ProviderKind, dict[str, Any], str]] = []
    for provider in kinds:
        resolved = kube.resolve_kind(api, provider.group, provider.kind)
        if resolved is None:
            if reference.provider is not None:
                raise Refused(f"the cluster does not serve {provider.kind} (its CRD is not installed)")
            continue
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, namespace,
                                  reference.name)
        try:
            found.append((provider, kube.request(api, "GET", path), path))
        except kube.ApiError as error:
            if not error.not_found:
                raise
    if not found:
        kind = reference.provider.kind if reference.provider else "built-in schedule"
        raise Refused(f"no {kind} {reference.name} in namespace {namespace}")
    if len(found) > 1:
        names = ", ".join(f"{p.short_names[0]}/{reference.name}" for p, _, _ in found)
        raise Refused(f"{reference.name} names {len(found)} schedules in namespace {namespace}: "
                      f"say which, {names}")
    return found[0]


def _followers(api: Any, namespace: str, kind: str, name: str) -> list[str] | None:
    """The ScheduledCapacities of the namespace that follow the schedule; None if they cannot be
    listed (the command's identity need not read them)."""
    from fivespot.runtime import kube

    try:
        listed = kube.request(api, "GET", kube.resource_path(scap.GROUP, scap.VERSION, scap.PLURAL,
                                                             namespace))
    except kube.ApiError:
        return None
    found = []
    for item in listed.get("items") or []:
        schedule = (item.get("spec") or {}).get("schedule") or {}
        if (api_group(str(schedule.get("apiVersion", ""))) == PROVIDER_GROUP
                and schedule.get("kind") == kind and schedule.get("name") == name):
            found.append(f"{namespace}/{(item.get('metadata') or {}).get('name')}")
    return sorted(found)
