"""Every pointer into the docs resolves: a path `docs/<name>.md` names a file that exists, a
section quoted after it (`docs/security.md, "Rank samples"`) is a heading of that file (or the
start of one), and a link `NAME.md#anchor` is a heading's anchor. Comments that sent readers to
documents and sections that did not exist were found by a read of the code (issue 33).

    python3 tests/docs/references_test.py [REPO]
"""

import os
import re
import subprocess
import sys
import unittest

REPO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")

PATH = re.compile(r"(?<![\w/.-])docs/([A-Za-z0-9_-]+)(\.md)?")
QUOTED = re.compile(r"\bdocs/([a-z0-9_-]+)\.md,? \"([^\"]+)\"")
ANCHOR = re.compile(r"\b([a-z0-9_-]+)\.md#([a-z0-9_-]+)")


def anchor_of(heading):
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(doc):
    with open(os.path.join(REPO, "docs", doc + ".md"), encoding="utf-8") as f:
        return [line.lstrip("#").strip().replace("`", "") for line in f if line.startswith("#")]


class ReferencesTest(unittest.TestCase):
    def setUp(self):
        files = subprocess.run(
            ["git", "-C", REPO, "ls-files", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        self.texts = {}
        for name in files:
            if name.startswith("tests/fuzz/corpus/") or name.endswith((".json", ".csv")):
                continue
            try:
                with open(os.path.join(REPO, name), encoding="utf-8") as f:
                    self.texts[name] = f.read()
            except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
                pass
        self.assertGreater(len(self.texts), 100)

    def test_every_named_doc_exists(self):
        missing = set()
        for name, text in self.texts.items():
            for m in PATH.finditer(text):
                if not os.path.exists(os.path.join(REPO, "docs", m.group(1) + ".md")) and not (
                    os.path.exists(os.path.join(REPO, "docs", m.group(1)))
                ):
                    missing.add(f"{name}: docs/{m.group(1)}{m.group(2) or ''}")
        self.assertEqual(sorted(missing), [])

    def test_every_quoted_section_is_a_heading(self):
        missing = set()
        for name, text in self.texts.items():
            for m in QUOTED.finditer(re.sub(r"\s*\n\s*(//|#|\*)?\s*", " ", text)):
                doc, section = m.group(1), m.group(2)
                if not os.path.exists(os.path.join(REPO, "docs", doc + ".md")):
                    continue  # the test above names it
                if not any(h.lower().startswith(section.lower()) for h in headings(doc)):
                    missing.add(f'{name}: docs/{doc}.md, "{section}"')
        self.assertEqual(sorted(missing), [])

    def test_every_anchor_is_a_heading(self):
        missing = set()
        for name, text in self.texts.items():
            for m in ANCHOR.finditer(text):
                doc, anchor = m.group(1), m.group(2)
                if not os.path.exists(os.path.join(REPO, "docs", doc + ".md")):
                    continue
                if anchor not in {anchor_of(h) for h in headings(doc)}:
                    missing.add(f"{name}: {doc}.md#{anchor}")
        self.assertEqual(sorted(missing), [])


if __name__ == "__main__":
    unittest.main()
