"""Canonical JSON: the one byte encoding that every digest in docket covers.

UTF-8, object keys sorted by code point, no insignificant whitespace, and only
the JSON types that have one exact spelling: strings, integers, booleans, null,
lists and objects. Floats are refused because their text is not unique.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CanonicalJSONError", "DuplicateKey", "canonical_json", "check_canonical_value", "strict_json"]

_encoder = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
)


class CanonicalJSONError(ValueError):
    """A value that has no canonical JSON form (a float, a non-string key...)."""


class DuplicateKey(ValueError):
    """A JSON object that names a key twice: parsers disagree on which value counts, so docket takes neither."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for twice, _ in pairs:
            if twice in seen:
                raise DuplicateKey(f"the key {twice[:80]!r} is given twice in one object")
            seen.add(twice)
    return value


def strict_json(text: str | bytes) -> Any:
    """json.loads for what docket checks (signed, chained or anchoring JSON): an object naming a key twice raises
    DuplicateKey (a ValueError), whatever its depth."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def check_canonical_value(value: Any, path: str = "$") -> None:
    """Raise CanonicalJSONError unless value uses canonical-JSON types only."""
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        raise CanonicalJSONError(f"{path}: floats have no canonical form; use integers")
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_canonical_value(item, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJSONError(f"{path}: object key {key!r} is not a string")
            check_canonical_value(item, f"{path}.{key}")
        return
    raise CanonicalJSONError(f"{path}: {type(value).__name__} is not a JSON type")


def canonical_json(value: Any) -> bytes:
    """Encode value as canonical JSON bytes.

    Python's sort_keys orders keys by code point, which is exactly the order the
    canonical form asks for; lone surrogates cannot be encoded to UTF-8 and are
    refused.
    """
    check_canonical_value(value)
    try:
        return _encoder.encode(value).encode("utf-8")
    except UnicodeEncodeError as e:
        raise CanonicalJSONError(f"string is not valid Unicode: {e.reason}") from e
