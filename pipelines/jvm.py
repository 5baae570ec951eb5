"""The stream job's JVM operators (``pipelines/jvm/src``, Java): compiled on first use against the
Flink jars of the installed ``apache-flink`` package, so they always match the engine that runs
them. The jar is cached under ``build/jvm/`` by a digest of its sources and the Flink version.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "jvm" / "src"
BUILD_DIR = Path(__file__).resolve().parent.parent / "build" / "jvm"


class JvmBuildError(RuntimeError):
    """javac or jar failed, or no JDK was found."""


def flink_lib_dir() -> Path:
    import pyflink

    return Path(pyflink.__file__).resolve().parent / "lib"


def _java_tool(name: str, java_home: str | None) -> str:
    if java_home:
        tool = Path(java_home) / "bin" / name
        if tool.is_file():
            return str(tool)
    found = shutil.which(name)
    if not found:
        raise JvmBuildError(f"{name} not found: a JDK 17 is needed to build the stream job's operators "
                            "(set JAVA_HOME or put javac on PATH)")
    return found


def _digest() -> str:
    import pyflink.version

    h = hashlib.sha256(pyflink.version.__version__.encode())
    for f in sorted(SOURCES.rglob("*.java")):
        h.update(str(f.relative_to(SOURCES)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def operators_jar(java_home: str | None = None) -> Path:
    """The jar of the job's JVM operators, built now if its sources changed."""
    jar = BUILD_DIR / f"auditflow-stream-{_digest()}.jar"
    if jar.is_file():
        return jar
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar.is_file():  # built by another process meanwhile
            return jar
        sources = [str(f) for f in sorted(SOURCES.rglob("*.java"))]
        with tempfile.TemporaryDirectory(dir=BUILD_DIR) as tmp:
            classes = Path(tmp) / "classes"
            cmd = [_java_tool("javac", java_home), "-nowarn", "--release", "17", "-encoding", "UTF-8",
                   "-cp", f"{flink_lib_dir()}/*", "-d", str(classes), *sources]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise JvmBuildError(f"javac failed:\n{res.stderr[-4000:]}")
            partial = Path(tmp) / jar.name
            res = subprocess.run([_java_tool("jar", java_home), "cf", str(partial), "-C", str(classes), "."],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                raise JvmBuildError(f"jar failed:\n{res.stderr[-4000:]}")
            os.replace(partial, jar)
        for old in BUILD_DIR.glob("auditflow-stream-*.jar"):
            if old != jar:
                old.unlink(missing_ok=True)
    return jar
