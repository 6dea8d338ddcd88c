"""The verdict of a ``veridec check`` run (a decoder's or an engine's) on stdout and in the files asked for."""

from __future__ import annotations

import json

from veridec.files import write_text_atomic


def print_and_write_verdict(args, result) -> None:
    """``result``'s report on stdout; its JSON in ``--json``; both in ``--out`` (check.md, check.json)."""
    report = result.markdown()
    print(report, end="")
    data = json.dumps(result.to_dict(), indent=2, default=str)
    if args.json:
        write_text_atomic(args.json, data)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out / "check.md", report)
        write_text_atomic(args.out / "check.json", data)
