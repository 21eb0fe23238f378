"""A SQLAlchemy 2 application whose order row and its confirmation task commit together.

    python examples/sqlalchemy_app.py [URL]

URL is a jobtrail URL (``sqlite:///shop.db`` or ``postgresql://...``; default
``sqlite:///sqlalchemy_example.db``). The order and the task are written in one ``Session``
transaction: a rollback leaves neither, a commit leaves both, and a worker then runs the task.
"""

from __future__ import annotations

import sys

from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import jobtrail

URL = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///sqlalchemy_example.db"
app = jobtrail.App(URL)


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "example_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str]
    confirmed: Mapped[bool] = mapped_column(default=False)


def engine_url(url: str) -> str:
    """The SQLAlchemy URL of a jobtrail URL (psycopg 3 for PostgreSQL)."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


engine = create_engine(engine_url(URL))


@app.task("confirm_order")
def confirm_order(ctx: jobtrail.Context, payload: dict[str, int]) -> None:
    with Session(engine) as session, session.begin():
        order = session.get(Order, payload["order_id"])
        assert order is not None, "the order commits with the task"
        order.confirmed = True


def place_order(item: str, *, fail: bool = False) -> str | None:
    """Save the order and enqueue its confirmation in one transaction."""
    with Session(engine) as session:
        order = Order(item=item)
        session.add(order)
        session.flush()  # the order's id, inside the transaction
        task = app.enqueue("confirm_order", {"order_id": order.id}, connection=session)
        if fail:
            session.rollback()
            return None
        session.commit()
        return task.id


def main() -> None:
    app.migrate()
    Base.metadata.create_all(engine)
    place_order("umbrella", fail=True)
    task_id = place_order("teapot")
    assert task_id is not None
    print(f"enqueued task {task_id} with order 'teapot' (and rolled back 'umbrella')")
    app.run_worker(burst=True, concurrency=1)
    with Session(engine) as session:
        orders = {o.item: o.confirmed for o in session.query(Order).all()}
    print(f"orders: {orders}")
    print(f"task {task_id}: {app.get(task_id).state.value}")
    print(app.explain(task_id))
    app.close()
    engine.dispose()


if __name__ == "__main__":
    main()
