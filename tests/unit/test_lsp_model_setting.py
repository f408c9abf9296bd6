"""`fimgate lsp --threads 1 ...` with a model named in the editor's settings: the command's engine
flags still apply (they were dropped: the setting's model was built with every default)."""

import argparse

from fimgate.cli import _with_model
from fimgate.lsp.completer import EmbeddedCompleter


def test_an_editors_model_setting_keeps_the_commands_engine_flags():
    a = argparse.Namespace(model="qwen2.5-coder-0.5b", template="qwen2.5-coder", threads=1, dtype="int8")
    assert _with_model(a, None) is a and _with_model(a, "qwen2.5-coder-0.5b") is a
    b = _with_model(a, "smollm2-135m")
    assert (b.model, b.template, b.threads, b.dtype) == ("smollm2-135m", None, 1, "int8")


def test_the_embedded_completer_builds_through_the_commands_flags():
    asked = []

    class Service:
        runner = None

    EmbeddedCompleter("smollm2-135m", build=lambda model: asked.append(model) or Service())
    EmbeddedCompleter(None, build=lambda model: asked.append(model) or Service())
    assert asked == ["smollm2-135m", None]
