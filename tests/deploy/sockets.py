"""Listening TCP sockets from /proc, for tests/deploy/test_security.py and the job it submits
(tests/deploy/listener_probe_job.py, whose Python worker reads its TaskManager's sockets).

The kernel's tables (/proc/net/tcp, tcp6) give every listening socket; a process's own sockets
are matched by inode through /proc/PID/fd, which works for the processes of this user -- the
servers deploy/services starts. Needs neither ``ss`` nor psutil.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp{,6}


def _proc_address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket (IPv4 and IPv6)."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            next(fh)
            for line in fh:
                f = line.split()
                if f[3] != LISTEN:
                    continue
                addr, port = f[1].rsplit(":", 1)
                out[int(f[9])] = (str(_proc_address(addr)), int(port, 16))
    return out


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(int(m.group(1)))
    return inodes


def process_tree(pid: int) -> set[int]:
    """pid and all its descendants."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in tree:
            tree.add(p)
            todo.extend(children.get(p, []))
    return tree


def owner_of(port: int, sockets: dict[int, tuple[str, int]]) -> int:
    """The pid listening on a loopback-reachable port."""
    wanted = {inode for inode, (_, p) in sockets.items() if p == port}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and socket_inodes(int(d.name)) & wanted:
            return int(d.name)
    raise AssertionError(f"no process of this user listens on port {port}")


def is_loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def listeners_of(pid: int, sockets: dict[int, tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """(address, port) of every listening socket of pid and its descendants."""
    sockets = listening_sockets() if sockets is None else sockets
    inodes = set().union(*(socket_inodes(p) for p in process_tree(pid)))
    return sorted(sockets[i] for i in inodes if i in sockets)


def flink_run_marked(flink_home: Path, conf_dir: str | Path, script: Path, marker: str, cwd: Path) -> tuple[dict, str]:
    """``flink run -py script`` against the session cluster: the JSON the job printed on its
    ``MARKER {...}`` line, and the client's output (in the assertion message if either fails)."""
    import json
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "FLINK_HOME": str(flink_home), "FLINK_CONF_DIR": str(conf_dir)}
    env.pop("FLINK_ENV_JAVA_OPTS", None)
    res = subprocess.run([str(Path(flink_home) / "bin" / "flink"), "run", "-pyexec", sys.executable, "-py", str(script)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    m = re.search(rf"^{re.escape(marker)} (\{{.*\}})$", res.stdout, re.M)
    assert m, out[-4000:]
    return json.loads(m.group(1)), out
