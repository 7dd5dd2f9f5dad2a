"""What a queue replaces in vLLM: the ``vllm/`` files its patches touch (the overlay set)."""

from __future__ import annotations

from ..errors import SeamError
from .patch import ChangeKind, Patch

PACKAGE_PREFIX = "vllm/"


def overlay_paths(patches: list[Patch]) -> list[str]:
    """The vllm/ files the series touches (sorted): the image and venv overlay set."""
    paths = set()
    for patch in patches:
        for fc in patch.files:
            for p in (fc.old, fc.new):
                if p and p.startswith(PACKAGE_PREFIX):
                    if fc.kind != ChangeKind.MODIFY:
                        raise SeamError(
                            f"{patch.name}: {p}: the overlay replaces existing files only "
                            f"({fc.kind} of a vllm/ file cannot be overlaid)"
                        )
                    paths.add(p)
    return sorted(paths)
