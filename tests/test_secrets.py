"""redact_text: long secrets masked anywhere, short ones as whole tokens only."""

from __future__ import annotations

import pytest

from config.secrets import SHORT_SECRET, redact_text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # Inside words a short secret is left alone: masking it there hides nothing.
        ("column 'placed_at' is INTEGER", "column 'placed_at' is INTEGER"),
        ("attesting the test", "attesting the test"),
        # As a whole token it is masked, wherever it stands.
        ("secret_access_key=t&x=1", "secret_access_key=***&x=1"),
        ("secret_access_key: t", "secret_access_key: ***"),
        ("key 't' refused", "key '***' refused"),
        ("t", "***"),
        ("http://user:t@host/q", "http://user:***@host/q"),
        ("Credential=t/20240101/us-east-1", "Credential=***/20240101/us-east-1"),
    ],
)
def test_a_short_secret_is_masked_as_a_whole_token_only(text: str, shown: str) -> None:
    assert redact_text(text, ["t"]) == shown


def test_a_short_secret_made_of_several_words_or_symbols() -> None:
    assert redact_text("login testing failed; testing2 ok", ["testing"]) == (
        "login *** failed; testing2 ok"
    )
    assert redact_text("db://app:p@ss@db/shop (p@ss)", ["p@ss"]) == "db://app:***@db/shop (***)"


def test_a_long_secret_is_masked_anywhere_longest_first() -> None:
    secret = "x" * SHORT_SECRET
    assert redact_text(f"ab{secret}cd", [secret]) == "ab***cd"
    assert redact_text("a sekrit-Pg-7f3a9c-2 b", ["sekrit-Pg-7f3a9c", "sekrit-Pg-7f3a9c-2"]) == (
        "a *** b"
    )


def test_url_passwords_are_masked_even_when_not_listed() -> None:
    assert redact_text("postgresql://app:hunter2@db/shop", []) == "postgresql://app:***@db/shop"
