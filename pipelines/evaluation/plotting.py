"""The one place the evaluations set up matplotlib: the non-interactive Agg backend, chosen
before pyplot is imported, so plots are written on machines without a display. matplotlib
is imported only when a plot is drawn, so the rest of an evaluation runs without it.
"""

from __future__ import annotations

from types import ModuleType


def headless_pyplot() -> ModuleType:
    """`matplotlib.pyplot`, drawing with the Agg backend (files only, no window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
