"""Ingestion: reading and writing transaction events at the pipeline's edge.

Owns the AMLworld CSV and patterns formats (:mod:`ingest.amlworld`), the seeded synthetic
generator with the eight laundering typologies (:mod:`ingest.synthetic`) and, for real
deployments, the Kafka producer.
"""

from ingest.amlworld import (
    HEADER,
    TYPOLOGIES,
    LaunderingAttempt,
    format_row,
    parse_line,
    parse_row,
    read_patterns,
    read_transactions,
    row_key,
    write_patterns,
    write_transactions,
)

__all__ = [
    "HEADER",
    "TYPOLOGIES",
    "LaunderingAttempt",
    "format_row",
    "parse_line",
    "parse_row",
    "read_patterns",
    "read_transactions",
    "row_key",
    "write_patterns",
    "write_transactions",
]
