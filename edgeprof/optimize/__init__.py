"""Decisions: the router (``recommend``), the optimize loop, compression, sweeps.

``edgeprof.optimize`` is this package and the verb at once: ``edgeprof`` makes the package
callable when it is imported, and calling it, ``edgeprof.optimize(model, target,
**options)``, is :func:`edgeprof.api.kinds.optimize` (a tensor model to
:func:`edgeprof.optimize.loop.optimize`, a generative one to
:func:`edgeprof.api.generative.optimize_llm`).
"""
