"""The queue page's activity chart: arrivals as bars and completions as a line per time bucket,
large enough to read, with a labelled time axis (minutes before now) and count axis. A
server-rendered SVG with a text alternative (``role="img"`` and its label) and a tooltip per
bucket."""

from __future__ import annotations

from html import escape

from ...model import i18n

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 44


def activity_chart(
    arrivals: list[int], completions: list[int], bucket_seconds: float, lang: str, name: str
) -> str:
    n = max(1, len(arrivals))
    top = max([1, *arrivals, *completions])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / n
    base = TOP + plot_h
    minutes = bucket_seconds / 60

    def y(v: int) -> float:
        return base - v / top * plot_h

    label = i18n.t(
        "chart.label", lang, queue=name, arrived=sum(arrivals), finished=sum(completions),
        minutes=f"{n * minutes:g}",
    )  # fmt: skip
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="{escape(label)}">'
    ]
    for frac in (0.0, 0.5, 1.0):  # the count axis
        v = top * frac
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(int(v)) if frac else base:.1f}" '
            f'y2="{y(int(v)) if frac else base:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{base - frac * plot_h + 4:.1f}" text-anchor="end" '
            f'class="tick">{v:g}</text>'
        )
    for i, a in enumerate(arrivals):
        done = completions[i] if i < len(completions) else 0
        ago = (n - i) * minutes
        tip = i18n.t("chart.bucket", lang, ago=f"{ago:g}", arrived=a, finished=done)
        out.append(
            f'<rect x="{LEFT + i * step + 1:.1f}" y="{y(a):.1f}" width="{max(1.0, step - 2):.1f}" '
            f'height="{base - y(a):.1f}" class="arr"><title>{escape(tip)}</title></rect>'
        )
    points = " ".join(
        f"{LEFT + i * step + step / 2:.1f},{y(c):.1f}" for i, c in enumerate(completions)
    )
    out.append(f'<polyline points="{points}" class="done" fill="none"/>')
    ticks = min(n, 6)
    for k in range(ticks + 1):  # the time axis: minutes before now
        i = round(k * n / ticks)
        x = LEFT + i * step
        ago = (n - i) * minutes
        text = i18n.t("chart.now", lang) if ago == 0 else f"−{ago:g} min"
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" class="axis"/>'
            f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle" class="tick">'
            f"{escape(text)}</text>"
        )
    legend = i18n.t("chart.legend", lang, minutes=f"{minutes:g}")
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle" class="tick">'
        f"{escape(legend)}</text></svg>"
    )
    return "".join(out)
