"""The fake server answers generation and selection prompts: it is tested on the toy library and
tasks of the generation tests."""

from ..generation.conftest import toy_library, toy_tasks  # noqa: F401  (fixtures)
