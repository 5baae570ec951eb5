"""A resumable ``produce_file`` run that stops still inside a transaction, to be killed.

    python tests/support/produce_child.py CSV TOPIC DLQ CHUNK_ROWS PAUSE_AT

Sends CSV with transactions of CHUNK_ROWS rows; once PAUSE_AT rows are read (the progress
callback, every 100 rows) it prints ``paused <rows read>``, gives librdkafka a second to put the
open transaction's records on the broker, prints ``sent``, and sleeps, for the parent to SIGKILL
it. Without PAUSE_AT (0) it runs to the end and prints the summary as JSON. The bootstrap comes
from the environment (Settings, through auditflow_app.flow.producer_options).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from auditflow_app.flow import producer_options  # noqa: E402
from auditflow_app.settings import Settings  # noqa: E402
from ingest.kafka_io import produce_file  # noqa: E402


def main() -> None:
    csv, topic, dlq, chunk, pause_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    options = producer_options(Settings(topic_transactions=topic, topic_dlq=dlq, topic_partitions=3))

    def progress(read: int, sent: int, dead: int) -> None:
        if pause_at and read >= pause_at:
            print(f"paused {read}", flush=True)
            time.sleep(1.0)  # the producer's own threads send what is queued meanwhile
            print("sent", flush=True)
            time.sleep(600)

    summary = produce_file(csv, options, progress=progress, progress_every=100, chunk_rows=chunk)
    print(json.dumps(summary.to_dict()), flush=True)


if __name__ == "__main__":
    main()
