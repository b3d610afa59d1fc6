"""Shared fixtures for the CLI tests: where the mugraph binary, the source tree and nvcc are."""
import os
import pathlib
import shutil
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
# The CUDA toolkit's compiler, on PATH or where the toolkit installs it (None: the nvcc tests skip).
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)


@pytest.fixture(scope="session")
def mugraph_bin():
    path = os.environ.get("MUGRAPH_BIN", str(SOURCE_DIR / "build" / "bin" / "mugraph"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"mugraph binary not found at {path}; build first or set MUGRAPH_BIN")
    return path


@pytest.fixture(scope="session")
def sanitized_build(mugraph_bin):
    """Whether the binary is the AddressSanitizer build (its searches run about ten times slower:
    tests that search much search less there)."""
    r = subprocess.run([mugraph_bin, "--version"], capture_output=True, text=True, timeout=60)
    return "AddressSanitizer" in r.stdout


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


def run_cli(binary, *args, timeout=120, env=None):
    """Runs the CLI (in `env`, default this process's environment) and returns the
    CompletedProcess (never raises on a non-zero exit)."""
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
