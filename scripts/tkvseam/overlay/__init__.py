"""The overlay: the patched ``vllm/`` files of a build tree staged with their manifest (``stage``)
and installed over a venv's vLLM by ``install``, which runs with that venv's Python (standard
library only); ``venv`` holds the overlay commands' use cases (stage, install, restore)."""
