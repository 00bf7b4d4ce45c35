"""report.html in a real browser (headless chromium, a 1400x900 screen): the answer's figure is on
the first screen, before anything a reader would have to scroll past."""

from __future__ import annotations

import struct

from bench.report.answer import TITLE
from tests.support.browser import SCREEN, show


def test_the_answer_is_on_the_first_screen(fleet_report):
    page = show(fleet_report / "report.html")
    (fleet_report / "first-screen.png").write_bytes(page.png)  # for a person to look at when this fails
    assert (page.width, page.height) == SCREEN
    assert page.png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", page.png[16:24]) == SCREEN
    boxes = page.boxes
    heading = next(i for i, box in enumerate(boxes) if box["tag"] == "h2" and box["text"] == TITLE)
    assert [box["tag"] for box in boxes[:heading]] == ["h1"]  # nothing before it but the title
    end = next((i for i, box in enumerate(boxes) if i > heading and box["tag"] == "h2"), len(boxes))
    answer = boxes[heading:end]
    # The answer's figure first, whole on the first screen: the throughput lost per workload and link.
    assert [box["tag"] for box in answer[1:3]] == ["figure", "img"]
    image = answer[2]
    assert image["text"] == "" and answer[1]["text"].startswith("Each point: the share of training throughput")
    for box in (answer[0], image):
        assert 0 <= box["top"] < box["bottom"] <= SCREEN[1], f"not on the first screen: {box}"
        assert 0 <= box["left"] < box["right"] <= SCREEN[0], f"wider than the screen: {box}"
    assert image["bottom"] - image["top"] > 200  # a figure, not a thumbnail
    # Then the lines that say it in words, and the table.
    thresholds = next(box for box in answer if box["tag"] == "p")
    assert "negligible under 5% lost" in thresholds["text"] and thresholds["top"] >= image["bottom"]
    verdicts = [box for box in answer if box["tag"] == "li"]
    assert len(verdicts) == 3  # the CPU host, rig-3090, and rig-4090 (its two transports on one line)
    assert any(box["text"].startswith("rig-4090 · 2x RTX 4090, PCIe 4.0 x4 — tiny fp32, 2 GPUs over default via P2P: severe")
               for box in verdicts)
    rows = [box for box in answer if box["tag"] == "tr"]
    assert len(rows) == 1 + 8  # the header, then 4 series x 2 global batches
