"""deploy/services.py as a private instance, for tests that stop and start servers.

    AUDITFLOW_VAR=/tmp/x AUDITFLOW_TEST_KAFKA_PORT=... AUDITFLOW_TEST_KAFKA_CONTROLLER_PORT=... \\
    AUDITFLOW_TEST_NEO4J_BOLT_PORT=... python tests/deploy/private_services.py up kafka neo4j

Runs the real deploy/services.py (same code, same jar cache) with its own state directory
(``AUDITFLOW_VAR``, which deploy/services.py honours) and its own loopback ports. deploy/services.py
has no setting for its ports (they are module constants), so this script loads it and sets them
before calling its ``main``. It refuses to run on the shared instance's state directory or ports,
and only for kafka and neo4j, so it can never stop or start the servers the suite shares.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_VAR = (REPO / "var").resolve()
PORTS = {  # deploy/services.py constant -> environment variable naming this instance's port
    "KAFKA_PORT": "AUDITFLOW_TEST_KAFKA_PORT",
    "KAFKA_CONTROLLER_PORT": "AUDITFLOW_TEST_KAFKA_CONTROLLER_PORT",
    "NEO4J_BOLT_PORT": "AUDITFLOW_TEST_NEO4J_BOLT_PORT",
}


def load() -> object:
    var = os.environ.get("AUDITFLOW_VAR")
    if not var or Path(var).expanduser().resolve() == SHARED_VAR:
        sys.exit(f"private_services: set AUDITFLOW_VAR to a private directory (not {SHARED_VAR})")
    spec = importlib.util.spec_from_file_location("auditflow_private_services", REPO / "deploy" / "services.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)  # reads AUDITFLOW_VAR here
    if Path(mod.VAR) == SHARED_VAR:
        sys.exit(f"private_services: deploy/services.py still uses the shared {SHARED_VAR}")
    for const, env in PORTS.items():
        if not hasattr(mod, const):
            sys.exit(f"private_services: deploy/services.py has no {const} any more: update {__file__}")
        port = int(os.environ[env])
        if port == getattr(mod, const):
            sys.exit(f"private_services: {env}={port} is the shared instance's port")
        setattr(mod, const, port)
    mod.KAFKA_BOOTSTRAP = f"{mod.HOST}:{mod.KAFKA_PORT}"
    mod.NEO4J_URI = f"bolt://{mod.HOST}:{mod.NEO4J_BOLT_PORT}"
    return mod


def main(argv: list[str]) -> int:
    mod = load()
    names = argv[1:]
    if not names or any(n not in ("kafka", "neo4j") for n in names):
        sys.exit("private_services: name the services (kafka, neo4j) explicitly; flink is not supported")
    return mod.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
