"""Built-in example models, registered through the same ``edgeprof_register_models`` hook
a user's plugin would use. The definitions live in ``edgeprof.zoo.models`` and import torch
only when a model is built.
"""

from __future__ import annotations

from edgeprof.core.hookspecs import hookimpl

BUILTIN_MODELS = {
    "small_cnn": "edgeprof.zoo.models:small_cnn",
    "mlp": "edgeprof.zoo.models:mlp",
    "small_resnet": "edgeprof.zoo.models:small_resnet",
    "small_mobilenet": "edgeprof.zoo.models:small_mobilenet",
    "tiny_transformer": "edgeprof.zoo.models:tiny_transformer",
}


@hookimpl
def edgeprof_register_models():
    return dict(BUILTIN_MODELS)
