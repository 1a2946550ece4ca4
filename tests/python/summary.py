"""Prints the closing "N passed, N failed" line of a pytest run from its JUnit XML report.

    python summary.py REPORT.xml PYTEST_EXIT_STATUS

Errors count as failed; skipped tests are neither. A run that pytest itself could not finish (usage
error, collection error, interrupted) with no failure in the report counts as 1 failed.
"""
import sys
import xml.etree.ElementTree as ET

path, status = sys.argv[1], int(sys.argv[2])
passed = failed = 0
try:
    for suite in ET.parse(path).getroot().iter("testsuite"):
        tests, fail = int(suite.get("tests", 0)), int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        passed += tests - fail - int(suite.get("skipped", 0))
        failed += fail
except (OSError, ET.ParseError):
    pass
if status not in (0, 1) and failed == 0:
    failed = 1
print(f"{passed} passed, {failed} failed")
