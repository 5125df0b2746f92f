"""docket worker logs: text whole across read boundaries, and --json as one document with the log's digest."""

from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.slow


def test_logs_keep_a_character_split_between_reads_and_json_gives_the_digest(docket):
    docket("init")
    docket("run", "open", "--target", "main", "--goal", "g", "--id", "r1")
    docket("task", "plan", "r1", "--title", "t", "--id", "t1")
    # 65,535 bytes, then a two-byte character across the 64 KiB boundary of the reads
    docket("worker", "launch", "r1", "--task", "t1", "--", "python3", "-c",
           "import sys; sys.stdout.write('a' * 65535 + '\u00e9 done\\n')")
    text = docket("worker", "logs", "t1").stdout
    assert text.endswith("a\u00e9 done\n") and "\ufffd" not in text
    doc = docket("worker", "logs", "t1", "--json").json()
    data = (docket.ledger.parent / "logs" / "t1" / "1.log").read_bytes()
    assert (doc["sha256"], doc["bytes"], doc["generation"]) == (hashlib.sha256(data).hexdigest(), len(data), 1)
    assert doc["tail"].endswith("\u00e9 done")
    refused = docket("worker", "logs", "t1", "--json", "--follow", check=False)
    assert refused.returncode == 2 and "json-and-follow" in refused.stderr
