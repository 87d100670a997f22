"""SSH public keys: every accept/reject rule, fingerprints equal to ``ssh-keygen -lf``, the page
and ``/api/v1/ssh-keys/`` (201/400 codes/409, users see only their own keys)."""

from __future__ import annotations

import base64
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from sshkeys import services
from sshkeys.models import SSHPublicKey

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_keygen = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen not installed")


def _keygen(tmp: Path, name: str, *args: str) -> tuple[str, str]:
    """Generate a key pair with the real ssh-keygen; returns (public line, private text)."""
    path = tmp / name
    subprocess.run([SSH_KEYGEN, "-q", "-N", "", "-C", f"{name}@test", "-f", str(path), *args], check=True, timeout=60)
    return (tmp / f"{name}.pub").read_text(), path.read_text()


def _keygen_fingerprint(pub_line: str, tmp: Path) -> tuple[int, str, str]:
    """(bits, fingerprint, label) as printed by ``ssh-keygen -lf``."""
    f = tmp / "check.pub"
    f.write_text(pub_line)
    out = subprocess.run([SSH_KEYGEN, "-lf", str(f)], check=True, capture_output=True, text=True, timeout=30).stdout
    parts = out.split()
    return int(parts[0]), parts[1], parts[-1].strip("()")


def _wire(*fields: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(f)) + f for f in fields)


def _sk_ed25519_line() -> str:
    pub = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    blob = _wire(b"sk-ssh-ed25519@openssh.com", pub, b"ssh:")
    return "sk-ssh-ed25519@openssh.com " + base64.b64encode(blob).decode() + " yubikey"


def _sk_ecdsa_line() -> str:
    point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    blob = _wire(b"sk-ecdsa-sha2-nistp256@openssh.com", b"nistp256", point, b"ssh:")
    return "sk-ecdsa-sha2-nistp256@openssh.com " + base64.b64encode(blob).decode() + " yubikey"


@pytest.fixture(scope="module")
def keydir(tmp_path_factory):
    return tmp_path_factory.mktemp("keys")


ACCEPTED = [
    ("ed25519", ("-t", "ed25519"), "ssh-ed25519", 256),
    ("ecdsa256", ("-t", "ecdsa", "-b", "256"), "ecdsa-sha2-nistp256", 256),
    ("ecdsa384", ("-t", "ecdsa", "-b", "384"), "ecdsa-sha2-nistp384", 384),
    ("ecdsa521", ("-t", "ecdsa", "-b", "521"), "ecdsa-sha2-nistp521", 521),
    ("rsa2048", ("-t", "rsa", "-b", "2048"), "ssh-rsa", 2048),
    ("rsa4096", ("-t", "rsa", "-b", "4096"), "ssh-rsa", 4096),
]


@needs_keygen
@pytest.mark.parametrize("name,args,key_type,bits", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepts_generated_keys_with_ssh_keygen_fingerprint(keydir, name, args, key_type, bits):
    pub, _private = _keygen(keydir, name, *args)
    parsed = services.parse_public_key(pub)
    kg_bits, kg_fp, kg_label = _keygen_fingerprint(pub, keydir)
    assert parsed.key_type == key_type
    assert parsed.bits == bits == kg_bits
    assert parsed.fingerprint == kg_fp
    assert parsed.label == kg_label
    assert parsed.normalized == " ".join(pub.split()[:2])
    assert parsed.comment == f"{name}@test"


@needs_keygen
@pytest.mark.parametrize(
    "make,key_type,label",
    [
        (_sk_ed25519_line, "sk-ssh-ed25519@openssh.com", "ED25519-SK"),
        (_sk_ecdsa_line, "sk-ecdsa-sha2-nistp256@openssh.com", "ECDSA-SK"),
    ],
)
def test_accepts_security_key_types(keydir, make, key_type, label):
    line = make()
    parsed = services.parse_public_key(line)
    kg_bits, kg_fp, kg_label = _keygen_fingerprint(line, keydir)
    assert (parsed.key_type, parsed.bits, parsed.fingerprint, parsed.label) == (key_type, kg_bits, kg_fp, kg_label)


def test_sk_wire_format_checked_without_cryptography():
    line = _sk_ed25519_line()
    blob = base64.b64decode(line.split()[1])
    services._parse_sk_blob("sk-ssh-ed25519@openssh.com", blob)
    with pytest.raises(ValueError):
        services._parse_sk_blob("sk-ssh-ed25519@openssh.com", blob + b"\0\0\0\0")
    with pytest.raises(ValueError):
        services._parse_sk_blob("sk-ssh-ed25519@openssh.com", blob[:-3])


@needs_keygen
def test_options_and_whitespace_are_dropped(keydir):
    pub, _ = _keygen(keydir, "opt", "-t", "ed25519")
    parsed = services.parse_public_key(f'  from="10.0.0.0/8",no-pty {pub}\n\n')
    assert parsed.normalized == " ".join(pub.split()[:2])


@needs_keygen
@pytest.mark.parametrize("args", [("-t", "ed25519"), ("-t", "rsa", "-b", "2048"), ("-t", "ecdsa")])
def test_rejects_private_keys_and_asks_for_pub(keydir, args):
    _pub, private = _keygen(keydir, "priv-" + args[1], *args)
    with pytest.raises(services.SSHKeyError) as err:
        services.parse_public_key(private)
    assert err.value.code == "ssh_key_private"
    assert ".pub" in err.value.message
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    with pytest.raises(services.SSHKeyError) as err:
        services.parse_public_key(pem.decode())
    assert err.value.code == "ssh_key_private"


@needs_keygen
def test_rejects_weak_rsa(keydir):
    pub, _ = _keygen(keydir, "rsa1024", "-t", "rsa", "-b", "1024")
    with pytest.raises(services.SSHKeyError) as err:
        services.parse_public_key(pub)
    assert err.value.code == "ssh_key_weak"
    assert "1024" in err.value.message and "2048" in err.value.message


@needs_keygen
@pytest.mark.parametrize(
    "mutate",
    [
        lambda t, b: f"{t} {b[:-7]}!!",  # not base64
        lambda t, b: f"{t} {b[:40]}",  # truncated blob
        lambda t, b: f"{t}",  # base64 missing
        lambda t, b: f"{t} " + base64.b64encode(b"hello world").decode(),  # garbage blob
        lambda t, b: f"ssh-rsa {b}",  # type does not match the blob
        lambda t, b: "hello",
        lambda t, b: "",
        lambda t, b: f"{t} {b}\n{t} {b}",  # two keys at once
    ],
    ids=["bad-base64", "truncated", "missing", "garbage", "type-mismatch", "word", "empty", "two-lines"],
)
def test_rejects_malformed(keydir, mutate):
    pub, _ = (
        _keygen(keydir, "mal", "-t", "ed25519")
        if not (keydir / "mal.pub").exists()
        else (
            (keydir / "mal.pub").read_text(),
            "",
        )
    )
    key_type, b64 = pub.split()[:2]
    with pytest.raises(services.SSHKeyError) as err:
        services.parse_public_key(mutate(key_type, b64))
    assert err.value.code == "ssh_key_malformed"


@pytest.mark.parametrize("line", ["ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ecdsa-sha2-nistp999 AAAA", "x509v3-sign-rsa AAAA"])
def test_rejects_unsupported_types(line):
    with pytest.raises(services.SSHKeyError) as err:
        services.parse_public_key(line)
    assert err.value.code == "ssh_key_type"


# ----------------------------------------------------------------------------- API and page


@pytest.fixture
def ed_pub(keydir):
    if SSH_KEYGEN is None:
        pytest.skip("ssh-keygen not installed")
    pub, _ = _keygen(keydir, f"api{len(list(keydir.iterdir()))}", "-t", "ed25519")
    return pub


@pytest.mark.django_db
def test_api_create_list_delete_and_isolation(client, alice, bob, ed_pub, keydir):
    client.force_login(alice)
    resp = client.post("/api/v1/ssh-keys/", {"name": "laptop", "key": ed_pub}, content_type="application/json")
    assert resp.status_code == 201, resp.content
    data = resp.json()
    assert data["fingerprint"] == _keygen_fingerprint(ed_pub, keydir)[1]
    assert data["fingerprint"].startswith("SHA256:")
    assert (data["type"], data["bits"], data["name"]) == ("ssh-ed25519", 256, "laptop")
    # duplicate for the same user -> 409
    resp = client.post("/api/v1/ssh-keys/", {"name": "again", "key": ed_pub}, content_type="application/json")
    assert resp.status_code == 409 and resp.json()["code"] == "ssh_key_duplicate"
    # the same key for another user is fine; users only see their own keys
    client.force_login(bob)
    assert client.get("/api/v1/ssh-keys/").json() == []
    assert client.get(f"/api/v1/ssh-keys/{data['id']}/").status_code == 404
    assert client.delete(f"/api/v1/ssh-keys/{data['id']}/").status_code == 404
    assert (
        client.post("/api/v1/ssh-keys/", {"name": "b", "key": ed_pub}, content_type="application/json").status_code
        == 201
    )
    client.force_login(alice)
    names = [k["name"] for k in client.get("/api/v1/ssh-keys/").json()]
    assert names == ["laptop"]
    assert client.delete(f"/api/v1/ssh-keys/{data['id']}/").status_code == 204
    assert not SSHPublicKey.objects.filter(owner=alice).exists()


@pytest.mark.django_db
def test_api_error_codes(client, alice, keydir):
    client.force_login(alice)
    cases = {
        "ssh_key_private": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
        "ssh_key_malformed": "ssh-ed25519 not*base64",
        "ssh_key_type": "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
    }
    if SSH_KEYGEN:
        cases["ssh_key_weak"], _ = _keygen(keydir, "weak-api", "-t", "rsa", "-b", "1024")
    for code, key in cases.items():
        resp = client.post("/api/v1/ssh-keys/", {"name": "x", "key": key}, content_type="application/json")
        assert resp.status_code == 400, (code, resp.content)
        assert resp.json()["code"] == code
    assert client.post("/api/v1/ssh-keys/", {"name": "x"}, content_type="application/json").status_code == 400


@pytest.mark.django_db
def test_admin_sees_all_keys(client, alice, admin_user, ed_pub):
    services.add_key(alice, "alice-key", ed_pub)
    client.force_login(admin_user)
    rows = client.get("/api/v1/ssh-keys/").json()
    assert [(r["owner"], r["name"]) for r in rows] == [("alice", "alice-key")]


@pytest.mark.django_db
def test_page_add_list_delete(client, alice, bob, ed_pub, keydir):
    client.force_login(alice)
    page = client.get("/ssh-keys/")
    assert page.status_code == 200
    resp = client.post("/ssh-keys/", {"name": "my-workstation", "key": ed_pub}, follow=True)
    fingerprint = _keygen_fingerprint(ed_pub, keydir)[1]
    html = resp.content.decode()
    assert "my-workstation" in html and fingerprint in html
    bad = client.post("/ssh-keys/", {"name": "oops", "key": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"})
    assert bad.status_code == 400 and "ssh_key_private" in bad.content.decode()
    assert (
        "b3BlbnNzaC1rZXk"
        not in client.post(
            "/ssh-keys/", {"name": "oops", "key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n"}
        ).content.decode()
    )  # never echoed back into the form
    assert 'data-testid="ssh-key-cleared"' in bad.content.decode()
    dup = client.post("/ssh-keys/", {"name": "again", "key": ed_pub})
    assert dup.status_code == 409
    key = SSHPublicKey.objects.get(owner=alice)
    client.force_login(bob)
    assert client.post(f"/ssh-keys/{key.pk}/delete/").status_code == 404
    assert fingerprint not in client.get("/ssh-keys/").content.decode()
    client.force_login(alice)
    client.post(f"/ssh-keys/{key.pk}/delete/")
    assert not SSHPublicKey.objects.filter(pk=key.pk).exists()


@pytest.mark.django_db
def test_selected_keys_never_other_users(alice, bob, ed_pub):
    key = services.add_key(alice, "a", ed_pub)
    assert services.selected_keys(alice, [key.pk]) == [key]
    with pytest.raises(SSHPublicKey.DoesNotExist):
        services.selected_keys(bob, [key.pk])
    text = services.authorized_keys_text([key])
    assert text == f"{key.key} a\n"


@pytest.mark.django_db
def test_page_shows_jobs_using_each_key(client, alice, bob, ed_pub):
    from jobs.models import Job

    key = services.add_key(alice, "laptop", ed_pub)
    Job.objects.create(name="uses-key", owner=alice, spec={"sshPublicKeys": [ed_pub.strip()]})
    Job.objects.create(name="bobs-job", owner=bob, spec={"sshPublicKeys": [ed_pub.strip()]})
    assert services.jobs_using_keys(alice, [key]) == {key.pk: ["uses-key"]}
    client.force_login(alice)
    html = client.get("/ssh-keys/").content.decode()
    assert 'href="/jobs/uses-key/"' in html and "bobs-job" not in html


@pytest.mark.django_db
def test_api_accepts_upstream_public_key_field(client, alice, ed_pub):
    client.force_login(alice)
    resp = client.post("/api/v1/ssh-keys/", {"public_key": ed_pub, "notes": "x"}, content_type="application/json")
    assert resp.status_code == 201 and resp.json()["name"].endswith("@test")
