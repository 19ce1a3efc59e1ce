"""Sphinx directives that write reference tables (and the schedules' pictures) from the code
itself, at build time.

A page that lists the metrics, the alerts or the exit codes by hand drifts from them; these
directives render each from the one place it is defined (`fivespot/runtime/metrics.py` and
`fivespot/webhook/metrics.py`, `fivespot/compiler/emit/monitoring.py`, `fivespot/commandline/exitcodes.py`), so the site
always describes the fivespot it was built from. The tables are written as MyST Markdown and
parsed in place, so they link and render like the hand-written pages around them.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Iterator

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _metric_families() -> Iterator[tuple[str, str, str, tuple[str, ...], str]]:
    """(exposed name, type, help, label names, defined in) of every fivespot metric."""
    from prometheus_client.metrics import MetricWrapperBase

    import fivespot.runtime.metrics
    from fivespot.webhook.metrics import Metrics

    sources: list[tuple[str, list[Any]]] = [
        ("fivespot/runtime/metrics.py", [v for v in vars(fivespot.runtime.metrics).values()
                                if isinstance(v, MetricWrapperBase)]),
        ("fivespot/webhook/metrics.py", [v for v in vars(Metrics()).values()
                                if isinstance(v, MetricWrapperBase)]),
    ]
    suffix = {"counter": "_total", "histogram": "", "gauge": "", "summary": ""}
    for where, metrics in sources:
        for metric in metrics:
            family = metric.describe()[0]
            labels: tuple[str, ...] = metric._labelnames  # prometheus_client has no public name
            yield (family.name + suffix[family.type], family.type, family.documentation, labels,
                   where)


class _MarkdownDirective(SphinxDirective):
    """A directive whose output is MyST Markdown written from the code, parsed in place."""

    def _markdown(self, lines: list[str]) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]),
                                self.content_offset, container)
        return list(container.children)


class Metrics(_MarkdownDirective):
    """Every metric fivespot's processes export: name, type, labels, meaning."""

    def run(self) -> list[nodes.Node]:
        lines = ["| metric | type | labels | meaning | defined in |", "|---|---|---|---|---|"]
        for name, kind, help_text, labels, where in sorted(_metric_families()):
            shown = ", ".join(f"`{label}`" for label in labels) or "—"
            lines.append(f"| `{name}` | {kind} | {shown} | {_cell(help_text)} | `{where}` |")
        return self._markdown(lines)


class Alerts(_MarkdownDirective):
    """Every alert of the PrometheusRule: severity, how long, the expression, its runbook page."""

    def run(self) -> list[nodes.Node]:
        from fivespot.compiler.emit.monitoring import EVERY_ALERT

        lines = ["| alert | severity | for | fires on | runbook |", "|---|---|---|---|---|"]
        for alert in EVERY_ALERT:
            page = f"../operations/alerts/{alert.name.lower()}.md"
            lines.append(f"| {alert.name} | {alert.severity} | {alert.for_} | `{_cell(alert.expr)}` "
                         f"| [{alert.name}]({page}) |")
        return self._markdown(lines)


class Alert(_MarkdownDirective):
    """One alert as the PrometheusRule carries it, at the top of its runbook page."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from fivespot.compiler.emit.monitoring import EVERY_ALERT

        found = [a for a in EVERY_ALERT if a.name == self.arguments[0]]
        if not found:
            raise self.error(f"no alert {self.arguments[0]!r} in fivespot/compiler/emit/monitoring.py")
        alert = found[0]
        lines = [
            f"**{alert.summary}.** Severity `{alert.severity}`, fires after `{alert.for_}` of:",
            "", "```promql", alert.expr, "```", "",
            f"Description, as Prometheus fills it in: {alert.description}",
        ]
        return self._markdown(lines)


class ExitCodes(_MarkdownDirective):
    """The exit codes as `fivespot/commandline/exitcodes.py` defines and explains them."""

    def run(self) -> list[nodes.Node]:
        from fivespot.commandline import exitcodes

        lines = ["| code | name | meaning |", "|---|---|---|"]
        docs = _attribute_docs(inspect.getsource(exitcodes))
        names = {value: name for name, value in vars(exitcodes).items()
                 if name.isupper() and isinstance(value, int)}
        for code in exitcodes.ALL:
            lines.append(f"| {code} | `{names[code]}` | {_cell(docs[names[code]])} |")
        return self._markdown(lines)


def _attribute_docs(source: str) -> dict[str, str]:
    """The docstring under each `NAME: Final = value` line of a module."""
    import ast

    found: dict[str, str] = {}
    body = ast.parse(source).body
    for statement, following in zip(body, body[1:]):
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            found[statement.target.id] = " ".join(following.value.value.split())
    return found


class Layers(SphinxDirective):
    """The package layers as `.importlinter` enforces them, drawn as an SVG: one row per layer,
    top to bottom, each importing only the rows below it; packages on a row are independent."""

    def run(self) -> list[nodes.Node]:
        import configparser
        from html import escape

        config = configparser.ConfigParser()
        config.read(ROOT / ".importlinter")
        rows = [[name.strip() for name in line.split("|")]
                for line in config["importlinter:contract:layers"]["layers"].split("\n") if line.strip()]
        width, row_h, gap, box_w = 760, 44, 26, 150
        height = len(rows) * (row_h + gap) - gap + 2
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
                 f'role="img" aria-label="fivespot\'s package layers" style="max-width:{width}px">']
        for index, row in enumerate(rows):
            y = 1 + index * (row_h + gap)
            step = width / len(row)
            for column, package in enumerate(row):
                x = step * column + (step - box_w) / 2
                parts.append(f'<rect x="{x:.0f}" y="{y}" width="{box_w}" height="{row_h}" rx="6" '
                             'fill="#eef3fb" stroke="#3d5a80"/>')
                parts.append(f'<text x="{x + box_w / 2:.0f}" y="{y + row_h / 2 + 5}" '
                             'text-anchor="middle" font-family="monospace" font-size="15" '
                             f'fill="#1b263b">{escape(package.removeprefix("fivespot."))}/</text>')
            if index < len(rows) - 1:
                mid, top = width / 2, y + row_h
                parts.append(f'<path d="M{mid} {top + 3} L{mid} {top + gap - 5}" stroke="#3d5a80" '
                             'stroke-width="2"/>')
                parts.append(f'<path d="M{mid - 6} {top + gap - 11} L{mid} {top + gap - 3} '
                             f'L{mid + 6} {top + gap - 11}" fill="none" stroke="#3d5a80" '
                             'stroke-width="2"/>')
        parts.append("</svg>")
        return [nodes.raw("", "".join(parts), format="html")]


class SchedulePicture(SphinxDirective):
    """`fivespot schedule preview ARGS -o svg`, run at build time and embedded: the week's picture
    of the given objects, always the one the code draws today. Relative paths are the
    repository's; the command is printed under the picture."""

    required_arguments = 1
    final_argument_whitespace = True

    def run(self) -> list[nodes.Node]:
        import shlex
        from html import escape

        from fivespot.cli import picture
        from fivespot.cli.main import full_parser
        from fivespot.cli.preview import BadPreview, build

        words = shlex.split(self.arguments[0])
        resolved = [str(ROOT / w) if not w.startswith("-") and (ROOT / w).exists() else w
                    for w in words]
        args = full_parser().parse_args(["schedule", "preview", *resolved, "-o", "svg"])
        try:
            report = build(args)
        except BadPreview as bad:
            raise self.error(f"fivespot schedule preview {' '.join(words)}: {bad}") from None
        serial = self.env.new_serialno("fivespot-schedule-picture")
        drawn = picture.svg(report, args.timezone or picture.shared_zone(report),
                            prefix=f"fivespot-week-{serial}")
        command = f"fivespot schedule preview {' '.join(words)} -o svg"
        return [nodes.raw("", f'<figure class="fivespot-schedule-picture">{drawn}<figcaption>'
                              f"<code>{escape(command)}</code></figcaption></figure>",
                          format="html")]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("fivespot-schedule-picture", SchedulePicture)
    app.add_directive("fivespot-layers", Layers)
    app.add_directive("fivespot-metrics", Metrics)
    app.add_directive("fivespot-alerts", Alerts)
    app.add_directive("fivespot-alert", Alert)
    app.add_directive("fivespot-exit-codes", ExitCodes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
