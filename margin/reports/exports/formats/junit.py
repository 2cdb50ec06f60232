"""JUnit XML for CI dashboards: a test suite per class, a test case per transform family in it;
a case fails when the family flips any prompt of the class that the guard got right on the
original, and is skipped when there is none. The margins ride along as suite properties: a
response run's add `target` (and its messages count responses), a run whose cases carry
policies adds `margin.policy.NAME`, the class margin per policy.
Texts from input (the guard id, family names) show control and bidi characters as
`<U+XXXX>`: XML 1.0 cannot hold most of them, and a CI page should not reorder them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from margin.reports.exports.bundle import ExportRun, axes
from margin.types import LABELS
from margin.util.display import make_visible


def _suite(bundle: ExportRun, label: str) -> ET.Element:
    suite = ET.Element("testsuite", name=f"margin.{bundle.run.guard.id}.{label}")
    props = ET.SubElement(suite, "properties")
    margin = bundle.record.figure(f"{label}_margin")
    found = axes(bundle)
    per_policy = [(f"margin.policy.{name}", figures[f"{label}_margin"]) for name, figures in found.get("policies", {}).items()]
    target = [("target", found["target"])] if "target" in found else []
    for name, value in (("margin", margin), ("family_method", bundle.say(bundle.family_method)), *target, *per_policy):
        ET.SubElement(props, "property", name=name, value="" if value is None else str(value))
    failures = skipped = 0
    for outcome in bundle.outcomes:
        case = ET.SubElement(suite, "testcase", name=outcome.family, classname=f"margin.{label}")
        eligible, flipped = outcome.eligible[label], outcome.flipped[label]
        if not eligible:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"no {label} {bundle.target} right on the original")
        elif flipped:
            failures += 1
            ET.SubElement(case, "failure", type="flip",
                          message=f"{outcome.family} flips {flipped} of {eligible} {label} {bundle.target}s "
                                  f"({100 * flipped / eligible:.1f}%)")
    suite.set("tests", str(len(bundle.outcomes)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    return suite


def render(bundle: ExportRun) -> str:
    root = ET.Element("testsuites", name="margin")
    suites = [_suite(bundle, label) for label in LABELS]
    root.extend(suites)
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in suites)))
    for element in root.iter():  # always well-formed XML, whatever the ids hold
        element.attrib = {key: make_visible(value) for key, value in element.attrib.items()}
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def holds(text: str) -> str:
    """What a rendered report holds, counted from it (for the `wrote` line)."""
    root = ET.fromstring(text.encode("utf-8"))
    return (f"{len(root.findall('testsuite'))} suites, one per class; {root.get('tests')} cases, one per class and "
            f"family: {root.get('failures')} failed, {root.get('skipped')} skipped")
