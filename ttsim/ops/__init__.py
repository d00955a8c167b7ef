"""ttsim's ops, one module per family; ttsim re-exports them under ttnn's names."""
