import asyncio
from collections.abc import Callable

from margin.engine.batcher import Batcher


def recording(result_of: Callable[[list[int]], int]):
    """A batch runner that answers each call with `result_of(items)` and keeps every batch it saw."""
    batches: list[list[list[int]]] = []

    def run(calls: list[list[int]]) -> list[int]:
        batches.append(calls)
        return [result_of(items) for items in calls]

    return run, batches


def test_calls_that_arrive_together_share_one_batch_and_get_their_own_results():
    run, batches = recording(sum)

    async def main() -> list[int]:
        batcher: Batcher[int, int] = Batcher(run, max_size=5, max_wait_s=0.5)
        return await asyncio.gather(batcher.submit([1, 2]), batcher.submit([3]), batcher.submit([4, 5, 6]))

    assert asyncio.run(main()) == [3, 3, 15]
    # 2 + 1 items fit in 5; the third call (3 more) would pass 5, so it waits for the next batch.
    assert batches == [[[1, 2], [3]], [[4, 5, 6]]]


def test_a_call_larger_than_the_batch_runs_alone_and_is_not_split():
    run, batches = recording(len)

    async def main() -> list[int]:
        batcher: Batcher[int, int] = Batcher(run, max_size=2, max_wait_s=0.0)
        return await asyncio.gather(batcher.submit([1, 2, 3]), batcher.submit([4]))

    assert asyncio.run(main()) == [3, 1]
    assert batches == [[[1, 2, 3]], [[4]]]


def test_a_lone_call_waits_max_wait_s_for_company_then_runs_alone():
    run, _ = recording(len)

    async def main() -> float:
        batcher: Batcher[int, int] = Batcher(run, max_size=100, max_wait_s=0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await batcher.submit([1])
        return loop.time() - started

    assert 0.045 <= asyncio.run(main()) < 5.0  # a little slack for the clock's resolution


def test_a_runner_that_raises_fails_its_batch_callers_and_the_next_batch_still_runs():
    calls_seen: list[list[list[int]]] = []

    def run(calls: list[list[int]]) -> list[int]:
        calls_seen.append(calls)
        if len(calls_seen) == 1:
            raise ValueError("boom")
        return [len(items) for items in calls]

    async def main() -> tuple[BaseException | int, int]:
        batcher: Batcher[int, int] = Batcher(run, max_size=10, max_wait_s=0.0)
        # wait_for: without the fix the worker dies and these would wait forever
        first = await asyncio.gather(asyncio.wait_for(batcher.submit([1]), 5.0), return_exceptions=True)
        second = await asyncio.wait_for(batcher.submit([1, 2]), 5.0)
        return first[0], second

    failed, answered = asyncio.run(main())
    assert isinstance(failed, ValueError) and str(failed) == "boom"
    assert answered == 2
