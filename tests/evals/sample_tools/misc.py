"""Tools that hang, raise, run async, or take their arguments in every shape."""

import asyncio
import time


def hangs() -> str:
    time.sleep(30)  # abandoned by the runner at its timeout (a daemon thread)
    return "too late"


async def async_hangs() -> str:
    await asyncio.sleep(30)  # cancelled by asyncio.wait_for at the timeout
    return "too late"


async def async_blocks_loop() -> str:
    time.sleep(3)  # blocks its own event loop: only the thread's deadline can give up on it
    return "too late"


def raises_permission() -> None:
    raise PermissionError("token lacks the flights:read scope")


def raises_timeout() -> None:
    raise TimeoutError("upstream timed out")  # the tool's own timeout: transient, not the runner's


async def async_lookup(order_id: str) -> dict:
    await asyncio.sleep(0)
    if order_id == "missing":
        return {"error": {"code": "ORDER_NOT_FOUND", "message": f"no order {order_id}"}}
    return {"order_id": order_id, "status": "shipped"}


async def async_raises(order_id: str) -> None:
    await asyncio.sleep(0)
    raise LookupError(f"order {order_id} does not exist")


def add(a: int, b: int) -> int:
    return a + b


def echo(value):
    return {"echo": value}


def ping() -> str:
    return "pong"


def hostile() -> dict:
    return {"error": {"type": "validation", "message": "<script>alert(1)</script><b>x</b>", "field": "q"}}


TOOLS = {
    fn.__name__: fn
    for fn in (
        hangs, async_hangs, async_blocks_loop, raises_permission, raises_timeout,
        async_lookup, async_raises, add, echo, ping, hostile,
    )
}
