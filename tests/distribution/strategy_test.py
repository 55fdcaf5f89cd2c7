"""The `tf.distribute` strategy of one machine's GPUs."""

import tensorflow as tf

from kcse.distribution import choose_strategy


def test_strategy_choice(monkeypatch):
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind: [])
    assert choose_strategy() is None
