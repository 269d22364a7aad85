"""What a sweep gives back: :class:`SweepReport` (the frames, and one model's jobs as a
profile document for ``edgeprof compare``) and its files, results.csv, best.csv and the grid
page report.html, published as one folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UserError
from edgeprof.core.results import clean
from edgeprof.optimize.sweep_spec import SweepSpec
from edgeprof.optimize.sweep_store import SweepStore, _measured_on, _utc


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
        grid = self.spec.generate
        if grid is not None and model in grid.models:
            if batch_size is not None:
                raise UserError(f"'{model}' is a generative model: its jobs have no batch "
                                "size (give threads, prompt_tokens or gen_tokens)")
            from edgeprof.optimize.sweep_documents import generative_document

            return generative_document(self, model, target, **shape)
        if shape:
            raise UserError(f"{', '.join(sorted(shape))} choose a generative job's test shape; "
                            f"'{model}' is not in the sweep's [generate] models")
        if model not in self.spec.handles or target not in self.spec.targets:
            raise UserError(f"the sweep measured models {', '.join(self.spec.models)} on "
                            f"targets {', '.join(self.spec.targets)}; not '{model}' on "
                            f"'{target}'")
        handle = self.spec.handles[model]
        bs = batch_size if batch_size is not None else self.spec.batch_sizes[0]
        if bs is not None:
            handle = handle.with_batch(bs)
        store = SweepStore(self.store)
        try:
            rows = [r for r in store.rows() if r["model"] == model and r["target"] == target
                    and r["batch_size"] == bs]
        finally:
            store.close()
        runs = []
        for r in rows:
            rec = json.loads(r["record"])
            runs.append({"backend": r["backend"], "requested_precision": r["precision"],
                         "executed_precision": rec.get("executed_precision"),
                         "status": r["status"], "reason": r["reason"],
                         "provenance": {"benchmark": "measured",
                                        "measured_on": _measured_on(rec),
                                        "board": (rec.get("extra") or {}).get("fleet")},
                         "benchmark": rec, "summary": None})
        from edgeprof._version import __version__

        return clean({"schema_version": "1.0", "edgeprof_version": __version__,
                      "created_utc": _utc(), "model": handle.to_dict(),
                      "target": {"id": target}, "request": {"sweep": str(self.spec.path)},
                      "runs": runs, "warnings": []})

    def to_dict(self) -> dict[str, Any]:
        return clean({"store": str(self.store), "total": self.total, "skipped": self.skipped,
                      "ran": self.ran, "where": self.where, "wall_s": self.wall_s,
                      "files": [str(f) for f in self.files],
                      "best": self.best.to_dict(orient="records"),
                      "results": self.frame.to_dict(orient="records")})


# ------------------------------------------------------------------------- the files
def _write_outputs(out: Path, frame, best) -> list[Path]:
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
    """The sweep's page: ``render_sweep_html`` of the tensor jobs (its heatmaps, best bars and
    row table), and, when the sweep has generative jobs, a section of them: per target and
    model a table of every job with its prefill and decode tok/s (median, standard
    deviation), TTFT and TPOT, a bar for decode, and the best of each test shape."""
    import html as _h

    from edgeprof.profilers.report.html import render_sweep_html

    from edgeprof.core.invocation import command

    gen_mask = frame["workload"] == "generate" if "workload" in frame else None
    if gen_mask is None or not gen_mask.any():
        return render_sweep_html(frame, command=command())
    tensor = frame[~gen_mask].reset_index(drop=True)
    gen = frame[gen_mask].reset_index(drop=True)
    targets = list(dict.fromkeys(frame["target"]))
    page = render_sweep_html(tensor, title=f"sweep: {len(frame)} runs ({len(tensor)} tensor, "
                                           f"{len(gen)} generative) on {len(targets)} "
                                           "target(s)", command=command())
    section = _generative_section(gen, best, _h.escape)
    for anchor in ('<h2 id="rows">', "</body>"):
        if anchor in page:
            return page.replace(anchor, section + anchor, 1)
    return page + section


def _generative_section(gen, best, esc) -> str:
    from edgeprof.profilers.report.html import fmt

    def num(v) -> float | None:
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if f == f else None

    def rate(med, sd) -> str:
        m = num(med)
        if m is None:
            return "—"
        s = num(sd)
        return esc(fmt(m)) + (f" ± {esc(fmt(s))}" if s is not None else "")

    def cell(v) -> str:
        return esc(fmt(v)) if num(v) is not None else esc(v) if v not in (None, "") and \
            v == v else "—"

    out = ['<section id="generative"><h2 id="generate">Generative jobs '
           f'({len(gen)})</h2><p class="note">llama-bench\'s tests: <code>pp</code> the '
           "prefill of n_prompt tokens, <code>tg</code> the decode of n_gen tokens at depth "
           "n_depth; tokens per second, median ± standard deviation over the repetitions "
           "(provenance: measured, on the machine each row names). The bar is decode, against "
           "the fastest decode of that target and model.</p>"]
    heads = ["target", "model", "backend", "format", "threads", "n_prompt", "n_gen",
             "n_depth", "status", "pp tok/s", "tg tok/s", "", "TTFT ms", "TPOT ms",
             "measured on", "reason"]
    out.append('<div class="scroll"><table id="generative-table" data-rows="'
               f'{len(gen)}"><thead><tr>' + "".join(
                   f'<th{" class=num" if h.endswith(("/s", "ms")) or h.startswith("n_") else ""}>'
                   f"{esc(h)}</th>" for h in heads) + "</tr></thead><tbody>")
    top: dict[tuple, float] = {}
    for r in gen.to_dict(orient="records"):
        v = num(r.get("tg_median_ts"))
        if v is not None:
            k = (r["target"], r["model"])
            top[k] = max(top.get(k, 0.0), v)
    for r in gen.to_dict(orient="records"):
        v = num(r.get("tg_median_ts"))
        peak = top.get((r["target"], r["model"]))
        width = 0 if v is None or not peak else max(1, round(100 * v / peak))
        bar = (f'<div title="{esc(fmt(v))} tok/s" style="width:{width * 1.2:.0f}px;height:10px;'
               'background:#4c78a8"></div>' if width else "")
        cells = [cell(r.get("target")), cell(r.get("model")), cell(r.get("backend")),
                 cell(r.get("precision")), cell(r.get("n_threads")), cell(r.get("n_prompt")),
                 cell(r.get("n_gen")), cell(r.get("n_depth")), cell(r.get("status")),
                 rate(r.get("pp_median_ts"), r.get("pp_stddev_ts")),
                 rate(r.get("tg_median_ts"), r.get("tg_stddev_ts")), bar,
                 cell(r.get("ttft_ms")), cell(r.get("tpot_ms")),
                 cell(r.get("measured_on") or r.get("board")), cell(r.get("reason"))]
        out.append(f'<tr data-status="{esc(str(r.get("status")))}" data-workload="generate">'
                   + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    gbest = best[best["workload"] == "generate"] if "workload" in best else best.iloc[0:0]
    out.append('<h3 id="generative-best">Fastest decode per target, model and test</h3>'
               '<div class="scroll"><table id="generative-best-table"><thead><tr><th>target'
               "</th><th>model</th><th>test</th><th>fastest decode</th><th class=num>tg tok/s"
               "</th><th>runner-up</th><th>clearly faster</th><th>fastest prefill</th>"
               "<th class=num>pp tok/s</th></tr></thead><tbody>")
    for b in gbest.to_dict(orient="records"):
        test = f"pp{cell(b.get('n_prompt'))} tg{cell(b.get('n_gen'))} @ d{cell(b.get('n_depth'))}"
        t = "auto" if num(b.get("n_threads")) is None else fmt(b.get("n_threads"))
        cf = b.get("clearly_faster")
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            cell(b.get("target")), cell(b.get("model")), test,
            esc(f"{b.get('backend')} {b.get('precision')} t{t}"),
            rate(b.get("tg_median_ts"), b.get("tg_stddev_ts")), cell(b.get("runner_up")),
            {True: "yes", False: "no (repetitions overlap)"}.get(cf, "—")
            if isinstance(cf, bool) else "—",
            cell(b.get("best_prefill")), cell(b.get("best_prefill_pp_median_ts")))) + "</tr>")
    if not len(gbest):
        out.append('<tr><td colspan="9" class="muted">no generative job ran</td></tr>')
    out.append("</tbody></table></div></section>")
    return "".join(out)


__all__ = ["SweepReport", "sweep_html"]
