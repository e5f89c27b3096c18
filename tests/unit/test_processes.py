"""io.processes outside a launcher, and the process group's release at exit."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from rewardsmith.io import processes as procs


def test_a_command_that_was_not_launched_is_one_main_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in procs._WORLD_SIZE_VARS:
        monkeypatch.delenv(name, raising=False)
    assert procs.launched_processes() == 1
    here = procs.processes()
    assert (here.index, here.count, here.main, here.several) == (0, 1, True, False)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    assert procs.launched_processes() == 3


def test_release_destroys_the_process_group_and_is_a_no_op_without_one() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    assert dist.is_initialized()
    procs.release()
    assert not dist.is_initialized()
    procs.release()  # nothing up: no error


def test_the_release_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    registered = []
    monkeypatch.setattr(procs, "_release_registered", False)
    monkeypatch.setattr(procs.atexit, "register", registered.append)
    procs.release_at_exit()
    procs.release_at_exit()
    assert registered == [procs.release]
