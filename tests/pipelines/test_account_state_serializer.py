"""The account state's serializer (AccountStateSerializer.java) loses nothing: an account's
window written and read back, or copied, goes on to give exactly the features the original gives
for the same next legs. The original object is the oracle; the legs are random (hypothesis-free,
seeded), with repeated counterparties, gaps past every window and more legs than the ring's first
capacity. Calls the JVM classes through the PyFlink gateway (marker ``flink``)."""

from __future__ import annotations

import random

import pytest
from py4j.java_gateway import get_field, set_field

from auditflow.limits import FEATURE_WINDOWS, MAX_WINDOW_LEGS, RECENT_LEGS

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def jvm():
    from pyflink.java_gateway import get_gateway

    from pipelines.stream_job import CP_WINDOW, table_environment

    table_environment()  # puts the job's operators on the gateway's class path
    gw = get_gateway()
    return gw, CP_WINDOW


def legs(rng: random.Random, n: int, start_minute: int):
    minute = start_minute
    cps = [f"0{rng.randrange(10, 99)}/{rng.randrange(16**6):06X}" for _ in range(12)]
    for _ in range(n):
        minute += rng.choice([0, 0, 1, 3, 30, 200, 1500, 12_000])  # same minute, hours, days, past 7 days
        yield minute, rng.random() < 0.5, rng.choice(cps), rng.choice([100, 12_345, 10**6, 7, rng.randrange(10**9)])


def win(state):
    return get_field(state, "window")


def features(gw, window, leg):
    n = gw.jvm.io.auditflow.stream.AccountWindow.featureCount(len(FEATURE_WINDOWS))
    dst = gw.new_array(gw.jvm.double, n)
    window.apply(leg[0], leg[1], leg[2], leg[3], dst, 0)
    return list(dst)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_state_written_and_read_back_or_copied_goes_on_like_the_original(jvm, seed):
    gw, cp_window = jvm
    j = gw.jvm
    rng = random.Random(seed)
    windows = gw.new_array(j.long, len(FEATURE_WINDOWS))
    for i, (_, minutes) in enumerate(FEATURE_WINDOWS):
        windows[i] = minutes
    ser = j.io.auditflow.stream.AccountStateSerializer.INSTANCE
    state = ser.createInstance()
    set_field(state, "window", j.io.auditflow.stream.AccountWindow(windows, MAX_WINDOW_LEGS, RECENT_LEGS, cp_window))
    set_field(state, "cleanupAt", 123_456)
    history = list(legs(rng, 400, 27_000_000))
    for leg in history[:300]:
        features(gw, win(state), leg)
    out = j.org.apache.flink.core.memory.DataOutputSerializer(1024)
    ser.serialize(state, out)
    back = ser.deserialize(j.org.apache.flink.core.memory.DataInputDeserializer(out.getCopyOfBuffer()))
    copied = ser.copy(state)
    assert get_field(back, "cleanupAt") == get_field(copied, "cleanupAt") == 123_456
    for leg in history[300:]:  # the same next legs: the same features, bit for bit
        want = features(gw, win(state), leg)
        assert features(gw, win(back), leg) == want
        assert features(gw, win(copied), leg) == want
    # and the copy is independent of the original: the original went on, the copy did not move
    again = ser.copy(state)
    features(gw, win(state), (history[-1][0] + 1, True, "010/NEW", 5))
    assert features(gw, win(again), (history[-1][0] + 2, False, "010/X", 9)) != \
        features(gw, win(state), (history[-1][0] + 2, False, "010/X", 9))
