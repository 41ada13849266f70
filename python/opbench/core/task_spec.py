"""TaskSpec: what a Timer measures, the code and the labels that group results.

It mirrors ``torch.utils.benchmark``'s class of the same name (same fields, same
text, same equality), so code written for torch reads opbench's unchanged; a
``Measurement`` (``opbench.core.measurement``) holds one.
"""
from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

__all__ = ["TaskSpec"]


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures: the code and the labels that group results.

    torch's eight fields, plus ``name``: the benchmark's name in results files
    and regression gates, given by the user (``Timer(name=...)``) or, for a
    callable timed without labels, its module-qualified name; and ``flops`` /
    ``bytes``: the work of one run when declared (``Timer(flops=...)``; see
    ``opbench.core.throughput``). None of these is in the text or the key.

    Example:
        >>> TaskSpec(stmt="x + 1", setup="x = 1", label="add").title
        'add'
        >>> TaskSpec("sorted(xs)", "pass", label="sort", description="v2", num_threads=4).key
        'sort | v2 | 4 threads'
    """

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1
    name: str | None = None
    flops: float | None = None
    bytes: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, ``flops`` / ``bytes`` only when declared: what results
        files and sweep keys hold, unchanged for a TaskSpec without work."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if v is not None or k not in ("flops", "bytes")}

    @property
    def key(self) -> str:
        """The benchmark's identity across runs, which a regression gate matches on.

        The first of: ``name``; the Compare coordinates (label, sub_label,
        description) when any of them is set; the statement. Then the thread
        count (when not 1) and the env (when set): the same code under other
        conditions is another benchmark. A result's key adds its clock
        (``opbench.core.identity.key``).
        """
        from opbench.core.identity import spec_key

        return spec_key(self)

    @property
    def title(self) -> str:
        """Best-effort one-line name: the label, else the statement."""
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return (
            f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n"
            f"{textwrap.indent(self.stmt, '  ')}"
        )

    def setup_str(self) -> str:
        if self.setup == "pass" or not self.setup:
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The TaskSpec part of a result's text."""
        sections = [self.title, self.description or "", self.setup_str()]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections if s)
