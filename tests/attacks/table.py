"""The attack suites' probe table: every probe tried is a row (probe, expected, observed, held),
printed as a table (run pytest with ``-s`` to see it) and asserted held, all of them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProbeTable:
    """Rows of one suite; :meth:`check` prints the table and fails on any row not held."""

    title: str
    rows: list[tuple[str, str, str, bool]] = field(default_factory=list)

    def add(self, probe: str, expected: str, observed: str, held: bool) -> None:
        self.rows.append((probe, expected, observed, held))

    def render(self) -> str:
        width = max([len(r[0]) for r in self.rows] + [5])
        lines = [f"== {self.title}: {sum(r[3] for r in self.rows)}/{len(self.rows)} held =="]
        for probe, expected, observed, held in self.rows:
            mark = "held" if held else "BROKEN"
            lines.append(f"{probe:<{width}}  expected {expected:<22} "
                         f"observed {observed:<22} {mark}")
        return "\n".join(lines)

    def check(self) -> None:
        print("\n" + self.render())
        broken = [r for r in self.rows if not r[3]]
        assert self.rows, f"{self.title}: no probe was tried"
        assert not broken, f"{self.title}: probes not held: {broken}"
