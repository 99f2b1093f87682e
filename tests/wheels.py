"""Build a pure-Python wheel of a small local package without any build backend, for tests that install
one offline (`pip install --no-index --find-links DIR`): the venv need not hold setuptools or wheel.

Reads name, version, dependencies and entry points from the package's pyproject.toml and the package
files from src/. Enough for the example connector package; not a general build tool."""

from __future__ import annotations

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(project: Path, out: Path) -> Path:
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = meta["name"], meta["version"]
    stem = re.sub(r"[-_.]+", "_", name)
    info = f"{stem}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for path in sorted((project / "src").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(project / "src").as_posix()] = path.read_bytes()
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {dep}" for dep in meta.get("dependencies", [])]
    files[f"{info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: pz-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    groups = meta.get("entry-points", {})
    entry_points = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
        for group, points in groups.items()
    )
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel
