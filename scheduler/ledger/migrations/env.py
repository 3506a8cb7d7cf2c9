"""Alembic's entry for the ledger: migrations run on the connection sluice hands over.

sluice runs them itself (:func:`scheduler.ledger.migrate.upgrade`) on a
connection that holds the upgrade lock, inside one transaction: its
``config.attributes["connection"]``. A developer writing a migration can run
``alembic -c scheduler/ledger/migrations/alembic.ini -x url=URL upgrade head``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from scheduler.ledger.migrate import VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:  # the alembic command line, for developers
    url = context.get_x_argument(as_dictionary=True)["url"]
    with sa.create_engine(url).begin() as connection:
        context.configure(connection=connection, version_table=VERSION_TABLE)
        context.run_migrations()
else:
    context.configure(connection=connection, version_table=VERSION_TABLE)
    with context.begin_transaction():  # joins the caller's transaction
        context.run_migrations()
