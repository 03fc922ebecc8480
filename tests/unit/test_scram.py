"""SCRAM credentials and the rules of Describe/AlterUserScramCredentials (security/scram.py), and the server side
of the SCRAM exchange (security/sasl.py ScramExchange) driven by a client written here from RFC 5802."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os

import pytest
import scramp

from kafkite.security import scram
from kafkite.security.sasl import AuthenticationFailed, SaslConfig, ScramExchange, scram_failed_message
from kafkite.wire.errors import E


def test_credential_string_is_kafkas_format_and_matches_scramp():
    cred = scram.credential_from_password("SCRAM-SHA-512", "alice-secret", 4096, salt=b"0123456789abcdef")
    text = cred.to_string()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=4096")
    assert [p.split("=", 1)[0] for p in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert scram.ScramCredential.from_string(text) == cred
    # what AlterUserScramCredentials carries (a salted password) gives the same keys as scramp from the password
    for mech in scram.MECHANISMS:
        salted = scram.salted_password(mech, "pw", b"s" * 16, 8192)
        assert scram.credential_from_salted_password(mech, b"s" * 16, salted, 8192) == \
            scram.credential_from_password(mech, "pw", 8192, salt=b"s" * 16)
    with pytest.raises(ValueError):
        scram.ScramCredential.from_string("salt=!!,stored_key=x")


def test_sanitize_as_kafka():
    assert scram.sanitize("alice") == "alice"
    assert scram.sanitize("a b*c~@x.y-z_") == "a%20b%2Ac%7E%40x.y-z_"
    assert scram.desanitize(scram.sanitize("CN=a,O=b ü")) == "CN=a,O=b ü"


def _up(name, mech=2, iterations=4096):
    return scram.Upsertion(name, mech, iterations, b"salt-salt-salt", b"x" * 64)


def test_alter_rules_as_kafkas_zk_admin_manager():
    users = {"bob": {"SCRAM-SHA-256": scram.credential_from_password("SCRAM-SHA-256", "b").to_string(),
                     "consumer_byte_rate": "1024"}}
    results, changes = scram.alter(users, [
        _up("alice"), _up("", 1), _up("weird", 3), _up("few", 2, 4095), _up("many", 2, 16385), _up("twice"),
        _up("twice"), _up("bob", 2), scram.Upsertion("short", 2, 4096, b"s" * 11, b"x" * 64)],
        [scram.Deletion("bob", 1), scram.Deletion("ghost", 2)])
    got = {r["user"]: (r["error_code"], r["error_message"]) for r in results}
    assert got == {
        "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "weird": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "twice": (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "ghost": (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "alice": (0, None), "bob": (0, None), "short": (0, None)}  # any salt, as Kafka's ScramControlManager
    assert set(changes) == {"alice", "bob", "short"}
    assert set(changes["bob"]) == {"SCRAM-SHA-512", "consumer_byte_rate"}  # other keys (quotas) are kept
    assert users["bob"].keys() == {"SCRAM-SHA-256", "consumer_byte_rate"}  # nothing changed in place
    cred = scram.ScramCredential.from_string(changes["alice"]["SCRAM-SHA-512"])
    assert cred.iterations == 4096 and cred.salt == b"salt-salt-salt"
    # an upsertion and a deletion of the same user and mechanism collide too; of two mechanisms they do not
    results, changes = scram.alter(users, [_up("bob", 1)], [scram.Deletion("bob", 1)])
    assert [(r["user"], r["error_code"]) for r in results] == [("bob", E.DUPLICATE_RESOURCE)] and not changes
    results, changes = scram.alter(users, [_up("bob", 2)], [scram.Deletion("bob", 1)])
    assert results[0]["error_code"] == 0 and set(changes["bob"]) == {"SCRAM-SHA-512", "consumer_byte_rate"}


def test_describe_rules():
    c = scram.credential_from_password("SCRAM-SHA-256", "x", 8192).to_string()
    users = {"zed": {"SCRAM-SHA-256": c}, "amy": {"SCRAM-SHA-512": c.replace("8192", "4096"), "SCRAM-SHA-256": c},
             "quota-only": {"producer_byte_rate": "1"}}
    everyone = scram.describe(users, None)
    assert [r["user"] for r in everyone] == ["amy", "zed"] and scram.describe(users, []) == everyone
    assert everyone[0]["credential_infos"] == [(1, 8192), (2, 4096)]
    got = {r["user"]: (r["error_code"], r["error_message"]) for r in
           scram.describe(users, ["zed", "", "nobody", "quota-only", "amy", "amy"])}
    assert got == {"zed": (0, None), "": (E.RESOURCE_NOT_FOUND, "Username must not be empty"),
                   "nobody": (E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
                   "quota-only": (E.RESOURCE_NOT_FOUND,
                                  "Attempt to describe a user credential that does not exist: quota-only"),
                   "amy": (E.DUPLICATE_RESOURCE,
                           "Cannot describe SCRAM credentials for the same user twice in a single request: amy")}


def test_add_scram_option():
    fields = scram.parse_scram_option("SCRAM-SHA-256=[name=a,salt=c2hvcnQ=,password=b]", need_name=True)[2]
    assert scram.credential_from_option("SCRAM-SHA-256", fields).salt == b"short"  # any salt, as kafka-storage
    fields = scram.parse_scram_option("SCRAM-SHA-256=[name=a,salt=MDEyMzQ1Njc4OWFiY2RlZg==,iterations=8192,"
                                      "saltedpassword=" + base64.b64encode(b"p" * 32).decode() + "]",
                                      need_name=True)[2]
    cred = scram.credential_from_option("SCRAM-SHA-256", fields)
    assert (cred.salt, cred.iterations) == (b"0123456789abcdef", 8192)
    assert cred == scram.credential_from_salted_password("SCRAM-SHA-256", b"0123456789abcdef", b"p" * 32, 8192)
    assert scram.parse_scram_option("SCRAM-SHA-512=[name=admin,password=admin-secret]", need_name=True) == \
        ("SCRAM-SHA-512", "admin", {"password": "admin-secret"})
    assert scram.parse_scram_option('SCRAM-SHA-256=[iterations=8192,password="a,b"]', need_name=False) == \
        ("SCRAM-SHA-256", None, {"iterations": "8192", "password": "a,b"})
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[password=b]", "SCRAM-SHA-512=[name=a]",
                "SCRAM-SHA-512=[name=a,password=b,iterations=100]"):
        with pytest.raises(ValueError):
            scram.parse_scram_option(bad, need_name=True)


# -- the exchange -------------------------------------------------------------------------------------------------
def _config(users: dict[str, dict[str, str]]) -> SaslConfig:
    cfg = SaslConfig("SASL_PLAINTEXT", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
    cfg.scram_credentials = lambda user, mech: scram.user_credential(users, user, mech)
    return cfg


def _client_exchange(ex: ScramExchange, mech: str, user_escaped: str, password: str, extensions: str = "",
                     authzid: str = "", echo_prefix: str | None = None) -> bytes:
    """RFC 5802's client side, by hand (so that extensions can be sent, which scramp's client cannot)."""
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mech]
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user_escaped},r={nonce}{extensions}"
    first = ex.step(f"n,{'a=' + authzid if authzid else ''},{bare}".encode()).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    assert attrs["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    # echo_prefix: sent in front of the combined nonce ("" and the client nonce: librdkafka < 2.6.1's bug)
    without_proof = f"c=biws,r={(nonce if echo_prefix == '' else echo_prefix or '')}{attrs['r']}"
    auth_message = f"{bare},{first},{without_proof}".encode()
    signature = hmac.new(h(client_key).digest(), auth_message, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    final = ex.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()).decode()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    assert final == "v=" + base64.b64encode(hmac.new(server_key, auth_message, h).digest()).decode()
    return final.encode()


@pytest.mark.parametrize("mech", scram.MECHANISMS)
def test_exchange_escaped_names_and_extensions(mech):
    users = {"a,b=c": {mech: scram.credential_from_password(mech, "pw", 8192).to_string()}}
    ex = ScramExchange(_config(users), mech)
    _client_exchange(ex, mech, "a=2Cb=3Dc", "pw", extensions=",foo=bar")  # an unknown extension is ignored
    assert ex.done and ex.user == "a,b=c"
    with pytest.raises(AuthenticationFailed) as err:  # a delegation token: not served
        _client_exchange(ScramExchange(_config(users), mech), mech, "a=2Cb=3Dc", "pw", extensions=",tokenauth=true")
    assert err.value.message == scram_failed_message(mech)
    with pytest.raises(AuthenticationFailed, match="authorization id") as err:
        _client_exchange(ScramExchange(_config(users), mech), mech, "a=2Cb=3Dc", "pw", authzid="admin")
    assert "different from username" in err.value.message
    # scramp's own client authenticates too
    client = scramp.ScramClient([mech], "a,b=c", "pw")
    ex = ScramExchange(_config(users), mech)
    client.set_server_first(ex.step(client.get_client_first().encode()).decode())
    client.set_server_final(ex.step(client.get_client_final().encode()).decode())
    assert ex.done


def test_wrong_password_and_unknown_user_look_alike():
    mech = "SCRAM-SHA-512"
    users = {"alice": {mech: scram.credential_from_password(mech, "right").to_string()}}
    cfg = _config(users)
    firsts = []
    for user in ("alice", "nobody", "nobody"):
        ex = ScramExchange(cfg, mech)
        client = scramp.ScramClient([mech], user, "wrong")
        first = ex.step(client.get_client_first().encode()).decode()
        firsts.append(dict(p.split("=", 1) for p in first.split(",")))
        client.set_server_first(first)
        with pytest.raises(AuthenticationFailed) as err:
            ex.step(client.get_client_final().encode())
        assert err.value.message == ("Authentication failed during authentication due to invalid credentials with "
                                     "SASL mechanism SCRAM-SHA-512")
    assert firsts[1]["i"] == "4096" and firsts[1]["s"] == firsts[2]["s"]  # a stable fake salt for an unknown user
    for bad in (b"", b"\xff", b"y,,n=alice,r=abc", b"n,,n=alice", b"p=tls-unique,,n=alice,r=abc"):
        with pytest.raises(AuthenticationFailed):
            ScramExchange(cfg, mech).step(bad)


def test_listener_config():
    from kafkite.config import BrokerConfig, ConfigError
    from kafkite.config_keys import check_broker_keys
    from kafkite.security.sasl import sasl_config
    scram_jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
    static = {"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_ssl.sasl.enabled.mechanisms": "scram-sha-512, SCRAM-SHA-256",
              "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas}
    cfg = sasl_config(BrokerConfig(static=static), "SASL_SSL")
    assert cfg.mechanisms == ["SCRAM-SHA-512", "SCRAM-SHA-256"] and cfg.plain_users == {}  # no PLAIN: no JAAS users
    assert check_broker_keys(static) == []  # the listener's keys are known ones
    bad = {**static, "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas.replace(
        "scram.ScramLoginModule", "plain.PlainLoginModule")}
    with pytest.raises(ConfigError, match="needs org.apache.kafka.common.security.scram.ScramLoginModule"):
        sasl_config(BrokerConfig(static=bad), "SASL_SSL")
    with pytest.raises(ConfigError, match="Kafkite serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        sasl_config(BrokerConfig(static={**static, "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-1"}),
                    "SASL_SSL")


def test_librdkafka_before_2_6_1_echoing_its_nonce_twice_is_taken_and_nothing_else():
    """librdkafka#4895: old librdkafka sends r=<client nonce><client nonce><server nonce>; Kafka 3.8.1-3.9 take it."""
    mech = "SCRAM-SHA-256"
    users = {"old": {mech: scram.credential_from_password(mech, "pw").to_string()}}
    ex = ScramExchange(_config(users), mech)
    _client_exchange(ex, mech, "old", "pw", echo_prefix="")
    assert ex.done and ex.user == "old"
    with pytest.raises(AuthenticationFailed):  # any other prefix is still refused
        _client_exchange(ScramExchange(_config(users), mech), mech, "old", "pw", echo_prefix="x")


def test_mangled_tokens_only_ever_fail_authentication():
    """Random and cut client messages: the exchange answers AuthenticationFailed (Kafka's generic answer), never
    another exception."""
    import random
    mech = "SCRAM-SHA-512"
    cfg = _config({"u": {mech: scram.credential_from_password(mech, "pw").to_string()}})
    rng = random.Random(20261125)
    alphabet = b"nrcpasiv=,,,==2C3Dbiwsu\x00\xff~abc0123+/"

    def noise(n: int) -> bytes:
        return bytes(rng.choice(alphabet) for _ in range(n))
    for _ in range(500):
        ex = ScramExchange(cfg, mech)
        client = scramp.ScramClient([mech], "u", "pw")
        first = client.get_client_first().encode()
        if rng.random() < 0.5:
            first = noise(rng.randint(0, 40)) if rng.random() < 0.5 else first[:rng.randint(0, len(first))] + noise(3)
        try:
            answer = ex.step(first)
        except AuthenticationFailed:
            continue
        try:
            client.set_server_first(answer.decode())
            final = client.get_client_final().encode()
        except scramp.ScramException:
            final = b"c=biws,r=x,p=abc"
        k = rng.randint(0, len(final))
        final = final[:k] + noise(rng.randint(0, 5)) + final[k + rng.randint(0, 3):]
        try:
            ex.step(final)
        except AuthenticationFailed:
            pass
