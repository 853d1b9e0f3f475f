"""axe-core (Deque's accessibility engine, the one behind Lighthouse) run inside headless Chromium.

`make axe` installs the pinned npm package into node_modules/ (package.json, package-lock.json);
nothing else of npm is used: its one file, axe.min.js, is evaluated in the page over the DevTools
protocol after MathJax has typeset (support.browser.Chromium.open), so no WebDriver and no browser
download. The rules are WCAG 2.0/2.1 A and AA plus Deque's best practices; a test fails on an
`impact` of "critical" or "serious" and reports the rest.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable

from support import REPO

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
FAILING = ("critical", "serious")


class AxeMissing(RuntimeError):
    pass


@functools.cache
def _source() -> str:
    if not AXE.is_file():
        raise AxeMissing(f"{AXE.relative_to(REPO)} is missing: run `make axe` (npm ci --ignore-scripts)")
    return AXE.read_text(encoding="utf-8")


def probe(disabled: Iterable[str] = ()) -> str:
    """The expression that runs axe on the page and returns its violations as
    [{id, impact, help, count, nodes: ["selector: why", ...]}]. `disabled`: rules not run (each
    named, with why, by the caller)."""
    rules = ", ".join(f'"{rule}": {{enabled: false}}' for rule in disabled)
    return _source() + """
;(async () => {
    // colours are judged once the page's transitions have run (the theme fades its colours in)
    await Promise.all(document.getAnimations().map(animation => animation.finished.catch(() => null)));
    const result = await axe.run(document, {runOnly: {type: "tag", values: %s}, rules: {%s},
                                            resultTypes: ["violations"]});
    return result.violations.map(v => ({
        id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
        nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": "
            + (n.failureSummary || "").replace(/\\s+/g, " ").slice(0, 240))}));
})()""" % (TAGS, rules)


def serious(violations: list[dict]) -> list[dict]:
    return [v for v in violations if v["impact"] in FAILING]


def counts(violations: list[dict]) -> dict[str, int]:
    """{impact: how many elements} over the violations (what the issue's table counts)."""
    out: dict[str, int] = {}
    for v in violations:
        out[v["impact"]] = out.get(v["impact"], 0) + v["count"]
    return out


def describe(where: str, violations: list[dict]) -> str:
    lines = [f"{where}: {len(violations)} critical or serious accessibility violations (axe-core):"]
    for v in violations:
        lines.append(f"- {v['id']} ({v['impact']}, {v['count']} elements): {v['help']}")
        lines += [f"    {node}" for node in v["nodes"]]
    return "\n".join(lines)
