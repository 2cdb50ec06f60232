"""Backends: how requests reach a model (transformers, vLLM, an OpenAI-compatible server).

Each backend module imports its framework lazily, inside the constructor, so that
`import margin` and the CLI never import torch, transformers or vllm.
"""
