"""What `kafkite serve` imports at start: libraries only some features need are imported when first used
(issue 24 item 5: idle RSS). A fresh interpreter imports what serve imports and must not hold them."""
from __future__ import annotations

import subprocess
import sys

LAZY = ("scramp", "asn1crypto", "re2")  # SCRAM credentials; KIP-848 regex subscriptions


def test_serve_start_does_not_import_feature_libraries():
    code = ("import sys, kafkite.cli, kafkite.app, kafkite.server.node; "
            f"print(sorted(m for m in {LAZY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_lazy_libraries_still_load_when_used():
    from kafkite.coordinator.regex import InvalidRegularExpression, check_regex, resolve
    from kafkite.security.scram import credential_from_password
    assert resolve("t.*", ["t1", "x", "__consumer_offsets"]) == {"t1"}
    try:
        check_regex("a(")
        raise AssertionError("RE2 accepted 'a('")
    except InvalidRegularExpression as e:
        assert "missing closing )" in str(e)
    assert len(credential_from_password("SCRAM-SHA-256", "pw", 4096).stored_key) == 32


def test_serve_start_loads_kio_without_hypothesis():
    """wire/codec.py loads kio's readers at import; kio would import hypothesis (0.27 s) where it is installed, so
    it is loaded as if hypothesis were not: serve holds kio, not hypothesis, which still imports afterwards."""
    code = ("import sys, kafkite.cli, kafkite.app, kafkite.server.node; from kafkite.wire import codec; "
            "print(sorted(m for m in ('hypothesis', 'pytest') if m in sys.modules), bool(codec.KIO_DECODED)); "
            "import hypothesis.strategies; print('hypothesis imports')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["[] True", "hypothesis imports"], out.stdout + out.stderr
