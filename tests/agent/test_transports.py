"""What NCCL really used, read from NCCL_DEBUG=INFO logs captured on a 2x H200 host."""

from __future__ import annotations

import pytest

from bench.common.transports import transport_details_in_log, transport_record, transports_in_log
from tests.conftest import FIXTURES


@pytest.mark.parametrize("preset, used, via", [
    ("default", ["P2P"], ["P2P/CUMEM"]),
    ("p2p_off", ["SHM"], ["SHM/direct/direct"]),
    ("socket", ["NET/Socket"], ["NET/Socket/0"]),
])
def test_parses_each_preset_log(preset, used, via):
    text = (FIXTURES / f"nccl-info-{preset}.log").read_text()
    assert transports_in_log(text) == used
    assert transport_details_in_log(text) == via
    record = transport_record(preset, "nccl", 2, text)
    assert record["matches_preset"] is True and record["nccl_used"] == used


def test_preset_that_did_not_take_effect_is_marked():
    """p2p_off asked, but the channels still went over P2P: a mislabel the bundle must show."""
    text = (FIXTURES / "nccl-info-default.log").read_text()
    assert transport_record("p2p_off", "nccl", 2, text)["matches_preset"] is False
    assert transport_record("socket", "nccl", 2, (FIXTURES / "nccl-info-p2p_off.log").read_text())["matches_preset"] is False


def test_two_ranks_with_no_channel_line_is_not_a_match():
    assert transport_record("default", "nccl", 2, "NCCL INFO Bootstrap : Using eth0")["matches_preset"] is False
    assert transport_record("default", "nccl", 1, "")["matches_preset"] is True
