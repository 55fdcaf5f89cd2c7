"""An encoder wrapper that keeps what `encode` returned, for tests that score through it."""


class RecordingEncoder:
    """Passes `encode` calls on to `encoder` and keeps what they returned."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.calls = []

    def encode(self, texts, batch_size=64):
        vectors = self.encoder.encode(texts, batch_size=batch_size)
        self.calls.append((list(texts), vectors))
        return vectors
