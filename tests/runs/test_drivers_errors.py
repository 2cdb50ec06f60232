"""Several drivers, one endpoint that goes down: a driver that starts once it is down is refused
at its first call and takes it for an endpoint never there (exit 2, no resume), while a driver
answered before knows it went down (exit 1, the resume command). The run says the latter,
whichever driver finished first."""

from __future__ import annotations

import pytest

from margin.errors import EndpointDown, EndpointUnreachable, InputError
from margin.runs.executing.drivers import _wait

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


class FakeDriver:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def progress(self) -> tuple[int, int]:
        return (0, 0)

    def run(self) -> dict:
        if self.error is not None:
            raise self.error
        return {"done": True}


def wait_for(errors: list[Exception | None]) -> list[dict]:
    import ray

    handles = [ray.remote(FakeDriver).options(num_cpus=0).remote(e) for e in errors]
    return _wait([h.run.remote() for h in handles], handles, lambda *_: None)


def test_the_driver_that_saw_the_endpoint_go_down_speaks_for_the_run():
    down = EndpointDown("http://127.0.0.1:9/v1", 0.0, ["connection refused x3"], 2.0)
    for order in ([EndpointUnreachable("refused at start"), down], [down, EndpointUnreachable("refused at start")]):
        with pytest.raises(EndpointDown):
            wait_for(order)


def test_a_drivers_own_input_error_is_raised_as_it_is_and_reports_come_back_without_one():
    with pytest.raises(InputError, match="bad"):
        wait_for([None, InputError("bad")])
    assert wait_for([None, None]) == [{"done": True}, {"done": True}]
