"""One version in one place (Cargo.toml), and the licence in the metadata."""

from __future__ import annotations

import importlib.metadata
import re

import ferrolock
from support import ROOT


def test_version_is_the_installed_distributions():
    assert ferrolock.__version__ == importlib.metadata.version("ferrolock")


def test_version_comes_from_cargo_toml():
    cargo = (ROOT / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"$', cargo, re.MULTILINE).group(1)
    assert ferrolock.__version__ == version
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^version\s*=", pyproject, re.MULTILINE) is None  # dynamic: taken from Cargo.toml
    assert 'dynamic = ["version"]' in pyproject


def test_licence_is_in_the_metadata():
    meta = importlib.metadata.metadata("ferrolock")
    assert meta["License-Expression"] == "MIT"
    assert meta["License-File"] == "LICENSE"
    files = importlib.metadata.files("ferrolock") or []
    licence = [f for f in files if f.name == "LICENSE"]
    assert licence and "MIT License" in licence[0].read_text()
    assert (ROOT / "LICENSE").read_text() == licence[0].read_text()


def test_changelog_has_an_unreleased_section_and_this_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert ferrolock.__version__ in headings
