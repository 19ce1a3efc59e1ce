"""msgspec imported without typing_extensions at the command's start (`fivespot.commandline.leanimports`):
msgspec works as before, and typing_extensions is still there for whoever imports it next."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _run(probe: str) -> str:
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, check=True).stdout.strip()


def test_the_command_imports_msgspec_with_typings_helpers_and_not_typing_extensions() -> None:
    probe = (
        "import sys, typing\n"
        "import fivespot\n"
        "import msgspec, msgspec._utils as utils\n"
        "print('typing_extensions' in sys.modules, 'inspect' in sys.modules,\n"
        "      utils._get_type_hints is typing.get_type_hints)\n"
    )
    assert _run(probe) == "False False True"


def test_msgspec_still_decodes_typed_values_and_typing_extensions_imports_afterwards() -> None:
    probe = (
        "import fivespot\n"
        "import typing, msgspec\n"
        "class Point(msgspec.Struct):\n"
        "    x: int\n"
        "    label: typing.Annotated[str, msgspec.Meta(max_length=3)] = 'a'\n"
        "class Shape(typing.TypedDict):\n"
        "    corners: int\n"
        "    name: typing.NotRequired[str]\n"
        "print(msgspec.json.decode(b'{\"x\": 1, \"label\": \"abc\"}', type=Point),\n"
        "      msgspec.convert({'corners': 4}, Shape))\n"
        "try:\n"
        "    msgspec.json.decode(b'{\"x\": 1, \"label\": \"abcd\"}', type=Point)\n"
        "except msgspec.ValidationError as error:\n"
        "    print(error)\n"
        "import typing_extensions\n"
        "print(typing_extensions.__name__)\n"
    )
    assert _run(probe).splitlines() == [
        "Point(x=1, label='abc') {'corners': 4}",
        "Expected `str` of length <= 3 - at `$.label`",
        "typing_extensions",
    ]


def test_when_msgspec_is_already_imported_nothing_changes() -> None:
    probe = (
        "import sys, typing_extensions, msgspec\n"
        "from fivespot.commandline.leanimports import import_msgspec\n"
        "import_msgspec()\n"
        "print(sys.modules['typing_extensions'] is typing_extensions)\n"
    )
    assert _run(probe) == "True"
