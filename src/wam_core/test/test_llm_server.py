"""The local LLM server component: a missing install or a server that cannot come up is a
clear error and leaves no process behind (the real server runs in make test-llm)."""

import importlib.util

import pytest

from wam_core.planning.llm_server import LlamaServer, LLMServerError


def test_a_server_that_cannot_come_up_is_an_error_and_leaves_nothing_running(tmp_path):
    server = LlamaServer(model=str(tmp_path / 'missing.gguf'))
    if importlib.util.find_spec('llama_cpp') is None:  # make test-llm is opt-in
        with pytest.raises(LLMServerError, match='setup_llm.sh'):
            server.start()
    else:  # installed: the process starts, fails to load the model, and is reaped
        with pytest.raises(LLMServerError, match='exited|not ready'):
            server.start().wait_ready(60)
    assert server.proc is None and not server.alive()


def test_a_server_that_is_not_running_is_not_ready():
    assert not LlamaServer(port=1).ready()
