"""Ed25519 signing: RFC 8032 test vector, key ids, key files, keyrings, rotation, the dev key."""

from __future__ import annotations

import base64
import hashlib
import json
import stat

import pytest

from auditflow_app import flow
from auditflow_app.settings import Settings
from reports import render_alert_report, verify_manifest
from reports.signing import (
    DevelopmentKeyRefused,
    Keyring,
    PublicKey,
    Signer,
    SigningKeyError,
    development_signer,
    generate_key_file,
    load_signer,
)
from reports.testing import INPUT_SHA256, make_alert, make_reason_codes, make_trace

# RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte 0x72).
RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_SIG_EMPTY = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
RFC8032_SECRET_2 = bytes.fromhex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
RFC8032_SIG_72 = bytes.fromhex(
    "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00")


def test_rfc8032_vectors():
    s = Signer.from_seed(RFC8032_SECRET)
    assert s.public_key.raw == RFC8032_PUBLIC
    assert base64.b64decode(s.sign(b"")) == RFC8032_SIG_EMPTY
    assert base64.b64decode(Signer.from_seed(RFC8032_SECRET_2).sign(bytes([0x72]))) == RFC8032_SIG_72


def test_key_id_is_recomputable_from_the_public_key_alone():
    s = Signer.from_seed(RFC8032_SECRET)
    assert s.key_id == "ed25519:" + hashlib.sha256(RFC8032_PUBLIC).hexdigest()[:16]
    assert PublicKey.from_dict(s.public_key.to_dict()) == s.public_key


def test_keyring_refuses_other_keys_flipped_signatures_and_malformed_ones():
    s, other = Signer.from_seed(RFC8032_SECRET), Signer.from_seed(bytes(32))
    ring = Keyring([s.public_key])
    sig = s.sign(b"data")
    assert ring.check(s.key_id, b"data", sig) is None
    flipped = bytearray(base64.b64decode(sig))
    flipped[5] ^= 1
    assert "does not verify" in ring.check(s.key_id, b"data", base64.b64encode(bytes(flipped)).decode())
    assert "not among the trusted keys" in ring.check(other.key_id, b"data", other.sign(b"data"))
    # the key id of the signer but a signature by another key
    assert "does not verify" in ring.check(s.key_id, b"data", other.sign(b"data"))
    assert "not base64" in ring.check(s.key_id, b"data", "!!")
    assert "does not verify" in ring.check(s.key_id, b"data", base64.b64encode(b"short").decode())
    dev = development_signer()
    assert "development key" in ring.check(dev.key_id, b"data", dev.sign(b"data"))


def test_key_file_round_trip_is_private_and_never_overwritten(tmp_path):
    path = tmp_path / "k" / "signing.pem"
    made = generate_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert load_signer(path).key_id == made.key_id
    with pytest.raises(FileExistsError):
        generate_key_file(path)
    assert load_signer(path).key_id == made.key_id
    (tmp_path / "bad.pem").write_text("not a key")
    with pytest.raises(SigningKeyError, match="bad.pem"):
        load_signer(tmp_path / "bad.pem")
    with pytest.raises(SigningKeyError, match="cannot be read"):
        load_signer(tmp_path / "absent.pem")


def test_keyring_file_round_trip_and_a_forged_key_id_is_refused(tmp_path):
    a, b = Signer.from_seed(RFC8032_SECRET), Signer.from_seed(bytes(32))
    Keyring([a.public_key, b.public_key]).save(tmp_path / "keys.json")
    assert Keyring.load(tmp_path / "keys.json").key_ids == sorted([a.key_id, b.key_id])
    d = json.loads((tmp_path / "keys.json").read_text())
    d["keys"][0]["key_id"] = d["keys"][1]["key_id"]  # claim one key's id for another key
    (tmp_path / "keys.json").write_text(json.dumps(d))
    with pytest.raises(SigningKeyError, match="is not the id of its public key"):
        Keyring.load(tmp_path / "keys.json")


def test_rotation_keeps_old_reports_verifiable(tmp_path):
    old, new = generate_key_file(tmp_path / "old.pem"), generate_key_file(tmp_path / "new.pem")
    args = dict(input_sha256=INPUT_SHA256, code_version="v", seed=1)
    m_old = render_alert_report(make_alert(), make_trace(), make_reason_codes(), out_dir=tmp_path / "r1",
                                signer=old, **args)
    m_new = render_alert_report(make_alert(), make_trace(), make_reason_codes(), out_dir=tmp_path / "r2",
                                signer=new, **args)
    assert (m_old.key_id, m_new.key_id) == (old.key_id, new.key_id)
    both = Keyring([old.public_key, new.public_key])
    for d, m in (("r1", m_old), ("r2", m_new)):
        assert verify_manifest(tmp_path / d / f"{m.alert_id}.manifest.json", both) == []
    only_new = Keyring([new.public_key])
    assert any(old.key_id in p for p in verify_manifest(tmp_path / "r1" / f"{m_old.alert_id}.manifest.json", only_new))


def test_the_development_key_is_refused_outside_the_demo_loudly(tmp_path):
    with pytest.raises(DevelopmentKeyRefused, match="AUDITFLOW_SIGNING_KEY_FILE") as err:
        flow.report_signer(Settings(out_dir=tmp_path))
    assert "development key" in str(err.value) and "auditflow keys new" in str(err.value)
    assert flow.report_signer(Settings(out_dir=tmp_path), development_key=True).development
    # a key file holding the development key is no way around it
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from reports.signing import _DEV_SEED

    pem = Ed25519PrivateKey.from_private_bytes(_DEV_SEED).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (tmp_path / "dev.pem").write_bytes(pem)
    with pytest.raises(SigningKeyError, match="development key"):
        flow.report_signer(Settings(out_dir=tmp_path, signing_key_file=tmp_path / "dev.pem"))


def test_verifiers_trust_the_keyring_and_the_configured_key_only(tmp_path):
    a, b = generate_key_file(tmp_path / "a.pem"), Signer.from_seed(bytes(32))
    Keyring([b.public_key]).save(tmp_path / "published.json")
    ring = flow.trusted_keys(Settings(signing_key_file=tmp_path / "a.pem", trusted_keys_file=tmp_path / "published.json"))
    assert ring.key_ids == sorted([a.key_id, b.key_id])
    assert development_signer().key_id not in ring
    assert len(flow.trusted_keys(Settings())) == 0
