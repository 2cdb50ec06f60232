from __future__ import annotations

import pytest

from margin.reports.headline import compute_figures
from margin.reports.pairings import Pairings, validate_pairings
from margin.reports.plots import (
    CurveSeries,
    capability_ladder_figure,
    curves_figure,
    fpr_fnr_figure,
    heatmap_figure,
    pairing_matrix_figure,
    save,
)
from margin.reports.snapshot import figure_set
from tests.reports.test_bootstrap import toy
from tests.reports.test_publish import pairings_fixture


def pairings() -> Pairings:
    return validate_pairings(pairings_fixture(), "fixture")


def series(name: str) -> CurveSeries:
    curves = figure_set(compute_figures(toy(), 100.0)).curves
    assert curves is not None
    return CurveSeries.from_curves(curves, name)


def test_curve_series_carry_bands_from_a_snapshot_record():
    s = series("g")
    assert set(s.ra) == {"unsafe", "safe"} and set(s.bands) == {"unsafe", "safe"}
    assert len(s.bands["safe"][0]) == len(s.budgets) == len(s.ra["safe"])


@pytest.mark.parametrize("build", [
    lambda: curves_figure([series("a"), series("b")], "two guards"),
    lambda: capability_ladder_figure(pairings()),
], ids=["curves", "ladder"])
def test_saved_plots_are_byte_identical_and_carry_no_timestamp(tmp_path, build):
    first = save(build(), tmp_path / "one")
    second = save(build(), tmp_path / "two")
    assert [p.suffix for p in first] == [".png", ".svg"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    svg = first[1].read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    assert b"Software" not in first[0].read_bytes()


def test_every_plot_kind_draws_what_it_is_given():
    curves = curves_figure([series("a")])
    assert [ax.get_title() for ax in curves.axes] == ["unsafe prompts (false allows)", "safe prompts (false blocks)"]
    assert len(curves.axes[0].collections) == 1  # the band
    scatter = fpr_fnr_figure([("a", 0.1, 0.2), ("b", None, 0.3), ("c", 0.5, 0.5)])
    assert len(scatter.axes[0].collections) == 2  # a point needs both rates
    heat = heatmap_figure(["t1", "t2"], ["g · unsafe"], [[0.25], [None]])
    texts = [t.get_text() for t in heat.axes[0].texts]
    assert texts == ["0.25"]  # the unmeasured cell is grey, unlabelled
    matrix = pairing_matrix_figure(pairings())
    labels = sorted(t.get_text() for t in matrix.axes[0].texts)
    assert labels == ["0/1", "1/1", "1/2"]  # qualifying / tested per tested pair
    ladder = capability_ladder_figure(pairings(), guard_id="kw")
    assert ladder.axes[0].get_xscale() == "log" and len(ladder.axes[0].collections) == 2


def test_a_linked_plot_is_replaced_not_written_through(tmp_path):
    outside = tmp_path / "outside.svg"
    outside.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "curves.svg").symlink_to(outside)
    save(curves_figure([series("a")]), folder / "curves")
    assert outside.read_text() == "precious\n"
    assert not (folder / "curves.svg").is_symlink() and (folder / "curves.svg").read_bytes().startswith(b"<?xml")


def test_a_plot_that_fails_to_write_leaves_no_empty_or_partial_file(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    written = Figure.savefig

    def full_disk(self, target, **kwargs):
        if kwargs.get("format") == "svg":
            target.write(b"<?xml")  # a part, then the disk is full
            raise OSError(28, "No space left on device")
        return written(self, target, **kwargs)

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(OSError, match="No space"):
        save(curves_figure([series("a")]), tmp_path / "curves")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curves.png"]  # whole, and no svg at all
