"""Where a matplotlib figure's texts land once drawn, from the renderer's own extents: the tests of
plots that must read (no label over another, none cut off at the figure's edge) use them."""

from __future__ import annotations

from unittest import mock

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text


def drawn_texts(fig) -> list[tuple[str, object]]:
    """(text, window extent) of every non-empty text the figure really draws (tick labels of ticks
    outside the view are not drawn, so not listed): one Agg draw, each Text recorded as it draws."""
    drawn = []
    draw = Text.draw

    def record(text: Text, renderer) -> None:
        draw(text, renderer)
        if text.get_visible() and text.get_text().strip():
            drawn.append((text.get_text(), text.get_window_extent(renderer)))

    with mock.patch.object(Text, "draw", record):
        FigureCanvasAgg(fig).draw()
    return drawn


def overlapping(fig, tolerance_px: float = 0.5) -> list[tuple[str, str]]:
    """The pairs of drawn texts whose boxes overlap by more than tolerance_px each way."""
    texts = drawn_texts(fig)
    pairs = []
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            width = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            height = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if width > tolerance_px and height > tolerance_px:
                pairs.append((a, b))
    return pairs


def cut_off(fig, tolerance_px: float = 1.0) -> list[str]:
    """The drawn texts that reach past the figure's edges."""
    box = fig.bbox
    return [text for text, extent in drawn_texts(fig)
            if extent.x0 < box.x0 - tolerance_px or extent.x1 > box.x1 + tolerance_px
            or extent.y0 < box.y0 - tolerance_px or extent.y1 > box.y1 + tolerance_px]
