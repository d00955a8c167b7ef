"""The hardware target: real ttnn on p150a cards (see fixtures/backend.py for selection)."""
