"""The third-party converters of ``bench/datasets`` (AMLSim, synthfin-aml -> AMLworld) on small
hand-made fixtures in each tool's output format (written here from the documented column layouts),
against expectations worked out here, and the product's reader over what they write.

No AMLSim source, Java, Python 3.7, synthfin install or network: only the pure converters run.
"""

from __future__ import annotations

import csv
import doctest
import io
import random
import zlib

import pytest

from auditflow.records import RejectedRecord
from bench.datasets import amlsim, common, synthfin
from ingest.amlworld import format_row, parse_row, read_patterns, read_transactions, row_key


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.strip() + "\n")))


def minutes(seed: int, day: str, n: int) -> list[str]:
    """The documented minute rule, worked out here: n draws of randrange(1440) from
    random.Random("<seed>:<day>"), sorted, as HH:MM."""
    rng = random.Random(f"{seed}:{day}")
    return [f"{m // 60:02d}:{m % 60:02d}" for m in sorted(rng.randrange(1440) for _ in range(n))]


# ---------------------------------------------------------------- AMLSim fixtures (convert_logs outputs)

# accounts.csv under AMLSim's standard schema.json (account section): ids 0-2 at bank_a, 3-5 at bank_b.
AMLSIM_ACCOUNTS = """
acct_id,dsply_nm,type,acct_stat,acct_rptng_crncy,prior_sar_count,branch_id,open_dt,close_dt,initial_deposit,tx_behavior_id,bank_id,first_name,last_name,street_addr,city,state,country,zip,gender,birth_date,ssn,lon,lat
0,C_0,I,A,USD,false,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,61234.50,1,bank_a,Ann,Lee,1 Main St,Springfield,IL,US,62701,Female,1980-01-01,000-00-0000,-89.6,39.8
1,C_1,I,A,USD,false,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,72000.00,1,bank_a,Bob,Ray,2 Main St,Springfield,IL,US,62701,Male,1975-05-05,000-00-0001,-89.6,39.8
2,C_2,I,A,USD,true,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,55000.10,1,bank_a,Cy,Fox,3 Main St,Springfield,IL,US,62701,Male,1990-02-02,000-00-0002,-89.6,39.8
3,C_3,I,A,USD,true,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,58000.00,1,bank_b,Di,Orr,4 Oak Ave,Dayton,OH,US,45402,Female,1985-03-03,000-00-0003,-84.2,39.7
4,C_4,I,A,USD,true,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,99000.99,1,bank_b,Ed,Kim,5 Oak Ave,Dayton,OH,US,45402,Male,1970-04-04,000-00-0004,-84.2,39.7
5,C_5,I,A,USD,false,1,2022-09-01T00:00:00Z,4760-07-29T00:00:00Z,80000.00,1,bank_b,Flo,Ng,6 Oak Ave,Dayton,OH,US,45402,Female,1995-06-06,000-00-0005,-84.2,39.7
"""

# transactions.csv: file order is not time order (tran 6 is on day 1); alert 0 a SAR cycle
# 2 -> 3 -> 4 -> 2, alert 1 a false alert (fan-in, is_sar False), alert 2 a SAR fan-out from 0.
# An amount in Java's exponent form (1.2345678E7).
AMLSIM_TRANSACTIONS = """
tran_id,orig_acct,bene_acct,tx_type,base_amt,tran_timestamp,is_sar,alert_id
1,0,1,TRANSFER,397.08,2022-09-01T00:00:00Z,False,-1
2,2,3,WIRE,374.96,2022-09-01T00:00:00Z,True,0
3,3,4,CHECK,1.2345678E7,2022-09-02T00:00:00Z,True,0
5,5,0,TRANSFER,100.0,2022-09-02T00:00:00Z,False,1
4,4,2,CREDIT,350.1,2022-09-03T00:00:00Z,True,0
6,1,5,TRANSFER,55.5,2022-09-01T00:00:00Z,False,-1
7,0,3,TRANSFER,250.0,2022-09-03T00:00:00Z,True,2
9,0,5,TRANSFER,260.0,2022-09-03T00:00:00Z,True,2
"""

# alert_transactions.csv: tran 8 repeats tran 7 (same accounts, type, amount and day), so
# convert_logs kept only tran 7 in transactions.csv; it must be found by content.
AMLSIM_ALERT_TRANSACTIONS = """
alert_id,alert_type,is_sar,tran_id,orig_acct,bene_acct,tx_type,base_amt,tran_timestamp
0,cycle,True,2,2,3,WIRE,374.96,2022-09-01T00:00:00Z
0,cycle,True,3,3,4,CHECK,1.2345678E7,2022-09-02T00:00:00Z
1,fan_in,False,5,5,0,TRANSFER,100.0,2022-09-02T00:00:00Z
0,cycle,True,4,4,2,CREDIT,350.1,2022-09-03T00:00:00Z
2,fan_out,True,7,0,3,TRANSFER,250.0,2022-09-03T00:00:00Z
2,fan_out,True,8,0,3,TRANSFER,250.0,2022-09-03T00:00:00Z
2,fan_out,True,9,0,5,TRANSFER,260.0,2022-09-03T00:00:00Z
"""

SEED = 3


def expected_amlsim_lines() -> list[str]:
    d1, d2, d3 = minutes(SEED, "2022-09-01", 3), minutes(SEED, "2022-09-02", 2), minutes(SEED, "2022-09-03", 3)
    usd = "US Dollar"
    return [
        # day 1 in tran_id order: 1, 2, 6
        f"2022/09/01 {d1[0]},001,800000000,001,800000010,397.08,{usd},397.08,{usd},ACH,0",
        f"2022/09/01 {d1[1]},001,800000020,002,800000030,374.96,{usd},374.96,{usd},Wire,1",
        f"2022/09/01 {d1[2]},001,800000010,002,800000050,55.50,{usd},55.50,{usd},ACH,0",
        # day 2: 3, 5
        f"2022/09/02 {d2[0]},002,800000030,002,800000040,12345678.00,{usd},12345678.00,{usd},Cheque,1",
        f"2022/09/02 {d2[1]},002,800000050,001,800000000,100.00,{usd},100.00,{usd},ACH,0",
        # day 3: 4, 7, 9
        f"2022/09/03 {d3[0]},002,800000040,001,800000020,350.10,{usd},350.10,{usd},Credit Card,1",
        f"2022/09/03 {d3[1]},001,800000000,002,800000030,250.00,{usd},250.00,{usd},ACH,1",
        f"2022/09/03 {d3[2]},001,800000000,002,800000050,260.00,{usd},260.00,{usd},ACH,1",
    ]


def convert_fixture():
    conv = amlsim.convert_transactions(rows_of(AMLSIM_TRANSACTIONS), rows_of(AMLSIM_ACCOUNTS), seed=SEED)
    blocks, stats = amlsim.alert_blocks(rows_of(AMLSIM_ALERT_TRANSACTIONS), conv)
    return conv, blocks, stats


def test_amlsim_rows_become_the_expected_amlworld_lines():
    conv, _, _ = convert_fixture()
    assert [common.csv_line(r) for r in conv.rows] == expected_amlsim_lines()
    assert conv.banks == {"bank_a": "001", "bank_b": "002"}
    assert conv.skipped_cash == 0


def test_amlsim_alerts_become_the_expected_answer_key():
    _, blocks, stats = convert_fixture()
    e = expected_amlsim_lines()
    assert common.patterns_text(blocks) == (
        "BEGIN LAUNDERING ATTEMPT - CYCLE:  AMLSim alert 0\n"
        f"{e[1]}\n{e[3]}\n{e[5]}\n"
        "END LAUNDERING ATTEMPT - CYCLE\n"
        "\n"
        "BEGIN LAUNDERING ATTEMPT - FAN-OUT:  AMLSim alert 2\n"
        f"{e[6]}\n{e[7]}\n"
        "END LAUNDERING ATTEMPT - FAN-OUT\n"
    )
    assert (stats.alerts, stats.sar_alerts, stats.false_alerts) == (3, 2, 1)
    assert (stats.alert_rows_unmatched, stats.alert_rows_not_laundering, stats.alerts_without_rows) == (0, 0, 0)
    assert stats.attempts_by_typology == {"CYCLE": 1, "FAN-OUT": 1}


def test_amlsim_minutes_depend_on_the_seed_and_keep_the_order_within_a_day():
    a = amlsim.convert_transactions(rows_of(AMLSIM_TRANSACTIONS), rows_of(AMLSIM_ACCOUNTS), seed=3).rows
    b = amlsim.convert_transactions(rows_of(AMLSIM_TRANSACTIONS), rows_of(AMLSIM_ACCOUNTS), seed=3).rows
    c = amlsim.convert_transactions(rows_of(AMLSIM_TRANSACTIONS), rows_of(AMLSIM_ACCOUNTS), seed=4).rows
    assert a == b
    assert [r[0] for r in a] != [r[0] for r in c]
    assert [r[1:] for r in a] == [r[1:] for r in c]  # only the minutes move
    assert [r[0] for r in c] == sorted(r[0] for r in c)


def test_amlsim_typology_and_format_mappings_are_total_and_valid():
    assert set(amlsim.ALERT_TYPOLOGIES.values()) == set(common.TYPOLOGIES)
    from auditflow.records import PAYMENT_FORMATS

    assert set(amlsim.TX_TYPE_FORMATS.values()) <= set(PAYMENT_FORMATS)
    for cfg in amlsim.CONFIGS.values():
        assert {t for t, _ in cfg.tx_types} <= set(amlsim.TX_TYPE_FORMATS) - amlsim.CASH_TYPES
        assert {p.type for p in cfg.patterns} <= set(amlsim.ALERT_TYPOLOGIES)


@pytest.mark.parametrize(
    ("table", "old", "new", "message"),
    [
        ("tx", "1,0,1,TRANSFER", "1,0,1,BARTER", "unknown AMLSim transaction type 'BARTER'"),
        ("tx", "1,0,1,TRANSFER", "1,0,77,TRANSFER", "account 77 is not in accounts.csv"),
        ("alert", "2,fan_out,True,9", "2,fan_sideways,True,9", "mixed alert_type"),
        ("alert", "1,fan_in,False", "1,zigzag,False", "unknown AMLSim alert type 'zigzag'"),
    ],
)
def test_amlsim_bad_input_is_an_error_not_a_guess(table, old, new, message):
    tx, alerts = AMLSIM_TRANSACTIONS, AMLSIM_ALERT_TRANSACTIONS
    if table == "tx":
        tx = tx.replace(old, new)
    else:
        alerts = alerts.replace(old, new)
    with pytest.raises(ValueError, match=message):
        conv = amlsim.convert_transactions(rows_of(tx), rows_of(AMLSIM_ACCOUNTS), seed=SEED)
        amlsim.alert_blocks(rows_of(alerts), conv)


def test_amlsim_cash_rows_are_skipped_and_counted():
    tx = AMLSIM_TRANSACTIONS.strip() + "\n10,1,B12,CASH-IN,80.0,2022-09-02T00:00:00Z,False,-1\n"
    conv = amlsim.convert_transactions(rows_of(tx), rows_of(AMLSIM_ACCOUNTS), seed=SEED)
    assert conv.skipped_cash == 1 and len(conv.rows) == 8


def test_amlsim_parameter_files_satisfy_what_amlsim_checks(tmp_path):
    for cfg in [*amlsim.CONFIGS.values(), *(c.quick() for c in amlsim.CONFIGS.values())]:
        rows = amlsim.degree_rows(cfg.accounts, threshold=cfg.degree_threshold)
        assert sum(c for c, _, _ in rows) == cfg.accounts  # the account count is a multiple of it
        assert sum(c * i for c, i, _ in rows) == sum(c * o for c, _, o in rows)  # equal degree sums
        assert sum(c for c, i, o in rows if max(i, o) >= cfg.degree_threshold) >= 2 * sum(
            p.count for p in cfg.patterns if p.type in ("fan_in", "fan_out"))  # hubs for the main accounts
        for p in cfg.patterns:  # scatter/gather halves need two steps each
            assert p.min_period >= 4 and p.max_period <= cfg.total_steps
    cfg = amlsim.CONFIGS["days"]
    amlsim.write_params(cfg, tmp_path / "params")
    assert sorted(p.name for p in (tmp_path / "params").iterdir()) == [
        "accounts.csv", "alertPatterns.csv", "degree.csv", "normalModels.csv", "transactionType.csv"]
    conf = amlsim.conf_json(cfg, seed=5, sim_name="x", run_dir=tmp_path, param_dir=tmp_path / "params",
                            schema=tmp_path / "schema.json")
    assert conf["general"]["random_seed"] == 5 and conf["general"]["total_steps"] == cfg.total_steps
    for section in ("general", "default", "input", "temporal", "output", "graph_generator", "simulator"):
        assert section in conf


def test_amlsim_configurations_differ_in_sizes_durations_and_amounts():
    a, b = amlsim.CONFIGS["days"], amlsim.CONFIGS["weeks"]
    assert max(p.max_accounts for p in a.patterns) < min(p.min_accounts for p in b.patterns)
    assert max(p.max_period for p in a.patterns) < min(p.min_period for p in b.patterns)
    assert a.max_amount <= b.min_amount


def test_pom_patch_swaps_the_mason_dependency(tmp_path):
    pom = tmp_path / "pom.xml"
    pom.write_text("<dependencies>\n  <dependency>\n    <groupId>mason</groupId>\n"
                   "    <artifactId>mason</artifactId>\n    <version>20</version>\n  </dependency>\n</dependencies>\n")
    amlsim.patch_pom(pom)
    text = pom.read_text()
    assert "<groupId>fr.irit.smac.thirdparty.edu.gmu.cs</groupId>" in text and "<version>18</version>" in text
    assert "<groupId>mason</groupId>" not in text


# ---------------------------------------------------------------- synthfin fixture (to_dataframes()[1] by pandas)

SYNTHFIN_TRANSACTIONS = """
txn_id,source_id,target_id,timestamp,amount,is_fraud
0,3518,4176,2024-01-01 00:00:47.123456768,41.93651284,0
1,12,3518,2024-01-01 00:00:59.999999999,9999.995,1
2,7,12,2024-01-01 00:01:00,0.004,0
3,4176,7,2024-01-02 23:59:01.5,1234.5,1
"""


def test_synthfin_rows_become_the_expected_amlworld_lines():
    def bank(agent: int) -> str:  # the documented rule: crc32 of the decimal id, 10 banks, 1-based
        return f"{zlib.crc32(str(agent).encode()) % 10 + 1:03d}"

    usd = "US Dollar"
    got = [common.csv_line(r) for r in synthfin.convert_transactions(rows_of(SYNTHFIN_TRANSACTIONS))]
    assert got == [
        f"2024/01/01 00:00,{bank(3518)},80000DBE0,{bank(4176)},800010500,41.94,{usd},41.94,{usd},ACH,0",
        f"2024/01/01 00:00,{bank(12)},8000000C0,{bank(3518)},80000DBE0,10000.00,{usd},10000.00,{usd},ACH,1",
        f"2024/01/01 00:01,{bank(7)},800000070,{bank(12)},8000000C0,0.00,{usd},0.00,{usd},ACH,0",
        f"2024/01/02 23:59,{bank(4176)},800010500,{bank(7)},800000070,1234.50,{usd},1234.50,{usd},ACH,1",
    ]


def test_synthfin_bad_label_is_an_error():
    with pytest.raises(ValueError, match="is_fraud"):
        synthfin.convert_transactions(rows_of(SYNTHFIN_TRANSACTIONS.replace("1234.5,1", "1234.5,2")))


# ---------------------------------------------------------------- the product reads what they write


def read_back(paths):
    events = list(read_transactions(paths["trans"]))
    rejects = [e for e in events if isinstance(e, RejectedRecord)]
    laundering = {row_key(format_row(e)) for e in events if not isinstance(e, RejectedRecord) and e.is_laundering}
    attempts = list(read_patterns(paths["patterns"]))
    return events, rejects, laundering, attempts


def test_product_reader_accepts_the_converted_amlsim_set(tmp_path):
    conv, blocks, _ = convert_fixture()
    paths = common.write_set(tmp_path / "amlsim-x", "amlsim-x", conv.rows, blocks, {"name": "amlsim-x"})
    events, rejects, laundering, attempts = read_back(paths)
    assert rejects == [] and len(events) == 8
    assert len(laundering) == 5
    assert [(a.typology, a.qualifier, len(a.rows)) for a in attempts] == [
        ("CYCLE", "AMLSim alert 0", 3), ("FAN-OUT", "AMLSim alert 2", 2)]
    for a in attempts:
        for r in a.rows:
            assert r[10] == "1"
            assert row_key(format_row(parse_row(list(r), 0))) in laundering
    assert sorted(p.name for p in (tmp_path / "amlsim-x").iterdir()) == [
        "amlsim-x_Patterns.txt", "amlsim-x_Trans.csv", "meta.json"]


def test_product_reader_accepts_the_converted_synthfin_set(tmp_path):
    rows = synthfin.convert_transactions(rows_of(SYNTHFIN_TRANSACTIONS))
    paths = common.write_set(tmp_path / "sf", "sf", rows, [], {"name": "sf"})
    events, rejects, laundering, attempts = read_back(paths)
    assert rejects == [] and len(events) == 4 and len(laundering) == 2 and attempts == []
    assert paths["patterns"].read_text() == ""


def test_build_validation_catches_an_answer_key_row_missing_from_the_file(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "bench_datasets_build", Path(__file__).resolve().parents[2] / "bench" / "datasets" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    conv, blocks, _ = convert_fixture()
    paths = common.write_set(tmp_path / "a", "a", conv.rows, blocks, {})
    v = build.validate(paths["trans"], paths["patterns"])
    assert v["ok"] and v["rows"] == 8 and v["pattern_rows"] == v["pattern_rows_matching_laundering"] == 5
    stray = common.Block("STACK", "", (common.row("2022/09/04 10:00", "001", "800000000", "002", "800000030",
                                                  "1.00", "ACH", True),))
    paths = common.write_set(tmp_path / "b", "b", conv.rows, [*blocks, stray], {})
    v = build.validate(paths["trans"], paths["patterns"])
    assert not v["ok"] and v["pattern_rows_matching_laundering"] == 5 and v["pattern_rows"] == 6


def test_common_doctests():
    assert doctest.testmod(common).failed == 0
