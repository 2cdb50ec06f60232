"""The costed transformation library: edits and wrappers, their registry and suites."""

from margin.transforms.base import EditTransform, Transform, WrapperTransform
from margin.transforms.registry import get_transform, registry
from margin.transforms.suites import Suite, SuiteEntry, load_suite

__all__ = [
    "EditTransform",
    "Suite",
    "SuiteEntry",
    "Transform",
    "WrapperTransform",
    "get_transform",
    "load_suite",
    "registry",
]
