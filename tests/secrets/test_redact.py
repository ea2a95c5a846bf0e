"""Redaction (SPEC §2 step 10, §8): secret values never leave in outputs, logs or audit."""

from __future__ import annotations

import base64
from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from toolkeeper.secrets import MASK, Redactor

TOKEN = "ghp_A1b2C3d4E5f6"


def test_nested_structures_are_redacted_in_keys_values_and_lists() -> None:
    redactor = Redactor([TOKEN])
    data = {
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        TOKEN: [f"x{TOKEN}y", ("t", TOKEN), {"deep": [[TOKEN]]}],
        "n": 3, "ok": True, "none": None,
    }
    assert redactor.redact(data) == {
        "headers": {"Authorization": f"Bearer {MASK}"},
        MASK: [f"x{MASK}y", ["t", MASK], {"deep": [[MASK]]}],
        "n": 3, "ok": True, "none": None,
    }
    assert data["headers"] == {"Authorization": f"Bearer {TOKEN}"}  # input left untouched


def test_non_json_values_are_stringified_and_numbers_that_are_secrets_masked() -> None:
    class Opaque:
        def __str__(self) -> str:
            return f"<conn password={TOKEN}>"

    redactor = Redactor([TOKEN, "98765432"])
    assert redactor.redact([Opaque(), date(2024, 1, 2), 98765432, 12]) == [
        f"<conn password={MASK}>", "2024-01-02", MASK, 12]


def test_base64_forms_of_a_secret_are_redacted() -> None:
    secret = "pass???>>>word"  # chosen so standard and URL-safe encodings differ
    raw = secret.encode()
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    assert std != url
    redactor = Redactor([secret])
    for form in (std, url, std.rstrip("=")):
        assert redactor.redact_text(f"token={form};") == f"token={MASK};"


def test_secret_inside_a_larger_base64_payload_is_redacted() -> None:
    password = "correct-horse-battery"
    redactor = Redactor([password])
    for user in ("al", "bob", "carl"):  # every byte alignment of the password
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        redacted = redactor.redact_text(f"Authorization: Basic {basic}")
        assert MASK in redacted and basic not in redacted
    other = base64.b64encode(b"bob:another-horse-battery").decode()
    assert redactor.redact_text(other) == other  # no false positive on a different value


def test_short_values_are_ignored() -> None:
    redactor = Redactor(["abc", "", "1"])
    assert not redactor
    assert redactor.redact_text("abc 1") == "abc 1"


def test_empty_redactor_returns_the_same_object() -> None:
    data = {"a": [1, 2, {"b": "c"}]}
    assert Redactor().redact(data) is data


def test_longest_secret_wins_when_one_contains_another() -> None:
    redactor = Redactor(["abcd", "abcdefgh"])
    assert redactor.redact_text("xx abcdefgh yy abcd") == f"xx {MASK} yy {MASK}"


def test_pattern_is_rebuilt_only_when_the_set_changes() -> None:
    redactor = Redactor(["secret-one"])
    pattern = redactor._pattern
    redactor.set_values(["secret-one", "abc"])  # "abc" is too short: same effective set
    assert redactor._pattern is pattern
    redactor.set_values(["secret-two"])
    assert redactor._pattern is not pattern
    assert redactor.redact_text("secret-one secret-two") == f"secret-one {MASK}"
    redactor.set_values([])
    assert redactor._pattern is None


def test_union_adds_values_without_touching_the_original() -> None:
    base = Redactor(["secret-one"])
    assert base.union(["secret-one", "x"]) is base
    both = base.union(["secret-two"])
    assert both.redact_text("secret-one secret-two") == f"{MASK} {MASK}"
    assert base.redact_text("secret-two") == "secret-two"


def test_many_secrets_are_all_redacted() -> None:
    values = [f"key-{i:05d}-{i * 7919:x}" for i in range(2000)]
    redactor = Redactor(values)
    text = " ".join(values[::97])
    assert redactor.redact_text(text) == " ".join([MASK] * len(values[::97]))


@given(
    secrets=st.lists(st.text(min_size=4, max_size=24), min_size=1, max_size=4),
    parts=st.lists(st.text(max_size=30), min_size=1, max_size=5),
)
def test_no_secret_survives_in_arbitrary_text(secrets: list[str], parts: list[str]) -> None:
    text = "".join(p + s for p, s in zip(parts, secrets * len(parts), strict=False))
    redacted = Redactor(secrets).redact_text(text)
    for secret in secrets:
        assert secret not in redacted


@given(secret=st.text(alphabet="*ab", min_size=4, max_size=8),
       text=st.text(alphabet="*ab", max_size=40))
def test_mask_never_recreates_a_secret(secret: str, text: str) -> None:
    assert secret not in Redactor([secret]).redact_text(text + secret + text)
