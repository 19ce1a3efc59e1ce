"""Public holidays by country and subdivision, from the `holidays` library, for the schedules'
`closed.holidays`.

The library is a runtime dependency (pinned in pyproject.toml and, exactly, in the image's
`image/requirements.txt`), so the provider answers from the library version its image ships and a
library upgrade is an image upgrade, reviewed like any other. It is imported only when a spec
names a holiday calendar, so nothing else pays for it.

What the library cannot answer is refused, never guessed (docs/reference/calendars.md):
- a year outside the entity's own `start_year`..`end_year` (the library silently returns no
  holidays there, which would read as "no holiday");
- a year in which one of the calendar's holidays is only estimated (the library labels lunar and
  Islamic dates it has not confirmed "(estimated)" in the country's language): any day near the
  estimate could be the holiday, so no day of that year is answered;
- a year the library warns about while building it (India's, past 2035: "Requested Holidays are
  available only from 2001 to 2035").
Such a date raises `Unanswerable`; the provider then reports `Ready=False` and holds `active`.

Everything is cached per (country, subdivision, categories, year): a provider computes a year of
day plans for every `nextTransitionTime`, and building one country-year costs about a millisecond.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import importlib.metadata
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

LIBRARY: Final = "holidays"
DEFAULT_CATEGORIES: Final = ("public",)
ENGLISH: Final = "en_US"
"""Holiday names are given in US English where the library translates them, else in the
country's own language."""


class Unanswerable(ValueError):
    """The library cannot say which days of `year` are holidays of the calendar."""

    def __init__(self, calendar: str, year: int, why: str):
        super().__init__(f"{calendar} in {year}: {why}")
        self.calendar = calendar
        self.year = year


@dataclass(frozen=True)
class HolidayYear:
    """One calendar's holidays in one year: date -> name."""

    holidays: Mapping[dt.date, str]


def library_version() -> str:
    """The installed `holidays` version, for messages and docs."""
    try:
        return importlib.metadata.version(LIBRARY)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _library() -> Any:
    return importlib.import_module(LIBRARY)


@functools.cache
def _entities() -> Mapping[str, tuple[str, ...]]:
    """Every country code the library knows (alpha-2 and alpha-3) -> its subdivision codes."""
    return MappingProxyType({
        code: tuple(subdivisions)
        for code, subdivisions in _library().list_supported_countries(include_aliases=True).items()
    })


@functools.cache
def _entity(country: str) -> Any:
    return _library().country_holidays(country)


def label(country: str, subdivision: str | None) -> str:
    """How messages name a calendar: `GB-ENG`, `US`."""
    return country if subdivision is None else f"{country}-{subdivision}"


def check(country: str, subdivision: str | None, categories: tuple[str, ...]) -> None:
    """ValueError naming what the library does not know: the country, the subdivision (listing
    the known ones) or a category (listing the supported ones)."""
    entities = _entities()
    if country not in entities:
        raise ValueError(
            f"the holidays library {library_version()} has no country {country!r}; use an ISO "
            "3166-1 code such as US, GB or DE (holidays.list_supported_countries() lists them)")
    known = entities[country]
    if subdivision is not None and subdivision not in known:
        shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
        raise ValueError(
            f"the holidays library {library_version()} has no subdivision {subdivision!r} of "
            f"{country}" + (f"; known: {shown}" if known else "; it has no subdivisions"))
    supported = tuple(_entity(country).supported_categories)
    for category in categories:
        if category not in supported:
            raise ValueError(
                f"{country} has no holiday category {category!r} in the holidays library "
                f"{library_version()}; supported: {', '.join(supported)}")


def years_covered(country: str) -> tuple[int, int]:
    """The first and last year the library defines `country`'s holidays for."""
    entity = _entity(country)
    return int(entity.start_year), int(entity.end_year)


@functools.lru_cache(maxsize=1024)
def holiday_year(country: str, subdivision: str | None, categories: tuple[str, ...],
                 year: int) -> HolidayYear:
    """The calendar's holidays in `year`; Unanswerable when the library cannot say."""
    name = label(country, subdivision)
    first, last = years_covered(country)
    if not first <= year <= last:
        raise Unanswerable(name, year, (
            f"the holidays library {library_version()} defines {country}'s holidays only for "
            f"{first}..{last}"))
    library = _library()
    entity = _entity(country)
    language = ENGLISH if ENGLISH in tuple(entity.supported_languages) else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calendar = library.country_holidays(country, subdiv=subdivision, years=year,
                                            categories=categories, language=language)
        items = sorted(calendar.items())
    if caught:
        raise Unanswerable(name, year, (
            f"the holidays library {library_version()} warns: {caught[0].message}"))
    estimated = _estimated_pattern(calendar)
    found: dict[dt.date, str] = {}
    for day, names in items:
        for one in str(names).split("; "):
            if estimated is not None and estimated.fullmatch(one):
                raise Unanswerable(name, year, (
                    f"the holidays library {library_version()} only estimates {one!r} "
                    f"({day.isoformat()}); fivespot refuses a year with an estimated date rather "
                    "than guess"))
        found[day] = str(names)
    return HolidayYear(MappingProxyType(found))


def _estimated_pattern(calendar: Any) -> re.Pattern[str] | None:
    template = getattr(calendar, "estimated_label", None)
    if not isinstance(template, str) or "%s" not in template:
        return None
    shown = str(calendar.tr(template))
    if "%s" not in shown:
        return None
    before, _, after = shown.partition("%s")
    return re.compile(re.escape(before) + ".+" + re.escape(after))


def holiday(country: str, subdivision: str | None, categories: tuple[str, ...],
            day: dt.date) -> str | None:
    """The name of the holiday on `day`, None if it is not one; Unanswerable when the library
    cannot say."""
    return holiday_year(country, subdivision, categories, day.year).holidays.get(day)
