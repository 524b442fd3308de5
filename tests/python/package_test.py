"""The Python client's modules import each other without a cycle, counting imports made only
for type checkers too: a cycle (errors -> types -> spec -> errors) once worked only while a
TYPE_CHECKING guard stayed in place.

    PYTHONPATH=python:build/python python3 -m unittest -v tests/python/package_test.py
"""

import ast
import os
import unittest

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "ringmaster")


def imports_of(path):
    """The package's own modules that the module at ``path`` imports, anywhere in it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:  # from .x import y
                found.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("ringmaster.") and not node.module.startswith(
                "ringmaster.v1"
            ):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "ringmaster" and len(parts) > 1 and parts[1] != "v1":
                    found.add(parts[1])
    return found


class PackageTest(unittest.TestCase):
    def test_the_modules_import_each_other_without_a_cycle(self):
        modules = {
            name[:-3]: imports_of(os.path.join(PACKAGE, name))
            for name in os.listdir(PACKAGE)
            if name.endswith(".py") and name != "__init__.py"
        }
        self.assertIn("errors", modules)
        # Depth-first search; a module met again while on the path closes a cycle.
        state = {}

        def visit(module, path):
            state[module] = "open"
            for dep in sorted(modules.get(module, ())):
                if dep not in modules:
                    continue
                if state.get(dep) == "open":
                    self.fail("import cycle: " + " -> ".join(path + [module, dep]))
                if dep not in state:
                    visit(dep, path + [module])
            state[module] = "done"

        for module in sorted(modules):
            if module not in state:
                visit(module, [])

    def test_the_search_sees_a_cycle_when_there_is_one(self):
        # The check itself can fail: errors once imported types under TYPE_CHECKING.
        self.assertIn("spec", imports_of(os.path.join(PACKAGE, "types.py")))
        self.assertIn("errors", imports_of(os.path.join(PACKAGE, "spec.py")))
        self.assertNotIn("types", imports_of(os.path.join(PACKAGE, "errors.py")))


if __name__ == "__main__":
    unittest.main()
