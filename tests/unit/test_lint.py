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
