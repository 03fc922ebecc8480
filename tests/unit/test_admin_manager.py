"""server/admin_manager.py: the in-process side and ZooKeeper's answer the same interface, and the request path
above them does not branch on ZooKeeper mode."""
import inspect
import re
from pathlib import Path

import kafkite.server as server
from kafkite.server.admin_manager import AdminManager, InProcessAdminManager, ZkAdminManager

SERVER = Path(server.__file__).parent


def _abstract(cls) -> set[str]:
    """The methods of `cls` whose body is only `raise NotImplementedError`."""
    out = set()
    for name, fn in vars(cls).items():
        if inspect.isfunction(fn) and re.search(r"^\s+raise NotImplementedError\s*$", inspect.getsource(fn), re.M):
            out.add(name)
    return out


def test_both_sides_implement_every_method_of_the_interface():
    wanted = _abstract(AdminManager)
    assert {"create_topics", "delete_topics", "alter_partition", "register", "stopped"} <= wanted
    for side in (InProcessAdminManager, ZkAdminManager):
        missing = {m for m in wanted if m not in vars(side)}
        assert not missing, f"{side.__name__} lacks {sorted(missing)}"
        for m in wanted:  # same parameters as the interface's, so a caller never learns which side it has
            mine, theirs = inspect.signature(getattr(side, m)), inspect.signature(getattr(AdminManager, m))
            assert mine.parameters == theirs.parameters, (side.__name__, m)


def test_broker_and_handlers_do_not_branch_on_zookeeper_mode():
    files = [SERVER / "broker.py", *sorted((SERVER / "handlers").glob("*.py"))]
    for f in files:
        text = f.read_text()
        # (broker.py keeps `self.zk = state.zk` for router.py; nothing may test it or reach through it)
        assert not re.search(r"\bzk is (not )?None|\bzk\.|if [^\n]*\bzk\b", text), f"{f.name} branches on ZooKeeper mode"
