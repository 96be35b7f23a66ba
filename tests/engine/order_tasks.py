"""The worked example of docs/workflows.md ("A worked example: an order pipeline"), as
written there but for ``sent``: the file each mail is recorded in (a test's outbox)."""

from __future__ import annotations

from pathlib import Path

from later_django.compat.tasks import task
from later_django.workflow import Workflow

WAREHOUSES = ("north", "south", "east")
#: (warehouse, order) pairs out of stock: the failure the tests cause and then mend.
OUT_OF_STOCK: set[tuple[str, int]] = set()


@task
def charge_card(order_id: int) -> dict[str, str]:
    return {"charge": f"ch_{order_id}"}


@task
def reserve_stock(warehouse: str, order_id: int) -> dict[str, str]:
    if (warehouse, order_id) in OUT_OF_STOCK:
        raise LookupError(f"{warehouse} is out of stock")
    return {"hold": f"{warehouse}-{order_id}"}


@task(takes_context=True)
def create_shipment(context, order_id: int) -> dict[str, object]:
    holds = [result["hold"] for result in context.parent_results.values()]
    return {"shipment": f"sh_{order_id}", "holds": holds}


@task(takes_context=True)
def mail_tracking(context, order_id: int, sent: str) -> None:
    [shipment] = context.parent_results.values()
    with Path(sent).open("a") as outbox:
        outbox.write(f"order {order_id}: your parcel is {shipment['shipment']}\n")


def place_order(order_id: int, sent: str) -> Workflow:
    flow = Workflow(f"order {order_id}")
    flow.add("charge", charge_card, order_id)
    for house in WAREHOUSES:
        flow.add(f"reserve-{house}", reserve_stock, house, order_id, after=["charge"])
    flow.add("ship", create_shipment, order_id, after=[f"reserve-{h}" for h in WAREHOUSES])
    flow.add("mail", mail_tracking, order_id, sent, after=["ship"])
    flow.enqueue()
    return flow
