"""pyflakes over the package: undefined names and unused imports are bugs waiting to happen."""
from pathlib import Path


def test_pyflakes_clean():
    from pyflakes.api import checkRecursive
    from pyflakes.reporter import Reporter
    import io
    out, err = io.StringIO(), io.StringIO()
    src = Path(__file__).resolve().parents[2] / "src"
    n = checkRecursive([str(src)], Reporter(out, err))
    assert n == 0, out.getvalue() + err.getvalue()


def _imports(src: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports, at any depth (function-local imports too: a lazy import
    that hides a cycle is still a cycle), leaving out `if TYPE_CHECKING:` blocks."""
    import ast
    mods = {".".join(f.relative_to(src).with_suffix("").parts).removesuffix(".__init__"): f
            for f in (src / "kafkite").rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        pkg = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for top in tree.body:
            if isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test):
                continue
            for n in ast.walk(top):
                if isinstance(n, ast.ImportFrom):
                    base = ".".join(pkg[:len(pkg) - n.level + 1] + ([n.module] if n.module else [])) \
                        if n.level else n.module
                    for a in n.names:
                        t = f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                        if t in mods and t != m:
                            edges[m].add(t)
                elif isinstance(n, ast.Import):
                    edges[m].update(a.name for a in n.names if a.name in mods and a.name != m)
    return edges


def test_no_import_cycles():
    edges = _imports(Path(__file__).resolve().parents[2] / "src")

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False
    cycles = sorted(m for m in edges if reaches(m, m))
    assert not cycles, f"modules on an import cycle: {cycles}"
