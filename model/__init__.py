"""The system under test: a tiny Qwen3.6-style hybrid model. Never imports ttsim or ttnn by name."""
