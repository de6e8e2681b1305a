"""Alembic environment: the URL comes from the caller (``quire hub init|migrate``)."""

from alembic import context

from hub.store.db import make_engine
from hub.store.schema import metadata

config = context.config
_url = config.get_main_option("sqlalchemy.url")
if _url is None:  # hub/store/migrate.py always sets it
    raise RuntimeError("sqlalchemy.url is not set: run migrations with 'quire hub migrate'")
url: str = _url


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=metadata, literal_binds=True,
                      render_as_batch=url.startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(url, pool_size=1)
    with engine.connect().execution_options(quire_txn="write") as connection:
        context.configure(connection=connection, target_metadata=metadata,
                          render_as_batch=url.startswith("sqlite"))
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
