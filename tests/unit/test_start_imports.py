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
