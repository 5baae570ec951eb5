"""RFC 8785 canonical JSON: the RFC's own examples, byte for byte, and what JCS refuses."""

from __future__ import annotations

import hashlib
import json

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.canonical import CanonicalJSONError, canonical_json, canonical_sha256
from auditflow.records import trace_id_for

# RFC 8785 section 3.2.2 (the JSON text, parsed by Python's json module) and its canonical form.
RFC_3_2_2_INPUT = r'''{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}'''
RFC_3_2_2_OUTPUT = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
                    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}').encode("utf-8")

# RFC 8785 section 3.2.3: property sorting by UTF-16 code units (the emoji's surrogates sort
# before U+FB33, which a sort by code points would not do).
RFC_3_2_3_INPUT = r'''{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}'''
RFC_3_2_3_ORDER = ["Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign",
                   "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh"]


def test_rfc8785_example_3_2_2_byte_for_byte():
    assert canonical_json(json.loads(RFC_3_2_2_INPUT)) == RFC_3_2_2_OUTPUT


def test_rfc8785_example_3_2_3_sorts_by_utf16_code_units():
    text = canonical_json(json.loads(RFC_3_2_3_INPUT)).decode("utf-8")
    values = list(json.loads(text).values())  # json keeps the document's order
    assert values == RFC_3_2_3_ORDER


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2 ** 53, -(2 ** 53), {1: "int key"}, object(),
                                   "lone \ud800 surrogate"])
def test_values_without_a_canonical_form_are_refused(value):
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


def test_sha256_is_over_the_canonical_bytes():
    assert canonical_sha256({"b": 1.0, "a": "x"}) == hashlib.sha256(b'{"a":"x","b":1}').hexdigest()


def test_trace_id_is_the_sha256_of_the_jcs_text_written_out_by_hand():
    params = {"direction": "out", "max_hops": 5}
    text = b'{"edges":["tx-1","tx-2"],"params":{"direction":"out","max_hops":5},"root":"010/A"}'
    assert trace_id_for("010/A", params, ["tx-2", "tx-1"]) == "trace-" + hashlib.sha256(text).hexdigest()[:16]


# Any JSON value: strings of every code point (lone surrogates and controls too), keys ASCII or
# not, integers inside and beyond the exact range, floats.
_json_values = st.recursive(
    st.none() | st.booleans() | st.text() | st.floats(allow_nan=True) | st.integers(-2**60, 2**60),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12)


@given(_json_values)
@settings(max_examples=400, deadline=None)
def test_canonical_json_is_the_rfc8785_library_on_any_value(value):
    """The encoder takes the standard library's bytes where they are the canonical ones: checked
    against the ``rfc8785`` library itself on arbitrary values (same bytes, or both refuse)."""
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        with pytest.raises(CanonicalJSONError):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected


def test_canonical_json_of_escapes_and_non_ascii_strings():
    value = {"root": "001/8000\u00e9\u2028", "edges": ["\x00\x1f\x7f\"\\/", "\U0001f600"], "n": 2**53 - 1}
    assert canonical_json(value) == rfc8785.dumps(value)
    with pytest.raises(CanonicalJSONError):
        canonical_json({"root": "\ud800"})  # a lone surrogate has no UTF-8 form
