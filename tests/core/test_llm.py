"""core/llm.py's shared pieces of a generative session."""

from __future__ import annotations

import pytest

from edgeprof.core.errors import UserError
from edgeprof.core.llm import check_room


def test_check_room_refuses_a_sequence_longer_than_the_context():
    check_room(3, 1, 4)  # exactly full is fine
    with pytest.raises(UserError) as e:
        check_room(3, 2, 4)
    assert str(e.value) == ("the sequence would hold 5 tokens (3 in the cache, 2 more asked); "
                            "this session was loaded for a context of 4")


def _sessions():
    """Each generative session, built without its runtime, on a context of 4 tokens."""
    from edgeprof.backends.llama_cpp import LlamaCppSession
    from edgeprof.backends.onnxruntime_genai import OgSession
    from edgeprof.backends.openvino_genai import OvGenaiSession
    from edgeprof.backends.transformers_llm import TorchSession

    out = []
    for cls, fields in ((LlamaCppSession, {"n_vocab": 100, "_n_past": 0}),
                        (OgSession, {"_count": 0}), (TorchSession, {"_count": 0}),
                        (OvGenaiSession, {"_count": 0, "_prompt": None})):
        s = object.__new__(cls)
        s.n_ctx = 4
        for k, v in fields.items():
            setattr(s, k, v)
        out.append(s)
    return out


@pytest.mark.parametrize("session", _sessions(), ids=lambda s: type(s).__name__)
def test_every_generative_session_checks_its_room_the_same_way(session):
    """The room check was written in each session (issue 31: '_room in two generative
    sessions'); one check_room now, and one message."""
    import re

    with pytest.raises(UserError) as e:
        session.prefill([1, 2, 3, 4, 5])
    # openvino_genai's LLMPipeline evaluates a prompt by generating its first token
    m = re.fullmatch(r"the sequence would hold (\d+) tokens \((\d+) in the cache, (\d+) more "
                     r"asked\); this session was loaded for a context of 4", str(e.value))
    assert m and int(m[1]) == int(m[2]) + int(m[3]) >= 5
