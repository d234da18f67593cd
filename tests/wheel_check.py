"""The release artefacts in dist/ (run by `make test-wheel`, after `make wheel`):
the wheel is manylinux2014 abi3 with a stripped extension and the licence in
its metadata, it installs into a fresh venv of the oldest and of the newest
CPython this machine has, and the demo runs against it there; the sdist holds
what a build needs, pip builds and installs it, and twine passes both.

Not collected by a plain `pytest` run (its name does not start with test_):
it needs dist/ built first."""

from __future__ import annotations

import glob
import os
import re
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import ferrolock

ROOT = Path(__file__).resolve().parent.parent
DIST = Path(os.environ.get("FERROLOCK_DIST") or ROOT / "dist")
VERSION = re.search(r'^version = "([^"]+)"$', (ROOT / "Cargo.toml").read_text(), re.MULTILINE).group(1)
OLDEST_SUPPORTED = (3, 9)  # abi3-py39 in Cargo.toml, requires-python in pyproject.toml


def only(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    if not found:
        pytest.skip(f"no {pattern} in {DIST}: run `make wheel`")
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return only("ferrolock-*.whl")


@pytest.fixture(scope="module")
def sdist() -> Path:
    return only("ferrolock-*.tar.gz")


# ---------------------------------------------------------------- the interpreters


def _describe(exe: str):
    """(version, exe) for a CPython >= 3.9 with venv and ensurepip, else None."""
    probe = (
        "import sys, sysconfig, venv, ensurepip; "
        "print(sys.implementation.name, *sys.version_info[:3], "
        "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))"
    )
    try:
        out = subprocess.run([exe, "-c", probe], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    name, major, minor, micro, free_threaded = out.stdout.split()
    version = (int(major), int(minor), int(micro))
    if name != "cpython" or version[:2] < OLDEST_SUPPORTED or free_threaded == "1":
        return None  # abi3 needs the GIL build of CPython
    return version, exe


def interpreters() -> list:
    """The oldest and the newest CPython found on this machine: those named in
    FERROLOCK_WHEEL_PYTHONS (os.pathsep-separated), or else pyenv's versions,
    python3.N on the usual paths, and the one running the tests."""
    named = os.environ.get("FERROLOCK_WHEEL_PYTHONS")
    if named:
        candidates = named.split(os.pathsep)
    else:
        pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
        candidates = sorted(glob.glob(os.path.join(pyenv_root, "versions", "*", "bin", "python3")))
        for d in ("/usr/bin", "/usr/local/bin"):
            candidates += sorted(glob.glob(os.path.join(d, "python3.[0-9]*")))
        candidates.append(getattr(sys, "_base_executable", sys.executable))
    found = {}
    for exe in candidates:
        described = _describe(exe)
        if described and described[0] not in found:
            found[described[0]] = described[1]
    if not found:
        return []
    versions = sorted(found)
    return [(v, found[v]) for v in sorted({versions[0], versions[-1]})]


PYTHONS = interpreters()


# ---------------------------------------------------------------- the wheel itself


def test_wheel_is_manylinux2014_abi3(wheel):
    assert wheel.name == (f"ferrolock-{VERSION}-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"ferrolock-{VERSION}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in meta
    assert "Tag: cp39-abi3-manylinux2014_x86_64" in meta, meta


def _section_names(elf: bytes) -> list:
    """The section names of a little-endian ELF64 file."""
    assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1, "not a little-endian ELF64 file"
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)

    def header(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        return name, offset, size

    _, str_offset, str_size = header(shstrndx)
    strings = elf[str_offset : str_offset + str_size]
    return [strings[n : strings.index(b"\0", n)].decode() for n, _, _ in (header(i) for i in range(shnum))]


def test_extension_is_stripped_and_needs_glibc_2_17_at_most(wheel):
    with zipfile.ZipFile(wheel) as z:
        [so] = [n for n in z.namelist() if n.endswith(".so")]
        assert so == "ferrolock/_ferrolock.abi3.so"
        elf = z.read(so)
    names = _section_names(elf)
    assert ".symtab" not in names and not any(n.startswith(".debug") for n in names), names
    glibc = {tuple(int(x) for x in v.split(b".")) for v in re.findall(rb"GLIBC_(\d+\.\d+)", elf)}
    assert glibc and max(glibc) <= (2, 17), sorted(glibc)
    print(f"\n{wheel.name}: {wheel.stat().st_size:,} bytes; the extension {len(elf):,} bytes")


def test_wheel_metadata_has_the_version_and_licence(wheel):
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"ferrolock-{VERSION}.dist-info/METADATA").decode()
        licence = z.read(f"ferrolock-{VERSION}.dist-info/licenses/LICENSE").decode()
        stubs = set(z.namelist())
    assert f"\nVersion: {VERSION}\n" in meta
    assert "\nLicense-Expression: MIT\n" in meta and "\nLicense-File: LICENSE\n" in meta
    assert "\nRequires-Python: >=3.9\n" in meta
    assert licence == (ROOT / "LICENSE").read_text()
    assert {
        "ferrolock/_ferrolock.pyi",
        "ferrolock/py.typed",
        "ferrolock/__init__.py",
        "ferrolock/django/__init__.py",
        "ferrolock/django/apps.py",
    } <= stubs


def test_sdist_has_what_a_build_needs(sdist):
    top = f"ferrolock-{VERSION}/"
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
        pkg_info = t.extractfile(top + "PKG-INFO").read().decode()
        licence = t.extractfile(top + "LICENSE").read().decode()
    for needed in (
        "pyproject.toml",
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "CHANGELOG.md",
        "LICENSE",
        "src/lib.rs",
        "src/py/mod.rs",
        "lua/obtain.lua",
        "lua/lib/clock.lua",
        "python/ferrolock/__init__.py",
        "python/ferrolock/_ferrolock.pyi",
    ):
        assert top + needed in names, needed
    assert f"\nVersion: {VERSION}\n" in pkg_info
    assert "\nLicense-Expression: MIT\n" in pkg_info and "\nLicense-File: LICENSE\n" in pkg_info
    assert licence == (ROOT / "LICENSE").read_text()


# ---------------------------------------------------------------- installed in a fresh venv


def fresh_venv(python: str, where: Path) -> Path:
    subprocess.run([python, "-m", "venv", str(where)], check=True, timeout=120)
    return where / "bin" / "python"


def test_some_interpreter_was_found():
    assert PYTHONS, "no CPython >= 3.9 with venv found"
    print("\ninterpreters for the wheel: " + ", ".join(f"{'.'.join(map(str, v))} ({exe})" for v, exe in PYTHONS))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version, python", PYTHONS, ids=[f"python{'.'.join(map(str, v))}" for v, _ in PYTHONS])
def test_wheel_installs_and_runs_the_demo(wheel, version, python, tmp_path):
    py = fresh_venv(python, tmp_path / "venv")
    # From the file only: no index, no dependencies (there are none).
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], check=True, timeout=120
    )
    check = subprocess.run(
        [
            str(py),
            "-c",
            "import sys, importlib.metadata as m, ferrolock; "
            "print(sys.version.split()[0], ferrolock.__version__, m.version('ferrolock'), ferrolock.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert check.returncode == 0, check.stderr
    running, version_attr, dist_version, module_file = check.stdout.split()
    assert running == ".".join(map(str, version))
    assert version_attr == dist_version == VERSION == ferrolock.__version__
    assert Path(module_file).is_relative_to(tmp_path / "venv"), module_file  # the wheel, not the work tree
    demo = subprocess.run(
        [str(py), str(ROOT / "examples" / "demo.py")], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "demo OK: all checks passed" in demo.stdout
    assert f"ferrolock {VERSION}:" in demo.stdout


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a release build from nothing, on 2 busy cores
def test_pip_builds_and_installs_the_sdist(sdist, tmp_path):
    """`pip install` of the sdist alone builds the extension (with this venv's
    maturin) and installs a package that imports and runs the demo.

    The crate is compiled from the sdist's files (a package at another path);
    CARGO_TARGET_DIR and MATURIN_PEP517_ARGS, when set (`make test-wheel`
    sets the wheel's), let it reuse the registry crates compiled for the
    wheel. The build runs at a low priority (nice 10): it is no test of speed,
    and takes the CPU that tests running beside it leave."""
    target = tmp_path / "installed"
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("CARGO_TARGET_DIR") or str(ROOT / "target" / "sdist"))
    build = subprocess.run(
        [
            "nice",
            "-n",
            "10",
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(sdist),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert list(target.glob("ferrolock/_ferrolock*.so")), sorted(p.name for p in (target / "ferrolock").iterdir())
    py = fresh_venv(sys.executable, tmp_path / "venv")
    run_env = dict(os.environ, PYTHONPATH=str(target))
    check = subprocess.run(
        [str(py), "-c", "import ferrolock; print(ferrolock.__version__, ferrolock.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=run_env,
    )
    assert check.returncode == 0, check.stderr
    version, module_file = check.stdout.split()
    assert version == VERSION and Path(module_file).is_relative_to(target), check.stdout
    demo = subprocess.run(
        [str(py), str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=run_env,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "demo OK: all checks passed" in demo.stdout


def test_twine_check_passes(wheel, sdist):
    """The metadata of both renders and is complete, as the package index
    checks it on upload (twine, pinned in tests/requirements-wheel.txt)."""
    twine = Path(sys.executable).with_name("twine")
    assert twine.exists(), "no twine in this venv: `make wheel` installs it (tests/requirements-wheel.txt)"
    check = subprocess.run(
        [str(twine), "check", "--strict", str(wheel), str(sdist)], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("PASSED") == 2, check.stdout
