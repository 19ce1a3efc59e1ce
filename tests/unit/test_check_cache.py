"""`fivespot check` keeps the policies it read and the CEL it compiled between runs
(`fivespot.compiler.check.cache`): by content, private to the user, never stale, never required; and the
path of a one-object check imports none of what it does not use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
import pytest
import yaml

from fivespot.compiler.check import cache as checkcache
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.cli.main import main
from tests.unit.test_cli_check import GOOD

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"

TOO_LONG = {"drainedPath": "status.inUse", "timeout": "200h"}
"""Refused by a CRD rule's CEL (not by the schema's pattern)."""


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    write_tree(compile_repo(EXAMPLE).files, out)
    return out


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path / "cache"))
    return checkcache.folder()


def _check(capsys: pytest.CaptureFixture[str], objects: Path, out: Path, *more: str
           ) -> tuple[int, str]:
    code = main(["check", "-o", "json", "--policies", str(out), str(objects), *more])
    return code, capsys.readouterr().out


def _objects(tmp_path: Path) -> Path:
    bad = yaml.safe_load(yaml.safe_dump(GOOD))
    bad["metadata"]["name"] = "bad-timeout"
    bad["spec"]["handback"] = TOO_LONG
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all([GOOD, bad]))
    return path


def test_a_second_check_reuses_the_kept_policies_and_answers_byte_for_byte_the_same(
        out_dir: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects(tmp_path)
    uncached = _check(capsys, objects, out_dir, "--no-cache")
    assert not cache.exists()
    first = _check(capsys, objects, out_dir)
    [entry] = list(cache.iterdir())
    kept = checkcache.load(entry.name)
    assert kept is not None and kept.objects and kept.programs
    second = _check(capsys, objects, out_dir)
    assert uncached == first == second
    assert uncached[0] == 1 and "must be a duration" in uncached[1]  # the kept CEL still runs


def test_a_changed_policy_file_is_another_entry_and_the_change_is_seen(
        out_dir: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "out"
    write_tree(compile_repo(EXAMPLE).files, copy)
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump(GOOD))
    assert _check(capsys, objects, copy)[0] == 0
    crd = next(p for p in (copy / "crds").glob("*.yaml") if "scheduledcapacities" in p.name)
    crd.write_text(crd.read_text().replace("maximum: 2147483647", "maximum: 4"))
    code, out = _check(capsys, objects, copy)
    assert code == 1 and "spec.capacity.activeValue" in out
    assert len(list(cache.iterdir())) == 2


def test_the_key_covers_each_files_name_and_content_and_the_code_that_reads_them() -> None:
    one = checkcache.key([("crds/a.yaml", "kind: A\n")])
    assert one == checkcache.key([("crds/a.yaml", "kind: A\n")])
    assert one != checkcache.key([("crds/a.yaml", "kind: B\n")])
    assert one != checkcache.key([("crds/b.yaml", "kind: A\n")])
    assert one != checkcache.key([("crds/a.yaml", "kind: A\n"), ("x.yaml", "")])
    assert Path(checkcache.__file__) in checkcache._CODE
    assert any(p.name == "engine.py" for p in checkcache._CODE)


def test_an_entry_another_user_could_write_is_not_read(
        out_dir: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects(tmp_path)
    expected = _check(capsys, objects, out_dir)
    [entry] = list(cache.iterdir())
    entry.chmod(0o666)
    assert checkcache.load(entry.name) is None
    entry.chmod(0o600)
    cache.chmod(0o777)
    assert checkcache.load(entry.name) is None
    cache.chmod(0o700)
    assert checkcache.load(entry.name) is not None
    assert _check(capsys, objects, out_dir) == expected


def test_a_torn_or_foreign_entry_is_a_miss_and_is_replaced(
        out_dir: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = _objects(tmp_path)
    expected = _check(capsys, objects, out_dir)
    [entry] = list(cache.iterdir())
    entry.write_bytes(entry.read_bytes()[:100])
    assert checkcache.load(entry.name) is None
    assert _check(capsys, objects, out_dir) == expected
    assert checkcache.load(entry.name) is not None


def test_an_unwritable_cache_folder_costs_only_the_time(
        out_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(blocker / "cache"))
    objects = _objects(tmp_path)
    assert _check(capsys, objects, out_dir)[0] == 1


def test_only_the_newest_entries_are_kept(tmp_path: Path, cache: Path) -> None:
    entry = checkcache.Entry([], [])
    for index in range(checkcache.MAX_ENTRIES + 3):
        checkcache.save(f"{index:064x}", entry)
        os.utime(cache / f"{index:064x}", ns=(index * 10**9, index * 10**9))
    checkcache.save("f" * 64, entry)
    kept = sorted(p.name for p in cache.iterdir())
    assert len(kept) == checkcache.MAX_ENTRIES and f"{0:064x}" not in kept and "f" * 64 in kept


def test_a_one_object_check_imports_no_model_cost_estimate_worker_pool_metadata_dataclasses_or_inspect(
        out_dir: Path, tmp_path: Path, cache: Path) -> None:
    objects = tmp_path / "one.yaml"
    objects.write_text(yaml.safe_dump(GOOD))
    probe = (
        "import sys\n"
        "from fivespot.cli.main import main\n"
        f"code = main(['check', '--policies', {str(out_dir)!r}, {str(objects)!r}])\n"
        "loaded = [m for m in ('pydantic', 'fivespot.compiler.spec', 'fivespot.api.kinds.scheduled_capacity',\n"
        "          'fivespot.policies.cel.cost', 'multiprocessing', 'importlib.metadata', 'logging',\n"
        "          'fivespot.compiler.ownership', 'dataclasses', 'typing_extensions', 'inspect')\n"
        "          if m in sys.modules]\n"
        "print(code, loaded)\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=ROOT, env=dict(os.environ), check=True)
    assert found.stdout.strip().splitlines()[-1] == "0 []"


def test_with_a_kept_entry_a_check_of_plain_objects_never_imports_pyyaml(
        out_dir: Path, tmp_path: Path, cache: Path) -> None:
    many = []
    for index in range(1200):  # large: decided on forked workers too
        obj = yaml.safe_load(yaml.safe_dump(GOOD))
        obj["metadata"]["name"] = obj["spec"]["targetRef"]["name"] = f"pool-{index}"
        many.append(obj)
    objects = tmp_path / "many.yaml"
    objects.write_text(yaml.safe_dump_all(many))
    probe = (
        "import sys\n"
        "from fivespot.cli.main import main\n"
        f"code = main(['check', '--policies', {str(out_dir)!r}, {str(objects)!r}])\n"
        "print(code, [m for m in ('yaml', 'multiprocessing') if m in sys.modules])\n"
    )
    for run in ("first", "again"):  # the first reads the policies' CRDs with PyYAML
        found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                               cwd=ROOT, env=dict(os.environ), check=True)
    assert found.stdout.strip().splitlines()[-1] == "0 []", found.stdout + found.stderr


def test_with_a_kept_entry_only_the_kinds_checked_have_their_schema_compiled(
        out_dir: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fivespot.compiler.check.objects import load_checker
    from fivespot.policies.admission_eval import Request

    first = load_checker([out_dir])  # no entry yet: every schema compiled (and any error raised)
    assert all(kind.compiled is not None for kind in first.kinds.values())
    again = load_checker([out_dir])
    assert len(again.kinds) > 1 and all(kind.compiled is None for kind in again.kinds.values())
    verdict = again.check(Request("CREATE", yaml.safe_load(yaml.safe_dump(GOOD))))
    assert verdict == first.check(Request("CREATE", yaml.safe_load(yaml.safe_dump(GOOD))))
    assert [f"{k.api_version} {k.kind}" for k in again.kinds.values() if k.compiled is not None] == [
        f"{GOOD['apiVersion']} {GOOD['kind']}"]


def test_the_yaml_files_of_a_folder_are_read_once_each_in_path_order(tmp_path: Path) -> None:
    from fivespot.compiler.check.objects import yaml_files

    root = tmp_path / "out"
    for name in ("a/b.yaml", "a-c.yaml", "a/z/y.yml", "b.YAML", "c.yaml.txt", ".hidden/x.yaml",
                 "a/.h.yaml", "d/e.yaml", "x.y.yaml", "notes.txt"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kind: X\n")
    (root / "linked").symlink_to(root / "d", target_is_directory=True)  # read where it is
    (root / "file-link.yaml").symlink_to(root / "d" / "e.yaml")  # read anyway: not twice
    (root / "notes.yaml").symlink_to("notes.txt")  # read under the link's name
    (root / "dir.yaml").mkdir()
    assert [p.relative_to(root).as_posix() for p in yaml_files(root)] == [
        "a/b.yaml", "a/z/y.yml", "a-c.yaml", "d/e.yaml", "notes.yaml", "x.y.yaml"]