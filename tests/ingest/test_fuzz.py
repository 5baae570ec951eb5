"""Fuzz: random and mutated bytes at the line reader and the JSON / wire / reject decoders.

No exception escapes (decoders raise FieldError only), every data line is read once on both the
importer's and the producer's path (in = processed + rejected) and both agree line by line; the
properties are ingest.fuzz's ``check_*`` functions. Hypothesis draws the inputs with a fixed
number of examples, derandomized, so CI runs the same cases every time (a few seconds)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import fuzz

FUZZ = settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

_rows = st.sampled_from(fuzz.SEED_ROWS)
_tokens = st.sampled_from(fuzz.TOKENS)


@st.composite
def _mutated(draw, seeds) -> bytes:
    """A seed with a few edits drawn by hypothesis (so it shrinks failures to small edits)."""
    data = bytearray(draw(seeds))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data)))
        j = min(len(data), i + draw(st.integers(0, 12)))
        op = draw(st.integers(0, 4))
        if op == 0:
            data[i:i] = draw(_tokens)
        elif op == 1:
            data[i:j] = draw(_tokens)
        elif op == 2:
            del data[i:j]
        elif op == 3:
            data[i:i] = draw(st.binary(min_size=1, max_size=6))
        else:
            data[i:i] = data[i:j] * draw(st.integers(1, 20))
    return bytes(data)


_line = st.one_of(_rows, _mutated(_rows), st.binary(max_size=120))
_body = st.tuples(st.lists(_line, max_size=8), st.sampled_from([b"", b"\n", b"\r\n"])).map(
    lambda t: b"\n".join(t[0]) + t[1])

_corpus = fuzz._seed_corpus()


@FUZZ
@given(_body)
def test_line_reader_reads_every_line_once_on_both_paths_whatever_the_bytes(body):
    fuzz.check_line_reader(body)


@FUZZ
@given(st.one_of(_mutated(st.sampled_from(_corpus["json"])), st.binary(max_size=200),
                 st.text(max_size=50).map(str.encode)))
def test_json_decoder_decodes_or_raises_field_error(data):
    fuzz.check_json_decoder(data)


@FUZZ
@given(st.one_of(_mutated(st.sampled_from(_corpus["wire"])).map(lambda b: b.decode("utf-8", "surrogateescape")),
                 st.text(max_size=120)))
def test_wire_decoder_decodes_or_raises_field_error(text):
    fuzz.check_wire_decoder(text)


@FUZZ
@given(st.one_of(_mutated(st.sampled_from(_corpus["reject"])), st.binary(max_size=200)))
def test_reject_decoder_decodes_or_raises_field_error(data):
    fuzz.check_reject_decoder(data)


def test_the_fuzz_driver_runs_seeded_cases_without_a_crash():
    report = fuzz.fuzz_cases(2000, seed=8)
    assert (report.cases, report.crashes, report.failures) == (2000, 0, [])
    assert report.lines > 1000 and report.decoded > 0  # it read lines and some inputs still decoded
    again = fuzz.fuzz_cases(2000, seed=8)
    assert (again.lines, again.decoded) == (report.lines, report.decoded)  # same seed, same cases


def test_the_fuzz_driver_counts_an_escaping_exception_as_a_crash(monkeypatch):
    """The driver can fail: a decoder that lets a KeyError out, or a reader that drops a line."""
    from auditflow.records import TransactionEvent

    real = TransactionEvent.from_wire.__func__

    def leaky(cls, text):
        if isinstance(text, str) and text.count(",") > 15:
            raise KeyError("boom")
        return real(cls, text)

    monkeypatch.setattr(TransactionEvent, "from_wire", classmethod(leaky))
    report = fuzz.fuzz_cases(400, seed=3)
    assert report.crashes > 0 and "KeyError" in report.failures[0]
    monkeypatch.undo()
    with pytest.raises(fuzz.FuzzFailure, match="in != processed"):
        monkeypatch.setattr(fuzz, "wire_records", lambda f, source: iter(()))
        fuzz.check_line_reader(fuzz.SEED_ROWS[0] + b"\n")


def test_mutate_is_seeded():
    a = [fuzz.mutate(random.Random(5), r) for r in fuzz.SEED_ROWS]
    b = [fuzz.mutate(random.Random(5), r) for r in fuzz.SEED_ROWS]
    assert a == b and a != list(fuzz.SEED_ROWS)
