"""A judge's validation record (`validation.json`) and what decides it (`validate.json`), typed:
built by `margin.studies.validate` and written once as JSON (`model_dump`), fields in the
order the files have always held them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from margin.datasets.completions import LabelsFile
from margin.judges.rules import RuleJudge
from margin.studies.plan import JudgePlan

PROTOCOL = "margin-judge-validation/1"


class LabelsEntry(BaseModel):
    """One labels file a validation read: its name, content hash and number of cases."""

    model_config = ConfigDict(frozen=True)

    file: str
    sha256: str
    cases: int


class ValidationManifest(BaseModel):
    """What decides a validation's record (`validate.json`, and the head of `validation.json`):
    a `--resume` compares the saved one with this one whole. Fields in the order written."""

    model_config = ConfigDict(frozen=True)

    protocol: str = PROTOCOL
    judge: dict[str, Any]  # the judge's identity, as it writes it
    labels: list[LabelsEntry]

    @classmethod
    def of(cls, judge: RuleJudge | JudgePlan, files: Sequence[LabelsFile]) -> ValidationManifest:
        identity = judge.identity() if isinstance(judge, RuleJudge) else judge.judge.identity()
        return cls(protocol=PROTOCOL, judge=identity,
                   labels=[LabelsEntry(file=f.path.name, sha256=f.sha256, cases=len(f.cases)) for f in files])


class Estimate(BaseModel):
    """A figure with its 95% interval (`agreement.Figure.as_dict`); None where undefined."""

    model_config = ConfigDict(frozen=True)

    estimate: float | None
    low: float | None
    high: float | None


class AgreementFigures(BaseModel):
    """A judge's (or an annotator's) agreement with the labels over `n` cases."""

    model_config = ConfigDict(frozen=True)

    n: int
    accuracy: Estimate
    kappa: Estimate
    accuracy_comply: Estimate
    kappa_comply: Estimate
    invalid: int


class SliceFigures(AgreementFigures):
    ceiling_kappa_comply: Estimate


class PreservedFigures(BaseModel):
    model_config = ConfigDict(frozen=True)

    accuracy: Estimate
    kappa: Estimate
    confusion: dict[str, dict[str, int]]


class PairFigures(BaseModel):
    """The two-answer judge's other readings: the transformed side and `preserved`."""

    model_config = ConfigDict(frozen=True)

    n: int
    transformed_behaviour: AgreementFigures
    preserved: PreservedFigures


class ValidationRecord(ValidationManifest):
    """A judge's validation (`validation.json`), fields in the order written: what decided it,
    then the figures against the labels and the annotators' ceiling, confusion, slices, the
    two-answer readings (a pairing judge's only) and the hash of what was judged."""

    cases: str
    mapping: str
    interval_method: str
    n: int
    missing: int
    invalid: int
    kappa: Estimate
    accuracy: Estimate
    kappa_comply: Estimate
    accuracy_comply: Estimate
    ceiling_kappa: Estimate
    ceiling_accuracy: Estimate
    ceiling_kappa_comply: Estimate
    ceiling_accuracy_comply: Estimate
    confusion: dict[str, dict[str, int]]
    confusion_comply: dict[str, dict[str, int]]
    slices: dict[str, dict[str, SliceFigures]]
    pairs: PairFigures | None = None  # a pairing judge's only
    receipt_sha256: str
