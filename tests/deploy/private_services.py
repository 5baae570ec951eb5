"""deploy/services.py as a private instance, for tests that stop and start servers.

    AUDITFLOW_VAR=/tmp/x AUDITFLOW_TEST_KAFKA_PORT=... AUDITFLOW_TEST_KAFKA_CONTROLLER_PORT=... \\
    AUDITFLOW_TEST_NEO4J_BOLT_PORT=... python tests/deploy/private_services.py up kafka neo4j
    AUDITFLOW_VAR=/tmp/x AUDITFLOW_TEST_FLINK_REST_PORT=... AUDITFLOW_TEST_FLINK_RPC_PORT=... \\
    python tests/deploy/private_services.py up flink

Runs the real deploy/services.py (same code, same jar cache) with its own state directory
(``AUDITFLOW_VAR``, which deploy/services.py honours) and its own loopback ports. deploy/services.py
has no setting for its ports (they are module constants), so this script loads it and sets them
before calling its ``main``. It refuses to run on the shared instance's state directory or ports,
and only for services named explicitly, so it can never stop or start the servers the suite
shares. Only the ports of the services named need to be set (Flink's other ports -- blob server,
TaskManager RPC and data -- are picked by the kernel anyway).

``AUDITFLOW_TEST_NEO4J_LEGACY_NO_AUTH=1`` starts this instance's Neo4j the way deploy/services did
before authentication was on (no password file, ``AUTH false``, health checked without
credentials), to test the upgrade of such a store.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_VAR = (REPO / "var").resolve()
LEGACY_NO_AUTH = "AUDITFLOW_TEST_NEO4J_LEGACY_NO_AUTH"
PORTS = {  # service -> {deploy/services.py constant: environment variable naming this instance's port}
    "kafka": {"KAFKA_PORT": "AUDITFLOW_TEST_KAFKA_PORT",
              "KAFKA_CONTROLLER_PORT": "AUDITFLOW_TEST_KAFKA_CONTROLLER_PORT"},
    "neo4j": {"NEO4J_BOLT_PORT": "AUDITFLOW_TEST_NEO4J_BOLT_PORT"},
    "flink": {"FLINK_REST_PORT": "AUDITFLOW_TEST_FLINK_REST_PORT",
              "FLINK_RPC_PORT": "AUDITFLOW_TEST_FLINK_RPC_PORT"},
}


def load(names: list[str] | None = None) -> object:
    """deploy/services.py on the private state directory, with the ports of ``names`` (default:
    every service whose port variables are all set; a service named must have them)."""
    var = os.environ.get("AUDITFLOW_VAR")
    if not var or Path(var).expanduser().resolve() == SHARED_VAR:
        sys.exit(f"private_services: set AUDITFLOW_VAR to a private directory (not {SHARED_VAR})")
    spec = importlib.util.spec_from_file_location("auditflow_private_services", REPO / "deploy" / "services.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)  # reads AUDITFLOW_VAR here
    if Path(mod.VAR) == SHARED_VAR:
        sys.exit(f"private_services: deploy/services.py still uses the shared {SHARED_VAR}")
    if names is None:
        names = [n for n, ports in PORTS.items() if all(os.environ.get(env) for env in ports.values())]
    for name in names:
        for const, env in PORTS[name].items():
            if not hasattr(mod, const):
                sys.exit(f"private_services: deploy/services.py has no {const} any more: update {__file__}")
            if not os.environ.get(env):
                sys.exit(f"private_services: {name} needs {env} (a private loopback port)")
            port = int(os.environ[env])
            if port == getattr(mod, const):
                sys.exit(f"private_services: {env}={port} is the shared instance's port")
            setattr(mod, const, port)
    mod.KAFKA_BOOTSTRAP = f"{mod.HOST}:{mod.KAFKA_PORT}"
    mod.NEO4J_URI = f"bolt://{mod.HOST}:{mod.NEO4J_BOLT_PORT}"
    mod.FLINK_REST = f"http://{mod.HOST}:{mod.FLINK_REST_PORT}"
    if os.environ.get(LEGACY_NO_AUTH) == "1":
        legacy_neo4j_without_auth(mod)
    return mod


def legacy_neo4j_without_auth(mod) -> None:
    """Neo4j as the deploy/services before authentication started it (see the module docstring)."""
    spawn = mod.spawn

    def spawn_without_auth(cmd, *args, **kwargs):
        if any(c == "Neo4jServer" or c.endswith("Neo4jServer.java") for c in cmd):
            if cmd[-2:] != ["true", str(mod.neo4j_password_file())]:
                sys.exit(f"private_services: Neo4j's command line changed ({cmd[-3:]}): update {__file__}")
            cmd = [*cmd[:-2], "false"]
        return spawn(cmd, *args, **kwargs)

    def health_without_auth(self):
        import neo4j
        try:
            with neo4j.GraphDatabase.driver(mod.NEO4J_URI, auth=None, connection_timeout=5.0) as driver:
                records, _, _ = driver.execute_query("RETURN 1 AS ok")
        except Exception as e:  # noqa: BLE001 - not up yet
            return mod.Health(False, f"RETURN 1 without auth: {type(e).__name__}: {e}")
        return mod.Health(records[0]["ok"] == 1, "RETURN 1 ok without auth (legacy)")

    mod.spawn = spawn_without_auth
    mod.ensure_neo4j_password = lambda: None  # the old version wrote no password file
    mod.Neo4j.health = health_without_auth


def main(argv: list[str]) -> int:
    names = argv[1:]
    if argv[:1] == ["env"] and not names:
        return load().main(argv)  # `env` takes no service names: the ports that are set
    if not names or any(n not in PORTS for n in names):
        sys.exit(f"private_services: name the services ({', '.join(PORTS)}) explicitly")
    return load(names).main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
