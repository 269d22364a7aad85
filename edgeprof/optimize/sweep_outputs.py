"""What a sweep gives back: :class:`SweepReport` (the frames, and one model's jobs as a
profile document for ``edgeprof compare``) and its files, results.csv, best.csv and the grid
page report.html, published as one folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.results import clean
from edgeprof.optimize.sweep_spec import SweepSpec


# ------------------------------------------------------------------------ the report
@dataclass
class SweepReport:
    spec: SweepSpec
    store: Path
    total: int
    skipped: int  # finished before this run (--resume)
    ran: int
    frame: Any  # DataFrame, COLUMNS
    best: Any  # DataFrame, BEST_COLUMNS
    files: list[Path]
    where: str  # "fleet tcp://..." or LOCAL_WHERE
    wall_s: float

    @property
    def exit_code(self) -> int:
        """3 when a job that should have run produced no measurement (``failed``); a grid's
        unsupported or unavailable combinations are listed, not failures."""
        return 3 if (self.frame["status"] == "failed").any() else 0

    def profile_document(self, model: str, target: str, batch_size: int | None = None,
                         **shape: int | None) -> dict[str, Any]:
        """The sweep's jobs of one model, target (and batch size: by default the first the
        sweep lists) as a profile.json-shaped document (the model, the target, one run per
        backend x precision with its whole record), so
        ``edgeprof.profilers.report.compare.compare_results`` (``edgeprof compare``) can set
        a sweep's measurement beside a profile's: same job, same answer?

        A model of the ``[generate]`` table gives a generative profile document (one run per
        backend x format x depth at one test shape: ``threads``, ``prompt_tokens``,
        ``gen_tokens``, by default the first the sweep lists;
        ``edgeprof.optimize.sweep_documents``)."""
        from edgeprof.optimize.sweep_documents import DOCUMENTS

        workloads = {j.model: j.workload for j in self.spec.jobs()}  # [generate] last
        return DOCUMENTS[workloads.get(model, "tensor")](self, model, target, batch_size,
                                                         **shape)

    def to_dict(self) -> dict[str, Any]:
        return clean({"store": str(self.store), "total": self.total, "skipped": self.skipped,
                      "ran": self.ran, "where": self.where, "wall_s": self.wall_s,
                      "files": [str(f) for f in self.files],
                      "best": self.best.to_dict(orient="records"),
                      "results": self.frame.to_dict(orient="records")})


# ------------------------------------------------------------------------- the files
def write_outputs(out: Path, frame, best) -> list[Path]:
    """results.csv, best.csv and the grid page report.html, published as one folder (a
    complete sibling swapped in with one rename: never a mix of two sweeps' files)."""
    from edgeprof.core.io import publish_staged, write_csv, write_text

    def write(stage: Path) -> list[str]:
        write_csv(stage / "results.csv", _int_columns(frame))
        write_csv(stage / "best.csv", _int_columns(best))
        write_text(stage / "report.html", sweep_html(frame, best))
        return ["results.csv", "best.csv", "report.html"]

    return publish_staged(out, write)


#: columns that hold counts: written as integers even where another kind of row leaves them
#: empty (a tensor row has no n_prompt, a generative row no batch size)
_INT_COLUMNS = ("batch_size", "attempts", "n_threads", "n_prompt", "n_gen", "n_depth",
                "repetitions", "model_size", "ok_jobs")


def _int_columns(frame):
    frame = frame.copy()
    for c in _INT_COLUMNS:
        if c in frame:
            col = frame[c]
            vals = col.dropna()
            try:
                if all(float(v).is_integer() for v in vals):
                    frame[c] = col.astype("Int64")
            except (TypeError, ValueError):
                pass
    return frame


def sweep_html(frame, best) -> str:
    """The sweep's page: ``render_sweep_html`` of its rows and best frame (the heatmaps, best
    bars and row table of the tensor jobs; the section of the generative jobs, when there
    are any), with the command that ran it."""
    from edgeprof.core.invocation import command
    from edgeprof.profilers.report.html import render_sweep_html

    return render_sweep_html(frame, best, command=command())


__all__ = ["SweepReport", "sweep_html"]
