"""Fixtures: the command line built from the same checkout, to compare the package with."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _binary() -> pathlib.Path:
    given = os.environ.get("MESHSIM_BIN")
    if given:
        return pathlib.Path(given)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "meshsim"


class Cli:
    """Runs the meshsim binary and reads what it prints."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.path), *args], capture_output=True, text=True, cwd=ROOT)

    def json(self, *args: str):
        done = self.run(*args, "--format", "json")
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)


@pytest.fixture(scope="session")
def cli() -> Cli:
    path = _binary()
    if not path.is_file():
        pytest.fail(f"{path}: no meshsim binary to compare with (run `cargo build` or set MESHSIM_BIN)")
    return Cli(path)


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return ROOT
