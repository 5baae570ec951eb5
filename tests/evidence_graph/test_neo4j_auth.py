"""Neo4j authentication: the server deploy/services starts refuses a connection without the
password; the store connects with the settings' credentials, names the setting when they are
missing or wrong, and a store opened from a password file pickles the path, never the password.

The wrong-password case uses a user that does not exist, so the real user ``neo4j`` of the
shared server is never locked out by failed attempts (Neo4j locks a user after 3 in a row).
"""

from __future__ import annotations

import pickle
import uuid

import pytest

from auditflow.secret_file import SecretFileError

needs_neo4j = pytest.mark.services("neo4j")


def _settings():
    from auditflow_app.settings import Settings

    return Settings()


def test_password_and_password_file_are_exclusive(tmp_path):
    from evidence_graph.neo4j_store import Neo4jGraphStore

    f = tmp_path / "pw"
    f.write_text("x" * 12)
    with pytest.raises(ValueError, match="not both"):
        Neo4jGraphStore("bolt://127.0.0.1:1", password="x" * 12, password_file=str(f))


def test_a_missing_password_file_names_the_file_before_any_connection(tmp_path):
    from evidence_graph.neo4j_store import Neo4jGraphStore

    missing = tmp_path / "absent"
    with pytest.raises(SecretFileError, match=str(missing)):
        Neo4jGraphStore("bolt://127.0.0.1:1", password_file=str(missing))  # port 1: never reached


@needs_neo4j
def test_the_server_refuses_a_connection_without_credentials():
    import neo4j

    s = _settings()
    assert s.neo4j_password is not None, "the settings carry no Neo4j password: eval \"$(deploy/services env)\""
    with neo4j.GraphDatabase.driver(s.neo4j_uri, auth=None) as driver:
        with pytest.raises(neo4j.exceptions.AuthError):
            driver.verify_connectivity()
    with neo4j.GraphDatabase.driver(s.neo4j_uri, auth=(s.neo4j_auth["user"], s.neo4j_password.get_secret_value())) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS ok")
        assert records[0]["ok"] == 1


@needs_neo4j
def test_the_store_names_the_setting_when_the_password_is_missing():
    from evidence_graph.neo4j_store import GraphAuthError, Neo4jGraphStore

    s = _settings()
    with pytest.raises(GraphAuthError, match="no password was given: set AUDITFLOW_NEO4J_PASSWORD_FILE"):
        Neo4jGraphStore(s.neo4j_uri, namespace="tauth")


@needs_neo4j
def test_the_store_names_the_settings_when_the_credentials_are_wrong(tmp_path):
    from evidence_graph.neo4j_store import GraphAuthError, Neo4jGraphStore

    s = _settings()
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password-" + uuid.uuid4().hex)
    user = "no-such-user-" + uuid.uuid4().hex[:8]
    with pytest.raises(GraphAuthError) as err:
        Neo4jGraphStore(s.neo4j_uri, user=user, password_file=str(wrong), namespace="tauth")
    msg = str(err.value)
    assert f"refused user {user!r}" in msg and str(wrong) in msg
    assert "AUDITFLOW_NEO4J_USER" in msg and "AUDITFLOW_NEO4J_PASSWORD_FILE" in msg
    assert wrong.read_text() not in msg


@needs_neo4j
def test_a_store_from_a_password_file_pickles_the_path_and_reconnects():
    from evidence_graph.neo4j_store import Neo4jGraphStore

    s = _settings()
    if s.neo4j_password_file is None:
        pytest.fail("AUDITFLOW_NEO4J_PASSWORD_FILE is not set: eval \"$(deploy/services env)\"")
    ns = "t" + uuid.uuid4().hex[:16]
    store = Neo4jGraphStore(s.neo4j_uri, namespace=ns, **s.neo4j_auth_reference)
    try:
        blob = pickle.dumps(store)
        assert s.neo4j_password.get_secret_value().encode() not in blob
        assert str(s.neo4j_password_file.resolve()).encode() in blob
        with pickle.loads(blob) as again:
            assert again.node_count() == 0  # connected, authenticated, same namespace
    finally:
        store.drop()
        store.close()
