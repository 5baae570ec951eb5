"""Alembic's environment for the cases store: run on the connection :func:`cases.store.migrate`
hands over (``config.attributes["connection"]``), never on a URL of its own."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
