"""Re-execute notebooks in place with their outputs (`make notebooks`), each in a fresh kernel with
notebooks/ as the working directory, and stamp the closing provenance cell: the commit, the date and
the data source the first code cell printed.

    python notebooks/execute.py                 # every notebook
    python notebooks/execute.py 3_batch_size_and_lr
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent
TAG = "provenance"


def source_line(nb) -> str:
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            for line in out.get("text", "").splitlines():
                if line.startswith("source:"):
                    return line[len("source:") :].strip()
    return "unknown (the first code cell printed no source line)"


def stamp(nb) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
    ).stdout.strip()
    # the notebooks' own outputs do not count: executing one leaves it modified
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)notebooks/*.ipynb"],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
    )
    text = (
        f"*Outputs above: executed by `make notebooks` on {datetime.date.today().isoformat()} at commit "
        f"`{commit or 'unknown'}`{' (with uncommitted changes)' if dirty.stdout.strip() else ''}, "
        f"on {source_line(nb)}.*"
    )
    cells = [c for c in nb.cells if TAG in c.get("metadata", {}).get("tags", [])]
    if cells:
        cells[0].source = text
    else:
        nb.cells.append(nbformat.v4.new_markdown_cell(text, metadata={"tags": [TAG]}))


def execute(path: Path, timeout: int = 1800) -> None:
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}
    ).execute()
    stamp(nb)
    nbformat.write(nb, path)


def main(names: list[str]) -> int:
    paths = [HERE / f"{n.removesuffix('.ipynb')}.ipynb" for n in names] or sorted(HERE.glob("[0-9]_*.ipynb"))
    for p in paths:
        print(f"executing {p.name}", flush=True)
        execute(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
