import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docket.domain.kernel.canonical import CanonicalJSONError, canonical_json

scalars = st.none() | st.booleans() | st.integers() | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


@given(values)
def test_round_trips_and_is_a_fixed_point(value):
    encoded = canonical_json(value)
    decoded = json.loads(encoded.decode("utf-8"))
    assert decoded == value
    assert canonical_json(decoded) == encoded


@given(st.dictionaries(st.text(), st.integers(), min_size=2, max_size=8))
def test_key_order_does_not_change_the_bytes(mapping):
    reordered = dict(reversed(list(mapping.items())))
    assert canonical_json(reordered) == canonical_json(mapping)


@given(values)
def test_no_insignificant_whitespace(value):
    encoded = canonical_json(value).decode("utf-8")
    # whitespace may only occur inside strings: strip strings and check
    skeleton = json.dumps(json.loads(encoded), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    assert encoded == skeleton


def test_keys_sorted_by_code_point_and_utf8():
    assert canonical_json({"b": 1, "a": [True, None], "é": "ü", "Z": 0}) == '{"Z":0,"a":[true,null],"b":1,"é":"ü"}'.encode()


@pytest.mark.parametrize("bad", [1.5, {"x": 0.0}, [float("nan")], {1: "int key"}, {"s": {1, 2}}, "\ud800"])
def test_refuses_values_without_one_spelling(bad):
    with pytest.raises(CanonicalJSONError):
        canonical_json(bad)
