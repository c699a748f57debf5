"""What every source-vs-sink comparison reports: counts of missing, extra and different rows, with examples."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VerifyReport:
    rows_compared: int = 0
    missing: int = 0  # in the source, not in the sink
    extra: int = 0  # in the sink, not in the source
    different: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def note(self, text: str, limit: int = 10) -> None:
        if len(self.examples) < limit:
            self.examples.append(text)

    def summary(self) -> str:
        verdict = "no differences" if self.clean else "DIFFERENCES"
        return (f"{verdict}: {self.rows_compared} rows compared, {self.missing} missing from the sink, "
                f"{self.extra} extra in the sink, {self.different} different")  # fmt: skip
