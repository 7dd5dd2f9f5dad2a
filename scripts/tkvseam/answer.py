"""What a command answers: the lines a terminal shows, or the one JSON object ``--json`` prints.

A use case returns a result that renders itself (a subclass of ``Answer``); the CLI prints
it with ``cli.options.emit`` and writes no text of its own:

- ``lines()``: the answer on stdout (text mode);
- ``notes()``: lines for stderr in text mode (problems, a failed step), which the JSON
  object holds too;
- ``to_json()``: the one JSON object (plain types only: enums as their values, paths as text);
- ``exit_code()``: 0, or the documented code the answer ends with (lint problems 6, a newer
  release 11, ...), never an error: errors are raised (``errors.SeamError``);
- ``success()``: what the JSON object's ``ok`` says when ``to_json`` does not (every object the
  CLI prints has ``ok``: ``cli.options.emit`` adds it): the exit code is 0, by default.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import PurePath


def plain(value: object) -> object:
    """``value`` with every enum, path, tuple and dataclass made JSON's own types."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


class Answer:
    """A result that renders itself (see the module docstring); the defaults suit a dataclass."""

    def lines(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} renders no lines")

    def notes(self) -> list[str]:
        return []

    def to_json(self) -> dict:
        data = plain(self)
        assert isinstance(data, dict), f"{type(self).__name__}.to_json must be an object"
        return data

    def exit_code(self) -> int:
        return 0

    def success(self) -> bool:
        """The command did what was asked and found nothing wrong (JSON ``ok``)."""
        return self.exit_code() == 0
