"""The package as a user gets it: the Apache-2.0 LICENSE at the root, in the sdist and in the
wheel; licence metadata in PEP 639's form (an install does not warn); and the wheel, installed
into a venv of its own, runs the README's first command from outside the checkout."""

from __future__ import annotations

import hashlib
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import REPO

# SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the text many packages ship as it is
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "margin")


def test_the_licence_is_apache_2_0_in_pep_639_form():
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    assert "setuptools>=77" in pyproject["build-system"]["requires"]  # the first that reads both fields
    assert not any(c.startswith("License ::") for c in pyproject["project"].get("classifiers", []))


def build(kind: str, source: Path, out: Path) -> tuple[Path, str]:
    """An sdist or a wheel of `source` by setuptools' PEP 517 backend (no network), with what it printed."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"],
                          cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out / done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


def fresh_venv(path: Path) -> Path:
    """A venv of its own whose only view of the test's interpreter is its site-packages, for the
    dependencies (a line in a .pth adds a path; the editable margin's own .pth there is not read)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    deps = [p for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]} if Path(p).is_dir()]
    (Path(purelib) / "_test_dependencies.pth").write_text("\n".join(deps) + "\n", "utf-8")
    return python


@pytest.mark.slow
@pytest.mark.ray
def test_the_wheel_holds_the_licence_and_runs_outside_the_checkout(tmp_path):
    source = tmp_path / "source"  # a copy, so the build writes nothing into the checkout
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    sdist, printed = build("sdist", source, tmp_path / "dist")
    assert "SetuptoolsDeprecationWarning" not in printed and "License classifiers" not in printed, printed
    with tarfile.open(sdist) as tar:
        top = sdist.name.removesuffix(".tar.gz")
        assert tar.extractfile(f"{top}/LICENSE").read() == (REPO / "LICENSE").read_bytes()
        tar.extractall(tmp_path / "unpacked", filter="data")
    wheel, printed = build("wheel", tmp_path / "unpacked" / top, tmp_path / "dist")  # as pip does: from the sdist
    assert "SetuptoolsDeprecationWarning" not in printed, printed
    with zipfile.ZipFile(wheel) as zf:
        info = f"{top}.dist-info"
        assert zf.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        metadata = zf.read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()

    python = fresh_venv(tmp_path / "venv")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                                "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "VIRTUAL_ENV")}
    where = subprocess.run([str(python), "-c", "import margin; print(margin.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=120)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout + where.stderr
    done = subprocess.run([str(python.parent / "margin"), "run", "--guard", "keyword", "--dataset", "sample",
                           "--suite", "quick", "--out", "runs/kw"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (elsewhere / "runs" / "kw" / "snapshot.json").is_file()
