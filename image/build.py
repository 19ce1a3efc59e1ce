"""Build the fivespot container image without a container engine or a registry.

Why this way: the compiled Deployments need an image whose entrypoint is `fivespot`, that runs as
UID 65532 on a read-only root filesystem, and that holds nothing but what the processes run (no
shell, no package manager, no compiler). A machine without a Docker engine must still build it,
reproducibly. So the image is assembled from files, not from a running container:

1. **debian** layer: the files of the Debian bookworm packages in `debian-packages.txt` (a Python
   3.11 interpreter and the libraries it and the wheels link against), fetched with `apt-get
   download`, checked against the mirror's SHA256, unpacked with `dpkg-deb` and pruned (docs,
   locales, the standard-library modules whose libraries are not shipped). Package records go to
   `/var/lib/dpkg/status.d/` (the distroless convention) so image scanners see what is inside.
2. **python** layer: the wheels pinned with hashes in `requirements.txt`, installed by pip
   (`--only-binary`, `--require-hashes`, for cp311 manylinux) into `/usr/local/lib/python3.11`.
3. **fivespot** layer: this project's packages and the `/usr/local/bin/fivespot` entrypoint,
   from fivespot's wheel, built by the setuptools `build-requirements.txt` pins by hash, in a venv
   holding nothing else (no build isolation: that would fetch an unpinned backend and run it).

Bytecode is compiled by the image's own interpreter (run chrooted in the tree; hash-based,
unchecked `.pyc`, `PYTHONHASHSEED=0`), since a read-only root filesystem cannot cache it at run
time. Every ELF file is checked with the image's dynamic loader, and every fivespot module is
imported in the tree, before anything is packed. Each layer is written as a tar with sorted
entries, numeric owners and modification times clamped to that layer's SOURCE_DATE_EPOCH (the
commit time of the last change to the layer's inputs), so the same inputs give the same digest.
`umoci` (Debian's OCI image tool) turns the layers into an OCI image layout and `skopeo` copies it
into the docker-archive that `kind load image-archive`, `docker load` and `podman load` take.
Beside them `build` writes the image's CycloneDX SBOM and its in-toto SLSA provenance
(`supply_chain.py`), and `inputs.txt`: every input with the digest the build checked.

The `Containerfile` at the top of the repo runs the same `rootfs` command in a Debian build stage,
so users with Docker or Podman get the same files; its final stage declares the same config
(`IMAGE_CONFIG` below; a test keeps the two in step).

    python image/build.py build [--out build/image]   # what `make image` runs
    python image/build.py rootfs DIR                   # the Containerfile's build stage
    python image/build.py lock                         # re-pin requirements.txt and
                                                       # build-requirements.txt from pyproject.toml
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.metadata
import io
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Iterable, Iterator

HERE: Final = Path(__file__).resolve().parent
REPO: Final = HERE.parent
PACKAGE_LIST: Final = HERE / "debian-packages.txt"
REQUIREMENTS: Final = HERE / "requirements.txt"
BUILD_REQUIREMENTS: Final = HERE / "build-requirements.txt"
"""The build backend pyproject.toml's [build-system] names, pinned with hashes: fivespot's wheel is
built in a venv holding exactly these (no build isolation fetching whatever the index serves)."""
SBOM: Final = "sbom.cdx.json"
PROVENANCE: Final = "provenance.intoto.json"

IMAGE_NAME: Final = "ghcr.io/finos/fivespot"
USER_ID: Final = 65532
USER_NAME: Final = "nonroot"
HOME: Final = f"/home/{USER_NAME}"
PYTHON: Final = "/usr/bin/python3.11"
SITE: Final = "usr/local/lib/python3.11/dist-packages"
ENTRYPOINT: Final = "/usr/local/bin/fivespot"



@dataclass(frozen=True)
class ImageConfig:
    """The image config, as the Containerfile's final stage also declares it."""

    user: str
    entrypoint: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    workingdir: str


IMAGE_CONFIG: Final = ImageConfig(
    user=f"{USER_ID}:{USER_ID}",
    entrypoint=(ENTRYPOINT,),
    env=(("PATH", "/usr/local/bin:/usr/bin"), ("HOME", HOME)),
    workingdir=HOME,
)

PYTHON_TAGS: Final = ("--python-version", "3.11", "--implementation", "cp", "--abi", "cp311")
GLIBC_MINOR: Final = 36
"""bookworm's glibc; wheels for this or any older manylinux glibc run on it."""
DISTRO: Final = "debian-12"
"""The Debian release the packages come from, as package URLs name it (`distro=debian-12`)."""
PLATFORM: Final = "linux/amd64"

PRUNED_PREFIXES: Final = (
    "usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/lintian/",
    "usr/share/locale/", "usr/share/bug/", "usr/share/gdb/", "usr/share/binfmts/",
    "usr/share/pixmaps/", "usr/share/applications/", "usr/share/doc-base/", "usr/share/menu/",
    "usr/lib/x86_64-linux-gnu/gconv/",  # iconv modules; nothing here converts charsets via iconv
)
STDLIB: Final = "usr/lib/python3.11/"
PRUNED_STDLIB: Final = (
    # modules that need a library this image does not ship, or that only serve people at a prompt
    "sqlite3/", "curses/", "dbm/", "lib2to3/", "tkinter/", "turtledemo/", "idlelib/",
    "pydoc_data/", "ensurepip/", "venv/",
    "lib-dynload/_sqlite3.", "lib-dynload/_dbm.", "lib-dynload/_gdbm.", "lib-dynload/readline.",
    "lib-dynload/_curses.", "lib-dynload/_curses_panel.", "lib-dynload/nis.",
    "lib-dynload/_crypt.", "lib-dynload/_tkinter.",
)
PRUNED_SITE: Final = ("kubernetes/aio",)
"""The kubernetes client's asyncio twin (41 MB of source): nothing in fivespot imports it, and the
smoke test imports every fivespot module with it gone."""
MERGED_USR: Final = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}


class BuildError(Exception):
    """A build step failed; the message says which and what to do."""


def log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        capture: bool = False) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, check=True, text=True,
                              stdout=subprocess.PIPE if capture else None,
                              stderr=subprocess.PIPE if capture else None)
    except FileNotFoundError as error:
        raise BuildError(f"{argv[0]} is not installed ({error.strerror}); {_install_hint(argv[0])}")
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or "").strip()
        raise BuildError(f"{' '.join(argv[:3])} ... failed (exit {error.returncode})"
                         + (f": {detail[-2000:]}" if detail else ""))
    return done.stdout or ""


def _install_hint(tool: str) -> str:
    package = {"umoci": "umoci", "skopeo": "skopeo", "apt-get": "apt", "apt-cache": "apt",
               "dpkg-deb": "dpkg", "chroot": "coreutils"}.get(tool, tool)
    return f"install it with `apt-get install {package}`"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- the inputs ------------------------------------------------------------------------------


def package_names() -> list[str]:
    names = []
    for line in PACKAGE_LIST.read_text().splitlines():
        if name := line.split("#", 1)[0].strip():
            names.append(name)
    return names


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    architecture: str
    filename: str
    sha256: str
    source: str
    """The source package it is built from (`glibc` for libc6): scanners match advisories by it."""

    @property
    def file_name(self) -> str:
        return Path(self.filename).name


def resolve_packages(names: list[str]) -> list[DebianPackage]:
    """The candidate version of each package on the configured mirror, with its checksum."""
    try:
        text = run(["apt-cache", "show", "--no-all-versions", *names], capture=True)
    except BuildError as error:
        raise BuildError(f"apt does not know every package of {PACKAGE_LIST.name} ({error}); run "
                         "`apt-get update` first (a Debian bookworm mirror must be configured)")
    stanzas: dict[str, dict[str, str]] = {}
    for stanza in text.split("\n\n"):
        fields = _control_fields(stanza)
        if "Package" in fields:
            stanzas.setdefault(fields["Package"], fields)
    return [DebianPackage(name, stanzas[name]["Version"], stanzas[name]["Architecture"],
                          stanzas[name]["Filename"], stanzas[name]["SHA256"],
                          source_package(stanzas[name])) for name in names]


def source_package(fields: dict[str, str]) -> str:
    """`Source: glibc` or `Source: glibc (2.36-9)`; absent when it is the binary package's name."""
    return fields.get("Source", fields["Package"]).split(" ", 1)[0]


@dataclass(frozen=True)
class PinnedWheel:
    """One `name==version --hash=sha256:...` line of a hash-pinned requirements file."""

    name: str
    version: str
    sha256: str


def read_pins(path: Path) -> list[PinnedWheel]:
    """The pins of a requirements file `lock` writes: exactly one version and one SHA256 each."""
    pins = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        requirement, _, digest = text.partition(" --hash=sha256:")
        name, _, version = requirement.partition("==")
        if not (name and version and len(digest) == 64 and " " not in digest):
            shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            raise BuildError(f"{shown}:{number}: expected `name==version "
                             f"--hash=sha256:<64 hex digits>`, got {line!r}")
        pins.append(PinnedWheel(name.strip(), version.strip(), digest))
    return pins


def _control_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.strip("\n").splitlines():
        if line and not line[0].isspace() and ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


def fetch_packages(packages: list[DebianPackage], cache: Path) -> dict[str, Path]:
    """Each package's .deb from the cache, downloading (and checking) what is missing."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = {}
    for package in packages:
        path = cache / package.file_name
        if not path.exists() or sha256_file(path) != package.sha256:
            log(f"downloading {package.name} {package.version}")
            with tempfile.TemporaryDirectory(dir=cache) as scratch:
                run(["apt-get", "download", "-q", f"{package.name}={package.version}"],
                    cwd=Path(scratch), capture=True)
                downloaded = next(Path(scratch).glob("*.deb"))
                if sha256_file(downloaded) != package.sha256:
                    raise BuildError(f"{downloaded.name}: SHA256 differs from the mirror's index")
                downloaded.replace(path)
        paths[package.name] = path
    return paths


def source_date_epoch(*paths: str) -> int:
    """SOURCE_DATE_EPOCH if set, else the commit time of the last change to `paths`."""
    if value := os.environ.get("SOURCE_DATE_EPOCH"):
        return int(value)
    try:
        text = run(["git", "-C", str(REPO), "log", "-1", "--format=%ct", "--", *paths],
                   capture=True).strip()
    except BuildError:
        text = ""
    return int(text) if text else 0


def git_revision() -> str:
    try:
        revision = run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture=True).strip()
        dirty = run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                    capture=True).strip()
    except BuildError:
        return "unknown"
    return f"{revision}-dirty" if dirty else revision


def project() -> dict[str, object]:
    with (REPO / "pyproject.toml").open("rb") as stream:
        data: dict[str, object] = tomllib.load(stream)
    return data


def project_version() -> str:
    section = project()["project"]
    assert isinstance(section, dict)
    return str(section["version"])


def project_source() -> str:
    section = project()["project"]
    assert isinstance(section, dict)
    urls = section.get("urls", {})
    assert isinstance(urls, dict)
    return str(urls.get("Source", ""))


def console_script() -> tuple[str, str]:
    """(module, function) of the `fivespot` command, from pyproject.toml's [project.scripts]:
    the image's entrypoint runs exactly what `pip install` makes `fivespot` run."""
    section = project()["project"]
    assert isinstance(section, dict)
    module, _, function = str(section["scripts"]["fivespot"]).partition(":")
    return module, function


def top_level_packages() -> list[str]:
    """The project's import packages, from the one list setuptools packages (pyproject.toml)."""
    tool = project()["tool"]
    assert isinstance(tool, dict)
    patterns = tool["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in patterns})


# --- the root filesystem ---------------------------------------------------------------------


def canonical(member: str) -> str | None:
    """The merged-/usr path of a package member, or None when the image leaves it out."""
    path = member.removeprefix("./").rstrip("/")
    if not path:
        return None
    top, _, rest = path.partition("/")
    if top in MERGED_USR:
        path = f"{MERGED_USR[top]}/{rest}" if rest else MERGED_USR[top]
    probe = path + "/"
    if any(probe.startswith(p) or path.startswith(p) for p in PRUNED_PREFIXES):
        return None
    if path.startswith(STDLIB):
        inner = path.removeprefix(STDLIB)
        if any(inner.startswith(p) or (inner + "/").startswith(p) for p in PRUNED_STDLIB):
            return None
    return path


def extract_package(deb: Path, root: Path) -> None:
    """Unpack a package's files under `root`, never through a symlink and never outside it."""
    tar_bytes = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True,
                               stdout=subprocess.PIPE).stdout
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as archive:
        for member in archive.getmembers():
            path = canonical(member.name)
            if path is not None:
                _extract_member(archive, member, path, root, deb.name)


def _extract_member(archive: tarfile.TarFile, member: tarfile.TarInfo, path: str, root: Path,
                    origin: str) -> None:
    parts = Path(path).parts
    if ".." in parts or Path(path).is_absolute():
        raise BuildError(f"{origin}: member {member.name} leaves the tree")
    for depth in range(1, len(parts)):
        parent = root.joinpath(*parts[:depth])
        if parent.is_symlink():
            raise BuildError(f"{origin}: {member.name} would be written through the symlink "
                             f"{parent.relative_to(root)}")
        parent.mkdir(exist_ok=True)
    target = root / path
    if member.isdir():
        target.mkdir(exist_ok=True)
    elif member.isreg():
        target.unlink(missing_ok=True)
        source = archive.extractfile(member)
        assert source is not None
        with source, target.open("wb") as stream:
            shutil.copyfileobj(source, stream)
    elif member.issym():
        target.unlink(missing_ok=True)
        target.symlink_to(member.linkname)
    elif member.islnk():
        linked = canonical(member.linkname)
        if linked is None:
            raise BuildError(f"{origin}: hard link {path} to the pruned {member.linkname}")
        target.unlink(missing_ok=True)
        os.link(root / linked, target)
    else:
        raise BuildError(f"{origin}: {member.name} is neither a file, a folder nor a link")
    os.lchown(target, member.uid, member.gid)
    if not member.issym():
        target.chmod(stat.S_IMODE(member.mode))
    os.utime(target, (member.mtime, member.mtime), follow_symlinks=False)


def write_dpkg_record(deb: Path, package: DebianPackage, root: Path) -> None:
    control = subprocess.run(["dpkg-deb", "--field", str(deb)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
    records = root / "var/lib/dpkg/status.d"
    records.mkdir(parents=True, exist_ok=True)
    (records / package.name).write_text(control)


def write_base_files(root: Path) -> None:
    for link, target in MERGED_USR.items():
        (root / target).mkdir(parents=True, exist_ok=True)
        if not (root / link).is_symlink():
            (root / link).symlink_to(target)
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/sbin/nologin\n"
                                f"{USER_NAME}:x:{USER_ID}:{USER_ID}:{USER_NAME}:{HOME}:/sbin/nologin\n")
    (etc / "group").write_text(f"root:x:0:\n{USER_NAME}:x:{USER_ID}:\n")
    for path, mode in (("tmp", 0o1777), ("etc/fivespot", 0o755), ("var/run/fivespot", 0o755),
                       ("root", 0o700)):
        (root / path).mkdir(parents=True, exist_ok=True)
        (root / path).chmod(mode)
    home = root / HOME.lstrip("/")
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o750)
    os.chown(home, USER_ID, USER_ID)


def in_root(root: Path, argv: list[str], capture: bool = True) -> str:
    """Run a program of the image inside the tree (chroot), with a fixed, minimal environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin", "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8",
           "HOME": "/root"}
    chroot = shutil.which("chroot") or shutil.which("chroot", path="/usr/sbin:/sbin") or "chroot"
    return run([chroot, str(root), *argv], env=env, capture=capture)


def compile_bytecode(root: Path, directories: Iterable[str]) -> None:
    targets = [f"/{d}" for d in directories]
    in_root(root, [PYTHON, "-s", "-m", "compileall", "-q", "-f",
                   "--invalidation-mode", "unchecked-hash", *targets])


def check_libraries(root: Path) -> None:
    """Every ELF file finds each library it needs, in the image itself."""
    loader = "/usr/lib64/ld-linux-x86-64.so.2"
    missing = []
    for path in sorted(elf_files(root)):
        listing = in_root(root, [loader, "--list", f"/{path}"])
        missing += [f"/{path}: {line.strip()}" for line in listing.splitlines() if "not found" in line]
    if missing:
        raise BuildError("libraries missing from the image (add their Debian packages to "
                         "image/debian-packages.txt, or prune the module):\n  " + "\n  ".join(missing))


def elf_files(root: Path) -> Iterator[str]:
    for path in walk(root):
        full = root / path
        if full.is_file() and not full.is_symlink() and full.stat().st_size > 4:
            with full.open("rb") as stream:
                if stream.read(4) == b"\x7fELF":
                    yield path


def walk(root: Path) -> Iterator[str]:
    """Every path under root (relative, '/'-separated), directories before their contents."""
    for directory, subdirs, files in os.walk(root):
        subdirs.sort()
        base = Path(directory).relative_to(root)
        for name in sorted([*subdirs, *files]):
            yield (base / name).as_posix()


def clamp_times(root: Path, paths: Iterable[str], epoch: int) -> None:
    for path in paths:
        full = root / path
        info = full.lstat()
        if info.st_mtime > epoch:
            os.utime(full, (epoch, epoch), follow_symlinks=False)


# --- the three layers ------------------------------------------------------------------------


@dataclass
class Layer:
    name: str
    comment: str
    epoch: int
    paths: list[str] = field(default_factory=list)


def build_debian(root: Path, cache: Path) -> tuple[Layer, list[DebianPackage]]:
    packages = resolve_packages(package_names())
    debs = fetch_packages(packages, cache / "debs")
    log(f"unpacking {len(packages)} Debian packages")
    write_base_files(root)
    for package in sorted(packages, key=lambda p: p.name):
        extract_package(debs[package.name], root)
        write_dpkg_record(debs[package.name], package, root)
    compile_bytecode(root, ["usr/lib/python3.11"])
    epoch = source_date_epoch("image/debian-packages.txt", "image/build.py")
    return Layer("debian", "Debian bookworm: " + ", ".join(
        f"{p.name} {p.version}" for p in packages), epoch), packages


def pip_install(target: Path, arguments: list[str]) -> None:
    platforms = [a for minor in range(GLIBC_MINOR, 16, -1)
                 for a in ("--platform", f"manylinux_2_{minor}_x86_64")]
    platforms += ["--platform", "manylinux2014_x86_64"]
    run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-compile", "--only-binary=:all:", *platforms, *PYTHON_TAGS,
         "--target", str(target), *arguments])
    # Console scripts name the interpreter pip ran under; the entrypoint is ours. Their RECORD
    # lines go too, so RECORD lists what is installed, whichever Python built the tree.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for record in target.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(line for line in lines if not line.startswith("../")))


def build_python(root: Path) -> Layer:
    log("installing the pinned wheels")
    site = root / SITE
    site.mkdir(parents=True, exist_ok=True)
    pip_install(site, ["--require-hashes", "-r", str(REQUIREMENTS)])
    for path in PRUNED_SITE:
        shutil.rmtree(site / path)
    compile_bytecode(root, [SITE])
    epoch = source_date_epoch("image/requirements.txt", "image/build.py")
    return Layer("python", "Python packages pinned in image/requirements.txt", epoch)


def copy_sources(destination: Path) -> None:
    """What the wheel is built from: pyproject.toml, README.md and the package folders."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, destination / name)
    for package in top_level_packages():
        shutil.copytree(REPO / package, destination / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


@dataclass(frozen=True)
class BuiltWheel:
    """fivespot's own wheel as the build made it (its bytes are reproducible)."""

    file_name: str
    sha256: str


def build_wheel(sources: Path, wheels: Path, epoch: int,
                backend: Path = BUILD_REQUIREMENTS) -> BuiltWheel:
    """Build fivespot's wheel with the hash-pinned backend, in a venv that holds nothing else.

    pip's default build isolation would install [build-system] requires from the index, unpinned
    and unchecked, and run it; here the backend is `backend`'s pins, installed by hash into a
    fresh venv (no pip, no setuptools of its own: pip runs it from outside with `--python`), and
    pip checks that it satisfies pyproject.toml's requires. SOURCE_DATE_EPOCH fixes the zip times.
    """
    env_dir = wheels.parent / "build-env"
    run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    pip = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "--quiet",
           "--disable-pip-version-check"]
    run([*pip, "install", "--no-deps", "--only-binary=:all:", "--require-hashes", "-r",
         str(backend)], capture=True)
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--check-build-dependencies",
         "--wheel-dir", str(wheels), str(sources)],
        env=dict(os.environ, SOURCE_DATE_EPOCH=str(epoch)), capture=True)
    (wheel,) = wheels.glob("*.whl")
    return BuiltWheel(wheel.name, sha256_file(wheel))


def build_fivespot(root: Path, version: str) -> tuple[Layer, BuiltWheel]:
    log("installing fivespot")
    site = root / SITE
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory() as scratch:
        sources, wheels = Path(scratch) / "src", Path(scratch) / "wheels"
        sources.mkdir()
        copy_sources(sources)
        wheel = build_wheel(sources, wheels, epoch)
        # From an index folder, not by path: a path would be recorded in direct_url.json.
        pip_install(site, ["--no-index", "--find-links", str(wheels), f"fivespot=={version}"])
    entrypoint = root / ENTRYPOINT.lstrip("/")
    entrypoint.parent.mkdir(parents=True, exist_ok=True)
    module, function = console_script()
    entrypoint.write_text(f"#!{PYTHON} -I\nimport sys\n\nfrom {module} import {function}\n\n"
                          f"sys.exit({function}())\n")
    entrypoint.chmod(0o755)
    compile_bytecode(root, [f"{SITE}/{p}" for p in top_level_packages()])
    return Layer("fivespot", f"fivespot {version}", epoch), wheel


def smoke_test(root: Path) -> None:
    """Import every fivespot module with the image's interpreter, then run the entrypoint."""
    script = ("import importlib, pkgutil, sys\n"
              f"for top in {top_level_packages()!r}:\n"
              "    package = importlib.import_module(top)\n"
              "    for info in pkgutil.walk_packages(package.__path__, top + '.'):\n"
              "        if not info.name.endswith('.__main__'):\n"
              "            importlib.import_module(info.name)\n")
    in_root(root, [PYTHON, "-I", "-c", script])
    in_root(root, [ENTRYPOINT, "--help"])


@dataclass(frozen=True)
class Rootfs:
    """What `build_rootfs` assembled: the layers' paths and what they were made from."""

    layers: list[Layer]
    packages: list[DebianPackage]
    wheel: BuiltWheel


def build_rootfs(root: Path, cache: Path) -> Rootfs:
    """The image's files in `root`, which paths each layer adds, and the inputs it used."""
    if root.exists() and any(root.iterdir()):
        raise BuildError(f"{root} is not empty")
    root.mkdir(parents=True, exist_ok=True)
    layers: list[Layer] = []
    seen: set[str] = set()

    def record(layer: Layer) -> None:
        layer.paths = [p for p in walk(root) if p not in seen]
        seen.update(layer.paths)
        clamp_times(root, layer.paths, layer.epoch)
        layers.append(layer)

    debian, packages = build_debian(root, cache)
    record(debian)
    record(build_python(root))
    fivespot, wheel = build_fivespot(root, project_version())
    record(fivespot)
    check_libraries(root)
    smoke_test(root)
    for stray in [p for p in walk(root) if p not in seen]:  # written by the checks: none expected
        raise BuildError(f"the checks wrote {stray} into the image")
    return Rootfs(layers, packages, wheel)


def write_layer(root: Path, layer: Layer, out: Path) -> None:
    """An uncompressed tar of the layer's paths: sorted, numeric owners, no user/group names."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as archive:
        for path in layer.paths:
            info = archive.gettarinfo(root / path, arcname=path)
            info.uname = info.gname = ""
            info.mtime = min(int(info.mtime), layer.epoch)
            if info.isreg():
                with (root / path).open("rb") as stream:
                    archive.addfile(info, stream)
            else:
                archive.addfile(info)


# --- the image -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    layout: Path
    archive: Path
    reference: str
    digest: str
    size: int


def iso(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def oci_annotations(version: str, revision: str, created: int) -> dict[str, str]:
    found = {
        "org.opencontainers.image.title": "fivespot",
        "org.opencontainers.image.description": "fivespot compiler, admission webhook and controllers",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.created": iso(created),
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.base.name": "debian:bookworm (packages unpacked, not a base image)",
    }
    if source := project_source():
        found["org.opencontainers.image.source"] = source
    return found


def pack(root: Path, layers: list[Layer], out: Path, version: str, revision: str) -> Built:
    layout = out / "oci"
    shutil.rmtree(layout, ignore_errors=True)
    tag = version
    image = f"{layout}:{tag}"
    run(["umoci", "init", "--layout", str(layout)], capture=True)
    run(["umoci", "new", "--image", image], capture=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        for layer in layers:
            tar = Path(scratch) / f"{layer.name}.tar"
            write_layer(root, layer, tar)
            log(f"layer {layer.name}: {len(layer.paths)} paths, {tar.stat().st_size // 2**20} MiB")
            run(["umoci", "raw", "add-layer", "--image", image,
                 "--history.created", iso(layer.epoch), "--history.comment", layer.comment,
                 "--history.created_by", f"image/build.py ({layer.name} layer)", str(tar)],
                capture=True)
    created = max(layer.epoch for layer in layers)
    labels = oci_annotations(version, revision, created)
    os_name, architecture = PLATFORM.split("/")
    config = ["--no-history", "--created", iso(created), "--author", "fivespot",
              "--architecture", architecture, "--os", os_name,
              "--config.user", IMAGE_CONFIG.user, "--config.workingdir", IMAGE_CONFIG.workingdir]
    for entry in IMAGE_CONFIG.entrypoint:
        config += ["--config.entrypoint", entry]
    for key, value in IMAGE_CONFIG.env:
        config += ["--config.env", f"{key}={value}"]
    for key, value in labels.items():
        config += ["--config.label", f"{key}={value}", "--manifest.annotation", f"{key}={value}"]
    run(["umoci", "config", "--image", image, *config], capture=True)
    run(["umoci", "gc", "--layout", str(layout)], capture=True)
    reference = f"{IMAGE_NAME}:{version}"
    archive = out / f"fivespot-{version}.docker.tar"
    archive.unlink(missing_ok=True)
    run(["skopeo", "copy", "--quiet", f"oci:{image}", f"docker-archive:{archive}:{reference}"],
        capture=True)
    digest, size = manifest_digest(layout, tag)
    return Built(layout, archive, reference, digest, size)


def manifest_digest(layout: Path, tag: str) -> tuple[str, int]:
    """The manifest digest of `tag` and the image's size (config and compressed layers)."""
    index = json.loads((layout / "index.json").read_text())
    entry = next(m for m in index["manifests"]
                 if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
    digest = entry["digest"]
    manifest = json.loads((layout / "blobs" / "sha256" / digest.split(":")[1]).read_text())
    size = manifest["config"]["size"] + sum(layer["size"] for layer in manifest["layers"])
    return digest, size


def write_inputs(out: Path, built: Built, rootfs: Rootfs, revision: str, key: str) -> None:
    """inputs.txt: what the image was made from, each input with the digest the build checked."""
    lines = [f"key {key}", f"image {built.reference}", f"digest {built.digest}",
             f"revision {revision}", f"requirements sha256 {sha256_file(REQUIREMENTS)}",
             f"build-requirements sha256 {sha256_file(BUILD_REQUIREMENTS)}"]
    lines += [f"deb {p.name} {p.version} {p.architecture} sha256:{p.sha256}"
              for p in rootfs.packages]
    lines += [f"wheel {w.name} {w.version} sha256:{w.sha256}" for w in read_pins(REQUIREMENTS)]
    lines += [f"build-backend {w.name} {w.version} sha256:{w.sha256}"
              for w in read_pins(BUILD_REQUIREMENTS)]
    lines += [f"fivespot-wheel {rootfs.wheel.file_name} sha256:{rootfs.wheel.sha256}"]
    for name in (SBOM, PROVENANCE):
        lines.append(f"{name} sha256:{sha256_file(out / name)}")
    (out / "inputs.txt").write_text("\n".join(lines) + "\n")


def tool_versions() -> dict[str, str]:
    """The versions of the programs that made the image, for the provenance's builder."""
    found = {"python": platform.python_version(), "pip": importlib.metadata.version("pip")}
    for tool in ("umoci", "skopeo"):
        found[tool] = run([tool, "--version"], capture=True).strip().rsplit(" ", 1)[-1]
    return found


def write_documents(out: Path, built: Built, rootfs: Rootfs, revision: str) -> None:
    """The SBOM and the provenance statement, next to the image (image/supply_chain.py)."""
    try:
        import supply_chain
    except ImportError as error:
        raise BuildError(f"the SBOM needs pyproject.toml's `image` extra ({error}): "
                         "`pip install -e '.[image]'` (`make install` does)")
    project_section = project()["project"]
    assert isinstance(project_section, dict)
    epoch = max(layer.epoch for layer in rootfs.layers)
    inputs = supply_chain.Inputs(
        image=supply_chain.Image(
            repository=IMAGE_NAME, tag=built.reference.rsplit(":", 1)[1],
            manifest_digest=built.digest, archive_name=built.archive.name,
            archive_sha256=sha256_file(built.archive), created=epoch, platform=PLATFORM),
        source=supply_chain.Source(repository=project_source(), revision=revision,
                                   version=project_version(),
                                   license=str(project_section["license"])),
        distro=DISTRO, debian=rootfs.packages, wheels=read_pins(REQUIREMENTS),
        build_backend=read_pins(BUILD_REQUIREMENTS), fivespot_wheel=rootfs.wheel,
        tools=tool_versions())
    try:
        sbom = supply_chain.sbom(inputs)
    except ValueError as error:
        raise BuildError(str(error))
    (out / SBOM).write_bytes(sbom)
    (out / PROVENANCE).write_bytes(
        supply_chain.provenance(inputs, SBOM, hashlib.sha256(sbom).hexdigest()))


def cache_root() -> Path:
    base = Path(os.environ.get("FIVESPOT_CACHE_DIR", Path.home() / ".cache" / "fivespot"))
    return base / "image"


def input_key(packages: list[DebianPackage], revision: str) -> str:
    """A digest of everything the image is made from, to reuse an earlier build of it."""
    digest = hashlib.sha256()
    files = [HERE / "build.py", HERE / "supply_chain.py", PACKAGE_LIST, REQUIREMENTS,
             BUILD_REQUIREMENTS, REPO / "pyproject.toml", REPO / "README.md"]
    for package in top_level_packages():
        files += sorted(p for p in (REPO / package).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        digest.update(f"{path.relative_to(REPO)}\0".encode() + path.read_bytes() + b"\0")
    for deb in packages:
        digest.update(f"{deb.name} {deb.version} {deb.sha256}\n".encode())
    epochs = [source_date_epoch(), source_date_epoch("image/debian-packages.txt", "image/build.py"),
              source_date_epoch("image/requirements.txt", "image/build.py")]
    digest.update(f"{revision} {epochs}".encode())
    return digest.hexdigest()


def previous_build(out: Path, key: str) -> Built | None:
    inputs = out / "inputs.txt"
    if not inputs.exists():
        return None
    fields = dict(line.split(" ", 1) for line in inputs.read_text().splitlines() if " " in line)
    version = project_version()
    archive = out / f"fivespot-{version}.docker.tar"
    needed = [archive, out / "oci" / "index.json", out / SBOM, out / PROVENANCE]
    if fields.get("key") != key or not all(path.exists() for path in needed):
        return None
    digest, size = manifest_digest(out / "oci", version)
    return Built(out / "oci", archive, f"{IMAGE_NAME}:{version}", digest, size)


def build(out: Path, *, reuse: bool = False) -> Built:
    out.mkdir(parents=True, exist_ok=True)
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    version, revision = project_version(), git_revision()
    packages = resolve_packages(package_names())
    key = input_key(packages, revision)
    if reuse and (built := previous_build(out, key)) is not None:
        log(f"reusing the build in {out} (same inputs)")
        return built
    for stale in ("inputs.txt", SBOM, PROVENANCE):
        (out / stale).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="work-") as scratch:
        root = Path(scratch) / "rootfs"
        rootfs = build_rootfs(root, cache)
        built = pack(root, rootfs.layers, out, version, revision)
    write_documents(out, built, rootfs, revision)
    write_inputs(out, built, rootfs, revision, key)
    return built


# --- the lock ----------------------------------------------------------------------------------


def lock() -> None:
    """Pin the runtime dependencies pyproject.toml allows, as the image installs them, and the
    build backend its [build-system] names, as the wheel build installs it."""
    platforms = [a for minor in range(GLIBC_MINOR, 16, -1)
                 for a in ("--platform", f"manylinux_2_{minor}_x86_64")]
    with tempfile.TemporaryDirectory() as scratch:
        sources = Path(scratch) / "src"
        sources.mkdir()
        copy_sources(sources)
        runtime = resolve([*platforms, "--platform", "manylinux2014_x86_64", *PYTHON_TAGS,
                           "--target", str(Path(scratch) / "target"), str(sources)])
    write_pins(REQUIREMENTS, [w for w in runtime if w.name != "fivespot"], [
        "The wheels the image installs: every runtime dependency of pyproject.toml, pinned",
        "with its hash for CPython 3.11 on manylinux x86_64. Regenerate with `make image-lock`."])
    build_system = project()["build-system"]
    assert isinstance(build_system, dict)
    write_pins(BUILD_REQUIREMENTS, resolve(list(build_system["requires"])), [
        "The build backend pyproject.toml's [build-system] requires, pinned with its hash: the",
        "image's fivespot wheel is built in a venv holding exactly these (image/build.py,",
        "build_wheel). Regenerate with `make image-lock`."])


def resolve(arguments: list[str]) -> list[PinnedWheel]:
    """What pip would install for `arguments` (binary wheels only), each with its SHA256."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
             "--only-binary=:all:", "--report", str(report), *arguments])
        installs = json.loads(report.read_text())["install"]
    return [PinnedWheel(item["metadata"]["name"], item["metadata"]["version"],
                        item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256", ""))
            for item in installs]


def write_pins(path: Path, pins: list[PinnedWheel], header: list[str]) -> None:
    lines = [f"# {line}" for line in header] + [""]
    lines += [f"{w.name}=={w.version} --hash=sha256:{w.sha256}"
              for w in sorted(pins, key=lambda w: w.name.lower())]
    path.write_text("\n".join(lines) + "\n")
    log(f"pinned {len(pins)} wheels in {path.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image/build.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build_ = sub.add_parser("build", help="build the OCI image layout and the docker archive")
    build_.add_argument("--out", type=Path, default=REPO / "build" / "image",
                        help="output folder (default build/image)")
    build_.add_argument("--reuse", action="store_true",
                        help="keep the image already in --out when it was built from the same inputs")
    rootfs = sub.add_parser("rootfs", help="only assemble and check the root filesystem")
    rootfs.add_argument("directory", type=Path, help="an empty or absent folder")
    sub.add_parser("lock", help="re-pin image/requirements.txt and image/build-requirements.txt "
                   "from pyproject.toml")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            built = build(args.out.resolve(), reuse=args.reuse)
            print(f"built {built.reference}\n  digest {built.digest}\n"
                  f"  size {built.size / 2**20:.1f} MiB compressed\n"
                  f"  OCI layout {built.layout}:{project_version()}\n  docker archive {built.archive}")
        elif args.command == "rootfs":
            build_rootfs(args.directory.resolve(), cache_root())
        else:
            lock()
    except BuildError as error:
        print(f"image: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
