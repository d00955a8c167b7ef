"""The composition root and everything that drives the system under test: the pytest plugin
(``plugin``), the `ttsim` command (``cli``, ``sweep``, ``replay``), the vLLM platform plugin
(``vllm``), workloads and scenarios, and the user-generator loader."""
