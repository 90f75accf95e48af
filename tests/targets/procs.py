"""Process helpers of the target tests."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """Live (non-zombie) child processes of ``pid``, from the parent links in /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out
