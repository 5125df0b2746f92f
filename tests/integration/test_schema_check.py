"""The schema verify expects is exactly the one docket's own recorder creates."""

from __future__ import annotations

import sqlite3

import pytest

from docket.adapters.service_layer.kernel.ledger import Ledger
from docket.adapters.world.ledger.schema_check import EXPECTED_SCHEMA, check_schema, schema_of
from docket.domain.kernel.errors import VerificationFailed


def test_the_expected_schema_is_what_a_new_ledger_gets(ledger_path):
    Ledger(ledger_path).close()
    with sqlite3.connect(ledger_path) as conn:
        assert schema_of(conn) == EXPECTED_SCHEMA
        check_schema(conn)


def test_a_missing_table_and_an_unexpected_trigger_are_both_named(ledger_path):
    Ledger(ledger_path).close()
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("DROP TABLE tracking")
        conn.execute("CREATE TRIGGER no_deletes BEFORE DELETE ON chain BEGIN SELECT RAISE(ABORT, 'no'); END")
        with pytest.raises(VerificationFailed) as e:
            check_schema(conn)
    assert e.value.code == "schema-mismatch"
    assert "unexpected trigger no_deletes on chain" in e.value.message and "table tracking is missing" in e.value.message
