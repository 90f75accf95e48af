"""The wire format shared by host and target."""

from __future__ import annotations

from accelopt_core.onsite import protocol


def test_parse_result_line_takes_the_last_sentinel_line():
    text = f'noise\n{protocol.SENTINEL}{{"status": "ok"}}\nmore\n{protocol.SENTINEL}{{"status": "timeout"}}\n'
    assert protocol.parse_result_line(text)["status"] == "timeout"
    assert protocol.parse_result_line("no result here") is None
    assert protocol.parse_result_line(f"{protocol.SENTINEL}{{not json") is None
