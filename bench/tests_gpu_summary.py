#!/usr/bin/env python3
"""The summary of a ctest run's JUnit file (bench/tests-gpu run): date, commit, device, counts per API, every failure."""
import argparse
import datetime
import xml.etree.ElementTree as ElementTree


def api_of(name):
    if name.endswith(".gles") or name.startswith("gl.gles_minimum."):
        return "ES"
    if name in ("cli.api_agreement", "gl.parts"):
        return "GL and ES"
    return "GL"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("junit")
    parser.add_argument("summary")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--excluded", required=True)
    args = parser.parse_args()
    try:
        cases = ElementTree.parse(args.junit).getroot().iter("testcase")
        tests = [(case.get("name"), case.get("status"), float(case.get("time") or 0), case.find("system-out")) for case in cases]
    except (OSError, ElementTree.ParseError) as error:
        tests, problem = [], f"ctest wrote no readable JUnit file ({error}); see ctest.txt"
    else:
        problem = None
    counts = {}
    for name, status, _, _ in tests:
        passed, total = counts.get(api_of(name), (0, 0))
        counts[api_of(name)] = (passed + (status == "run"), total + 1)
    failures = [t for t in tests if t[1] != "run"]
    lines = [
        f"# Test suite on {args.device} ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"- commit of the binaries: {args.commit}",
        f"- command: `{args.command}`, {args.seconds} s",
        f"- not run there (see bench/tests-gpu): tests matching `{args.excluded}`",
        "",
        "| API | passed | tests |",
        "|---|---|---|",
    ]
    lines += [f"| {api} | {passed} | {total} |" for api, (passed, total) in sorted(counts.items())]
    if problem:
        lines += ["", problem]
    lines += ["", f"## Failures: {len(failures)}" if failures else "## Failures: none"]
    for name, status, seconds, output in failures:
        text = (output.text or "") if output is not None else ""
        tail = "\n".join(text.rstrip().splitlines()[-40:])
        lines += ["", f"### {name} ({status}, {seconds:.1f} s)", "```", tail, "```"]
    lines += ["", "## Every test", "", "| test | result | s |", "|---|---|---|"]
    lines += [f"| {name} | {'passed' if status == 'run' else status} | {seconds:.1f} |" for name, status, seconds, _ in tests]
    with open(args.summary, "w") as summary:
        summary.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
