"""The README's client snippets are the examples' own lines: each line of a
block marked <!-- example: path --> must be in that file, so the README
shows what CI runs."""
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")


def test_readme_snippets_are_the_examples_lines():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", readme, re.S)
    paths = {p for p, _ in blocks}
    assert {"clients/python/examples/flask_payments.py",
            "clients/python/examples/fastapi_payments.py",
            "clients/node/examples/express-payments.js"} <= paths
    for path, block in blocks:
        source = open(os.path.join(ROOT, path), encoding="utf-8").read()
        lines = [ln.split("#")[0].strip() if path.endswith(".py") else ln.split("//")[0].strip()
                 for ln in source.splitlines()]
        for line in block.splitlines():
            if line.strip():
                assert line.strip() in lines, f"{path}: README line not in the example: {line!r}"
        assert len([ln for ln in block.splitlines() if ln.strip()]) <= 5, path
