"""What a reader sees first: the report of 1, 3 and 10 published bundles opened in headless chromium
on a 1400x900 screen, photographed (a PNG each) and measured; prints where the answer's first figure
and its first verdict line sit. Asserts nothing.

    PYTHONPATH=$PWD python benchmarks/report_first_screen.py [--out benchmarks/results] [--name after]

Needs chromium (Debian's; tests/apt-packages.txt) and the checkout's bench on the path: run with
another checkout's bench first on PYTHONPATH (its tests/support/browser.py too) to photograph that
one. Each PNG is reduced to 128 colours (text and flat figures lose nothing a reader sees), a few
hundred KB at most.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLES = REPO / "benchmarks" / "results" / "bundles"
# One quick run on 2x H100; with seed002's (2x H100) and a quick run on 2x H200; every published one.
SETS = {
    1: ["20261125T213922Z-6e20a7.bundle.json"],
    3: ["20261125T213922Z-6e20a7.bundle.json", "20261125T212254Z-56d161.bundle.json", "20261126T162558Z-9ea34b.bundle.json.gz"],
    10: sorted(path.name for path in BUNDLES.glob("*.bundle.json*")),
}


def first_screen(bundles: list[Path], folder: Path):
    """The report of these bundles written into folder, and its first screen as the browser showed it."""
    from tests.support.browser import show  # the checkout on the path first: its own browser helper

    # From the report's folder: `python -m` puts the working folder first on the path, this one holds no bench.
    done = subprocess.run([sys.executable, "-m", "bench", "report", *map(str, bundles), "--out", str(folder)], cwd=folder,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if done.returncode != 0:
        raise SystemExit(f"ddpbench report failed: {done.stderr.strip()}")
    return show(folder / "report.html")


def small_png(png: bytes) -> bytes:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results", help="folder for the PNGs")
    parser.add_argument("--name", default="after", help="the PNGs' suffix: report_first_screen_N_NAME.png")
    args = parser.parse_args()
    print("| bundles | first figure's image: top-bottom px | whole on the first screen | first verdict line at px | PNG |")
    print("|---|---|---|---|---|")
    for count, names in SETS.items():
        with tempfile.TemporaryDirectory() as folder:
            page = first_screen([BUNDLES / name for name in names], Path(folder))
        figure = next((box for box in page.boxes if box["tag"] == "img"), None)  # the figure's image, its caption apart
        verdict = next((box for box in page.boxes if box["tag"] == "li"), None)
        png = args.out / f"report_first_screen_{count}_{args.name}.png"
        png.write_bytes(small_png(page.png))
        where = f"{figure['top']:.0f}-{figure['bottom']:.0f}" if figure else "-"
        whole = "yes" if figure and figure["bottom"] <= page.height else "no"
        print(f"| {count} | {where} | {whole} | {verdict['top']:.0f} | {png.name}, {png.stat().st_size // 1024} KB |")


if __name__ == "__main__":
    main()
