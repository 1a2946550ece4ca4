"""Prints the closing "N passed, N failed" line of a pytest run from its JUnit XML (errors count as
failed; skipped tests are neither). Used by tests/python/run.sh and tests/browser/run.sh.

    python junit_summary.py JUNIT_XML PYTEST_EXIT_STATUS
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
    failed = 1  # pytest itself failed (usage error, collection error, interrupted)
print(f"{passed} passed, {failed} failed")
