"""A Python upload's entry point, checked on the site before any runner job is spent on it.

The evaluator imports the file and calls its module-level ``kernel`` (docs/problems.md); a file
that defines none would use a runner job to end as COMPILE_ERROR. Here the parsed source (never
executed) is searched for a module-level binding of an entry-point name: a ``def``, a class, an
assignment, an import (``from mine import kernel``). A file that could make the name at run time
in a way no parser sees (``globals()``, ``exec``, ``setattr``, a module ``__getattr__``, a star
import, a ``global`` statement in a function) is let through: the evaluator decides. So the check
refuses only files that certainly define no entry point, and no honest kernel.

``custom_kernel`` is accepted too: a GPU MODE ``submission.py`` names its entry point so, and the
problems imported from reference-kernels take it (docs/importing.md).
"""

from __future__ import annotations

import ast

ENTRY_POINTS = ("kernel", "custom_kernel")
#: Names whose use can bind a module attribute where no parser sees it.
DYNAMIC_NAMES = frozenset({"globals", "exec", "eval", "setattr", "vars", "locals", "__getattr__", "__dict__",
                           "__import__", "modules", "import_module", "compile"})
# A GPU MODE user on an imported problem reads here that their own entry point is taken too.
MISSING_ENTRY_POINT = ("the file defines no `kernel` function: a Python submission defines "
                       "`def kernel(*inputs, *outputs)` at module level (docs/problems.md); a problem "
                       "imported from GPU MODE's reference-kernels also takes `def custom_kernel(data)` "
                       "(docs/importing.md)")


def entry_point_problem(source: str) -> str | None:
    """None when the source may define an entry point; else why it cannot. Syntax errors are
    the caller's to report (this parses again and says nothing about them)."""
    try:
        tree = ast.parse(source, filename="submission.py")
    except (SyntaxError, ValueError):
        return None
    if _may_bind_dynamically(tree) or set(ENTRY_POINTS) & module_bindings(tree):
        return None
    return MISSING_ENTRY_POINT


def _may_bind_dynamically(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_NAMES:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DYNAMIC_NAMES:
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return True
    return False


def module_bindings(tree: ast.Module) -> set[str]:
    """Names the module itself binds (anywhere outside function and class bodies)."""
    finder = _ModuleBindings()
    finder.visit(tree)
    return finder.names


class _ModuleBindings(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def _binds_only_its_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.names.add(node.name)  # its body is another scope

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _binds_only_its_name

    def visit_Lambda(self, node: ast.Lambda) -> None:
        """Another scope: binds nothing here."""

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        if isinstance(node.target, ast.Name):  # even inside a comprehension it binds here
            self.names.add(node.target.id)
        self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> None:
        self.names.add((node.asname or node.name).split(".")[0])

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.names.add(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.names.add(node.name)
