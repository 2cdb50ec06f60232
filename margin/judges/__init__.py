"""LLM judges of behaviour preservation: does a protected model answer T(p) as it answered p?

A judge is a template (a file) and a strict parse rule; the model that answers it is called
by whoever uses the judge (a paired study batches those calls through its actors).
"""

from margin.judges.template import JudgeTemplate, load_template
from margin.judges.verdicts import Behaviour, Judge, JudgeCase, JudgeVerdict

__all__ = ["Behaviour", "Judge", "JudgeCase", "JudgeTemplate", "JudgeVerdict", "load_template"]
