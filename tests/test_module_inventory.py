"""Every module of the five packages has a test of its own, or is on the list of those still without.

A module has a test of its own when a test file imports it (``import a.b``, ``from a.b import x``,
``from a import b``, or a name its package re-exports from it), names it (a dotted name such as
``-m evaluator.harness.single.child``, its path ``evaluator/harness/single/child.py``, its command:
``run_cli("sol")``, ``call_command("sweep")``), or is named after it (``test_dispatch_store.py``).
Running it only through another module does not count: a maintainer about to change it wants tests
that say what it promises.

``STILL_UNTESTED`` lists the modules without one. A new module comes with its test (the first test
fails otherwise); a module that gains a test leaves the list (the second fails until it does).

``python -m tests.test_module_inventory`` prints the list and the tests-to-code ratio (lines of
tests over lines of code of the five packages).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("evaluator", "runners", "leaderboard", "solboard_client", "solboard_common")

#: Modules without a test of their own. Shrink it; never grow it.
STILL_UNTESTED = frozenset({
    "evaluator.__main__",
    "evaluator.api",
    "evaluator.harness.single.cpu_baseline",
    "evaluator.harness.device",
    "evaluator.harness.evidence",
    "evaluator.harness.timing.l2",
    "evaluator.harness.multi.link_bandwidth",
    "evaluator.harness.multi.rank_env",
    "evaluator.harness.multi.rank_group",
    "evaluator.harness.submission",
    "evaluator.harness.single.warm",
    "evaluator.importers.runtime",
    "evaluator.problems._logits",
    "evaluator.problems._multi",
    "evaluator.problems._sampling",
    "evaluator.ptx.includes",
    "evaluator.ptx.tooljail",
    "evaluator.ptx.toolkit",
    "leaderboard.__main__",
    "leaderboard.admin",
    "leaderboard.api.auth",
    "leaderboard.api.creation",
    "leaderboard.api.errors",
    "leaderboard.api.urls",
    "leaderboard.api.views_account",
    "leaderboard.api.views_catalogue",
    "leaderboard.api.views_submissions",
    "leaderboard.apps",
    "leaderboard.dispatch.messages",
    "leaderboard.dispatch.sweep",
    "leaderboard.health",
    "leaderboard.management.commands.deliver_webhooks",
    "leaderboard.middleware",
    "leaderboard.native_uploads",
    "leaderboard.runner_views",
    "leaderboard.signals",
    "leaderboard.static_files",
    "leaderboard.templatetags.native",
    "leaderboard.templatetags.web",
    "leaderboard.urls",
    "leaderboard.views",
    "leaderboard.web.accounts",
    "leaderboard.web.actions",
    "leaderboard.web.charts",
    "leaderboard.web.docs",
    "leaderboard.web.errors",
    "leaderboard.web.highlight",
    "leaderboard.web.history",
    "leaderboard.web.native_abi",
    "leaderboard.web.problems",
    "leaderboard.web.reports",
    "leaderboard.web.submission_views",
    "leaderboard.web.upload",
    "leaderboard.web.urls",
    "leaderboard.wsgi",
    "runners.__main__",
    "runners.jail_filter",
    "runners.jail_ids",
    "runners.jail_view",
    "runners.jailfacts",
    "runners.tasks",
    "solboard_client.account",
    "solboard_client.local",
    "solboard_client.native",
})


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def counted(path: Path) -> bool:
    """Code a maintainer changes: not migrations, not a problem's reference (the catalogue's tests run
    every one), not a package's empty ``__init__``."""
    relative = path.relative_to(REPO).as_posix()
    if (
        "/migrations/" in relative
        or relative.startswith("evaluator/problems/")
        and path.parent.name != "problems"
    ):
        return False
    return not (path.name == "__init__.py" and len(path.read_text().strip().splitlines()) < 10)


def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
            if counted(path)}


def sources_of_tests() -> list[Path]:
    return [path for path in sorted((REPO / "tests").rglob("*.py")) if path.name != Path(__file__).name]


def imported_names(tree: ast.AST) -> set[str]:
    """Every dotted name an import statement of ``tree`` brings in, and its packages."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def reexports(known: dict[str, Path]) -> dict[str, str]:
    """``package.Name`` -> the module of the package that defines it, for names a package's
    ``__init__`` imports from its own modules (``from leaderboard.models import Evaluation`` is an
    import of ``leaderboard.models.evaluations``)."""
    found: dict[str, str] = {}
    for package, path in known.items():
        if path.name != "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = f"{package}.{node.module}" if node.level == 1 and node.module else node.module or ""
            if source.startswith(f"{package}.") and source in known:
                found.update({f"{package}.{alias.asname or alias.name}": source for alias in node.names})
    return found


def entry_points() -> dict[str, str]:
    """How tests run a module without importing it: a pattern -> the module. The evaluator's
    subcommands (``run_cli("sol", ...)``, ``python -m evaluator sol``) and the site's management
    commands (``call_command("sync_problems")``)."""
    from evaluator.cli import COMMANDS

    patterns = {rf'(run_cli|_cli)\(\s*"{name}"|"evaluator",\s*"{name}"': module for name, module in COMMANDS}
    commands = REPO / "leaderboard" / "management" / "commands"
    patterns.update({rf'call_command\(\s*"{path.stem}"': module_name(path) for path in commands.glob("*.py")})
    return patterns


def named_by_tests() -> set[str]:
    known = modules()
    exported, run = reexports(known), entry_points()
    named: set[str] = set()
    for path in sources_of_tests():
        text = path.read_text()
        imported = imported_names(ast.parse(text))
        named |= (imported & set(known)) | {exported[name] for name in imported if name in exported}
        named |= {name for name in known if name in text and re.search(rf"\b{re.escape(name)}\b", text)}
        named |= {name for name, module in known.items() if module.relative_to(REPO).as_posix() in text}
        named |= {module for pattern, module in run.items() if re.search(pattern, text)}
        named |= {name for name in known if path.stem in own_test_names(name)}
    return named


def own_test_names(module: str) -> set[str]:
    """The names of a test file that is a module's own by its name: ``test_store`` or
    ``test_dispatch_store`` for ``leaderboard.dispatch.store``."""
    parts = module.split(".")
    return {f"test_{parts[-1]}", f"test_{'_'.join(parts[-2:])}"}


def untested() -> list[str]:
    return sorted(set(modules()) - named_by_tests())


def lines(paths: list[Path]) -> int:
    return sum(len(path.read_text().splitlines()) for path in paths)


def ratio() -> tuple[int, int]:
    code = [path for package in PACKAGES for path in (REPO / package).rglob("*.py")]
    return lines(list((REPO / "tests").rglob("*.py"))), lines(code)


def test_every_new_module_comes_with_a_test_of_its_own() -> None:
    missing = sorted(set(untested()) - STILL_UNTESTED)
    assert missing == [], f"no test imports or names {missing}: write one (tests/README.md)"


def test_a_module_that_gained_a_test_leaves_the_list() -> None:
    tested = sorted(STILL_UNTESTED - set(untested()))
    assert tested == [], f"{tested} have tests now: take them off STILL_UNTESTED"


def test_the_inventory_sees_an_import_a_dotted_name_and_a_path() -> None:
    tree = ast.parse(
        "import evaluator.sol\nfrom evaluator.harness.single import judge\n"
        "from evaluator.gpu_specs import x\n"
    )
    assert {"evaluator.sol", "evaluator.harness.single.judge", "evaluator.gpu_specs"} <= imported_names(tree)
    assert module_name(REPO / "evaluator" / "harness" / "__init__.py") == "evaluator.harness"
    assert not counted(REPO / "leaderboard" / "migrations" / "0001_initial.py")
    assert "evaluator.harness.single.child" in named_by_tests()  # run with ``-m``


if __name__ == "__main__":
    tests, code = ratio()
    print(f"tests/code = {tests}/{code} = {tests / code:.2f}")
    print("\n".join(untested()))
