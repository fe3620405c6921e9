"""Every organisation the Asper-Bench setup programs build has the reference directory size.

The expected histogram counts the directory sizes the 260 setup calls of the archive build. Sizes depend on the
padding, the user, the manager's extra report and the team extensions, not on the random draws
(the snapshot tests cover those). Each setup program is run only up to its
``simulate_org_structure`` call (always its first world-building step), in a fresh context.
"""

import collections
import re

import pytest

from primsel.datasets.asperbench import load_asper_bench
from primsel.simulator.apps import company_directory, room_booking, time_utils, work_calendar
from primsel.simulator.setup_tools.company_directory import simulate_org_structure
from primsel.simulator.state import ExecutionContext, new_context

#: directory size -> number of calls (spec 14.1).
EXPECTED_SIZES = {
    12: 9, 13: 114, 14: 3, 15: 12, 16: 31, 17: 17, 18: 28, 19: 16, 20: 4, 21: 1, 22: 3, 23: 5,
    24: 4, 25: 4, 26: 1, 27: 1, 28: 2, 32: 1, 33: 1, 43: 3,
}  # fmt: skip


class _Stop(Exception):
    """Ends a setup program right after the organisation was built."""


@pytest.mark.asper
def test_directory_sizes_match_reference_histogram(asper_path):
    sizes: collections.Counter[int] = collections.Counter()

    def recording_org_structure(*args, **kwargs):
        with new_context(ExecutionContext()) as context:
            simulate_org_structure(*args, **kwargs)
            sizes[len(context.table("EMPLOYEES"))] += 1
        raise _Stop

    for task in load_asper_bench(asper_path):
        for setup in task.setup_programs:
            namespace: dict = {}
            for module in (time_utils, room_booking, company_directory, work_calendar):
                namespace.update({name: getattr(module, name) for name in module.__all__})
            namespace["simulate_org_structure"] = recording_org_structure
            exec(setup, namespace)
            name = re.search(r"^def (\w+)\(", setup, re.M).group(1)
            with pytest.raises(_Stop):
                namespace[name]()
    assert sum(sizes.values()) == 260
    assert dict(sizes) == EXPECTED_SIZES
