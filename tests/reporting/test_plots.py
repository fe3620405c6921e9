"""The report's figures: one colour per ranking in every figure, the default highlighted, at
most eight rankings, references as grey lines, legends that fit, intervals."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex, to_rgb

from primsel.reporting import write_report
from primsel.retrieval import DEFAULT_RETRIEVER

DEFAULT = "hybrid(classifier+finetuned+bm25+dense, method=wsum, weights=1+1+0.15+0.15)"


def cielab(colour) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a colour (the CIE formulas)."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    x = (0.4124 * linear[0] + 0.3576 * linear[1] + 0.1805 * linear[2]) / 0.95047
    y = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    z = (0.0193 * linear[0] + 0.1192 * linear[1] + 0.9505 * linear[2]) / 1.08883
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def legend_of(figure) -> dict[str, str]:
    """Legend label (line breaks as spaces) -> colour of its handle."""
    (ax,) = figure.axes
    legend = ax.get_legend()
    return {t.get_text().replace("\n", " "): to_hex(h.get_color())
            for t, h in zip(legend.get_texts(), legend.legend_handles)}


@pytest.fixture()
def many(make_run):
    names = ["oracle", "random", "bm25", "tfidf", "dense", "prior", "knn", "expansion", "classifier",
             {"type": "hybrid", "members": ["bm25", "dense"]},
             {"type": "hybrid", "method": "wsum", "members": ["classifier", "bm25", "dense"], "weights": [1.0, 0.15, 0.15]},
             DEFAULT_RETRIEVER]
    cells = [{"cid": f"c{i}", "retriever": name, "k": k, "recall15": (0.05 * i, 0.05 * i, 0.5),
              "report": {"docs_tokens": 1000.0 + 100 * i + 10 * k}, "closure": closure}
             for i, name in enumerate(names) for k in (5, 10) for closure in (False, True)]
    cells = [dict(c, cid=f"{c['cid']}_{c['k']}_{int(c['closure'])}") for c in cells]
    cells.append({"cid": "c_all", "retriever": "all", "k": 65, "recall15": (0.2, 0.2, 0.2),
                  "report": {"docs_tokens": 11352.0, "set_recall_macro": 1.0}})
    cells.append({"cid": "c_cal", "retriever": DEFAULT_RETRIEVER, "k": 65, "recall15": (0.55, 0.55, 0.5),
                  "selector": {"type": "calibrated", "target_recall": 0.9}, "report": {"docs_tokens": 2000.0}})
    return make_run(cells, name="many")


def test_figures_share_colours_highlight_the_default_and_keep_eight_rankings(many, saved_figures):
    text = write_report(many).read_text()
    recall_at_k, vs_tokens = (legend_of(f) for f in saved_figures[:2])
    assert len(saved_figures) == 2  # no generator, no run.trec: no success plot, no frontier
    # eight rankings besides the references; the lowest in recall@15 (tfidf, random's neighbours) left out
    rankings = {label: colour for label, colour in recall_at_k.items() if label not in ("oracle", "random")}
    assert len(rankings) == 8 and "tfidf" not in rankings and "bm25" in rankings
    assert rankings[f"{DEFAULT} (recommended default)"] == "#000000"
    assert recall_at_k["oracle"] == recall_at_k["random"] == "#8c8c8c"
    assert "all" not in " ".join(recall_at_k)  # the whole library ranks nothing
    others = [cielab(c) for label, c in rankings.items() if "default" not in label]
    assert min(sum((p - q) ** 2 for p, q in zip(a, b)) ** 0.5 for i, a in enumerate(others) for b in others[i + 1:]) >= 25
    # the same ranking has the same colour in the next figure, where the selector takes it too
    assert all(vs_tokens[label] == colour for label, colour in recall_at_k.items())
    assert vs_tokens["calibrated(target_recall=0.9) selector (k <= 65) on the ranking of its colour"] == "#000000"
    assert any(label.startswith("all: the whole library (11,352 tokens") for label in vs_tokens)
    assert not any("=–" in label for label in (*recall_at_k, *vs_tokens))
    assert "the others are in the tables" in text


def test_legends_sit_beside_the_axes_and_are_no_wider(many, saved_figures):
    write_report(many)
    for figure in saved_figures:
        (ax,) = figure.axes
        assert ax.get_title(loc="left").startswith("many on the built-in tasks (3 tasks): ")
        figure.canvas.draw()
        legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert legend.x0 >= axes.x1 and legend.width <= axes.width


def test_recall_at_k_has_intervals_at_the_kept_cut_offs(make_run, saved_figures):
    run = make_run([{"cid": "b", "retriever": "bm25", "k": 5, "recall15": (0.0, 0.5, 1.0)}], name="one")
    write_report(run)
    (ax,) = saved_figures[0].axes
    # tasks.jsonl keeps recall@15 and recall@5 (the cell's k): an error bar at each
    bars = [c for c in ax.collections if c.get_segments()]
    spans = sorted((seg[0][0], seg[0][1], seg[1][1]) for c in bars for seg in c.get_segments())
    assert [x for x, _, _ in spans] == [5.0, 15.0]
    # per-task recall@15 (0, 0.5, 1): resample means run from 0 to 1, the 95% interval is inside
    low, high = spans[1][1], spans[1][2]
    assert 0.0 <= low < 0.5 < high <= 1.0


def test_the_whole_library_alone_gets_no_recall_figures(make_run, saved_figures):
    # a run of the `all` cell only (the CCK setting): nothing to compare against the library's line
    run = make_run([{"cid": "c_all", "retriever": "all", "k": 65, "recall15": (0.2, 0.2, 0.2),
                     "report": {"docs_tokens": 11352.0, "set_recall_macro": 1.0}}], baseline="all", name="cck")
    text = write_report(run).read_text()
    assert "recall against tokens" not in text and "recall/tokens frontier" not in text
    assert not list(run.glob("*recall_vs_tokens*")) and not list(run.glob("*frontier*.png"))
    assert all("recall against documentation size" not in f.axes[0].get_title(loc="left") for f in saved_figures)
