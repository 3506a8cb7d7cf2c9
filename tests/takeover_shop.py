"""A small shop whose application relies on its schema, for the takeover tests.

``customers``: a generated key (``bigserial``; MariaDB ``AUTO_INCREMENT``), a
unique email, a check on its length, defaults, an index on the name. ``orders``:
an identity key (``AUTO_INCREMENT``), a foreign key to ``customers`` that
cascades deletes, defaults, a check, a two-column and a partial index, a
column stamped on every change (a trigger; MariaDB's ``ON UPDATE
CURRENT_TIMESTAMP``), a comment. Some rows are deleted after they were
inserted, so that each sequence stands past the largest key left.

:func:`application` is what the application does first on the database it is
switched to; its outcomes (values it read back, or the kind of refusal) are
compared between the source and the target: a target that takes over answers
as its source did.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

PG = [
    "CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE, name text,"
    " total numeric(12,2) NOT NULL DEFAULT 0, status text NOT NULL DEFAULT 'new',"
    " CONSTRAINT customers_email_check CHECK (char_length(email) >= 5))",
    "CREATE INDEX customers_name_idx ON customers (lower(name))",
    "CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " customer_id bigint NOT NULL REFERENCES customers (id) ON DELETE CASCADE,"
    " placed_at timestamptz NOT NULL DEFAULT now(),"
    " amount numeric(10,2) NOT NULL DEFAULT 0 CONSTRAINT orders_amount_check CHECK (amount >= 0),"
    " state text DEFAULT 'open', changed_at timestamptz)",
    "CREATE INDEX orders_customer_placed_idx ON orders (customer_id, placed_at DESC)",
    "CREATE INDEX orders_open_idx ON orders (state) WHERE state = 'open'",
    "COMMENT ON TABLE orders IS 'what customers bought'",
    "CREATE FUNCTION orders_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " NEW.changed_at := now(); RETURN NEW; END $$",
    "CREATE TRIGGER orders_changed BEFORE UPDATE ON orders FOR EACH ROW"
    " EXECUTE FUNCTION orders_changed()",
]
MARIADB = [
    "CREATE TABLE customers (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,"
    " email varchar(120) NOT NULL, name varchar(100), total decimal(12,2) NOT NULL DEFAULT 0,"
    " status varchar(20) NOT NULL DEFAULT 'new', UNIQUE KEY customers_email_key (email),"
    " KEY customers_name_idx (name),"
    " CONSTRAINT customers_email_check CHECK (char_length(email) >= 5))",
    "CREATE TABLE orders (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,"
    " customer_id bigint NOT NULL, placed_at datetime(6) NOT NULL DEFAULT current_timestamp(6),"
    " amount decimal(10,2) NOT NULL DEFAULT 0, state varchar(20) DEFAULT 'open',"
    " changed_at timestamp(6) NULL DEFAULT NULL ON UPDATE current_timestamp(6),"
    " KEY orders_customer_placed_idx (customer_id, placed_at DESC),"
    " KEY orders_state_idx (state),"
    " CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)"
    " ON DELETE CASCADE, CONSTRAINT orders_amount_check CHECK (amount >= 0))"
    " COMMENT 'what customers bought'",
]
CUSTOMERS, ORDERS = 40, 90


def create(url: str, rows: bool = True) -> None:
    """The shop at ``url``, with its rows (some deleted: the sequences are ahead)."""
    engine = sa.create_engine(url)
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for statement in PG if pg else MARIADB:
            conn.exec_driver_sql(statement)
        if rows:
            for i in range(1, CUSTOMERS + 1):
                row = {"e": f"c{i}@shop.example", "n": f"Kunde {i}", "t": i * 1.5}
                conn.execute(sa.text("INSERT INTO customers (email, name, total) VALUES "
                                     "(:e, :n, :t)"), row)  # fmt: skip
            for i in range(1, ORDERS + 1):
                conn.execute(sa.text("INSERT INTO orders (customer_id, amount) VALUES (:c, :a)"),
                             {"c": 1 + i % (CUSTOMERS - 5), "a": i})  # fmt: skip
            # The last rows go: each sequence stands past the largest key that is left.
            conn.execute(sa.text("DELETE FROM orders WHERE id > :n"), {"n": ORDERS - 4})
            conn.execute(sa.text("DELETE FROM customers WHERE id > :n"), {"n": CUSTOMERS - 3})
    engine.dispose()


def application(url: str) -> list[Any]:
    """The application's first writes on ``url``; each one's outcome: what it read back, or
    the kind of refusal (``unique``, ``foreign key``, ``check``)."""
    engine = sa.create_engine(url)
    outcomes: list[Any] = []
    try:
        # The inserts that succeed first: a refused insert takes a number from a PostgreSQL
        # sequence, and from MariaDB's counter only where the row got that far.
        customer = _write(engine, outcomes, "INSERT INTO customers (email, name) VALUES "
                          "('new@shop.example', 'Neu')", "customers")  # fmt: skip
        order = _write(engine, outcomes, f"INSERT INTO orders (customer_id) VALUES ({customer})",
                       "orders")  # fmt: skip
        _write(engine, outcomes, "INSERT INTO customers (email) VALUES ('c1@shop.example')")
        _write(engine, outcomes, "INSERT INTO orders (customer_id) VALUES (999999)")
        _write(engine, outcomes, "INSERT INTO customers (email) VALUES ('a@b')")
        _write(engine, outcomes, "INSERT INTO orders (customer_id, amount) VALUES (1, -1)")
        with engine.begin() as conn:
            row = conn.execute(sa.text(
                "SELECT total, status FROM customers WHERE id = :i"), {"i": customer}).one()
            outcomes.append(("customer defaults", str(row.total), row.status))
            row = conn.execute(sa.text("SELECT placed_at IS NOT NULL AS placed, amount, state, "
                                       "changed_at FROM orders WHERE id = :i"), {"i": order}).one()
            outcomes.append(("order defaults", bool(row.placed), str(row.amount), row.state,
                             row.changed_at))  # fmt: skip
            conn.execute(sa.text("UPDATE orders SET amount = 7 WHERE id = :i"), {"i": order})
            stamped = conn.execute(sa.text(
                "SELECT changed_at IS NOT NULL FROM orders WHERE id = :i"), {"i": order}).scalar()
            outcomes.append(("stamped on update", bool(stamped)))
            conn.execute(sa.text("DELETE FROM customers WHERE id = :i"), {"i": customer})
            left = conn.execute(sa.text(
                "SELECT count(*) FROM orders WHERE customer_id = :i"), {"i": customer}).scalar()
            outcomes.append(("orders left after their customer", left))
    finally:
        engine.dispose()
    return outcomes


def _write(engine: sa.Engine, outcomes: list[Any], sql: str, table: str | None = None) -> Any:
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
            new = None
            if table is not None:
                last = "lastval()" if engine.dialect.name == "postgresql" else "LAST_INSERT_ID()"
                new = conn.exec_driver_sql(f"SELECT {last}").scalar()
        outcomes.append(("ok", sql, new))
        return new
    except sa.exc.DBAPIError as error:
        outcomes.append((_refusal(error), sql))
        return None


def _refusal(error: sa.exc.DBAPIError) -> str:
    orig = error.orig
    args = getattr(orig, "args", ())
    code = args[0] if args and isinstance(args[0], int) else getattr(orig, "sqlstate", None)
    kinds = {"23505": "unique", 1062: "unique", "23503": "foreign key", 1452: "foreign key",
             "23514": "check", 4025: "check", 3819: "check", "23502": "not null", 1048: "not null"}
    return kinds.get(code, f"error {code}")
