"""Secret redaction of everything the server sends to the client."""

from __future__ import annotations

import pytest

from accelopt_server.logs import Redactor


def test_redactor_removes_keys_and_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "s3cret-value-123")
    redact = Redactor()
    redact.update(["MY_KEY", "UNSET_ENV"])
    text = redact("key s3cret-value-123 Authorization: Bearer abcdef123456 sk-ABCDEFGHIJKLMN")
    assert "s3cret" not in text and "abcdef123456" not in text and "sk-ABCDEFGH" not in text
