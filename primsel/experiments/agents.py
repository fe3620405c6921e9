"""ASPERA's agents as cells: what ``[generator] protocol = "aspera"`` makes of a cell's settings.

Under ASPERA's protocol (Coca et al., ACL 2025) a cell is one of ASPERA's agents, or primsel's retriever under
ASPERA's generation prompt:

* retriever ``"all"``: the complete-codebase-knowledge agent (the generator's ``agent = "cck"``: the request
  shows the documentation of the task's apps, whatever the selection);
* retriever ``{ type = "llm_selector" }``, with no other key: the primitive-selection agent. The retriever becomes
  ASPERA's selection (``aspera_selector``, or ``aspera_local_selector`` for a ``local`` generator) with the
  generator's endpoint, model and sampling, since ASPERA's agent sends every request through one completer;
  the selector becomes ``positive`` (every symbol selected: no k or threshold cuts it), and the generator's
  ``agent = "ps"``. It needs ``library = "aspera"``: the agent selects from all twelve modules of ``aspera.apps``;
* any other retriever: the PS agent's generation request built from what that retriever selects at k
  (``agent = "ps_generation"``: the selection ordered as ASPERA orders symbols): the same prompt and model,
  only the selection differs.

:func:`resolve_protocol` applies this to the settings before they are checked, so the cell id is that of the
resolved settings.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.aspera import aspera_protocol
from primsel.experiments.settings import SettingError
from primsel.retrieval.aspera_selector import OUTSIDE_PREFIX
from primsel.types import Selection, Task

#: The generator's ``agent`` a retriever makes (any other: ``"ps_generation"``).
AGENT_OF_RETRIEVER = {"all": "cck", "llm_selector": "ps"}
#: The ASPERA selector that stands for ``llm_selector`` under each chat generator.
SELECTOR_OF_GENERATOR = {"openai": "aspera_selector", "local": "aspera_local_selector"}


def resolve_protocol(settings: Mapping[str, Any], library: str = "primsel") -> dict[str, Any]:
    """The settings of a cell with ASPERA's agents resolved (see the module); settings without
    ``generator.protocol = "aspera"`` come back unchanged.

    Parameters
    ----------
    settings : cell settings as an experiment file gives them (the generator and retriever as written).
    library : the experiment's ``library`` (``"primsel"`` or ``"aspera"``).

    Raises
    ------
    SettingError : ``llm_selector`` with keys of its own, or with a generator that has no ASPERA selector, or
        without ``library = "aspera"``; an ``agent`` that contradicts the retriever.
    """
    out = dict(settings)
    generator = out.get("generator")
    if not isinstance(generator, Mapping) or generator.get("protocol") != "aspera":
        return out
    retriever = out.get("retriever")
    name = specs.type_name(retriever)
    agent = AGENT_OF_RETRIEVER.get(str(name), "ps_generation")
    if generator.get("agent", agent) != agent:
        raise SettingError("generator.agent", f"is {generator['agent']!r}, but retriever {name!r} makes it "
                                              f"{agent!r}; leave agent out")
    out["generator"] = {**generator, "agent": agent}
    if name == "llm_selector":
        out["retriever"] = _aspera_selector(retriever, generator, library)
        out["selector"] = "positive"
    return out


def _aspera_selector(retriever: Any, generator: Mapping[str, Any], library: str) -> dict[str, Any]:
    """The ``aspera_selector`` spec that takes the generator's endpoint, model and sampling."""
    if isinstance(retriever, Mapping) and set(retriever) != {"type"}:
        extra = ", ".join(sorted(k for k in retriever if k != "type"))
        raise SettingError("retriever", f"under ASPERA's protocol llm_selector takes the generator's endpoint, model "
                                        f"and sampling, as ASPERA's agent has one completer: remove {extra}")
    selector = SELECTOR_OF_GENERATOR.get(str(generator.get("type")))
    if selector is None:
        raise SettingError("retriever", f"ASPERA's PS agent needs an 'openai' or 'local' generator, got "
                                        f"{generator.get('type')!r}")
    if library != "aspera":
        raise SettingError("retriever", "ASPERA's PS agent selects from all twelve modules of aspera.apps: "
                                        "set library = \"aspera\"")
    accepted = inspect.signature(registry.resolve(selector, "retriever")).parameters
    return {"type": selector, **{k: v for k, v in generator.items() if k in accepted}}


def is_aspera(generator: Any) -> bool:
    """True for a generator table under ASPERA's protocol."""
    return isinstance(generator, Mapping) and generator.get("protocol") == "aspera"


def aspera_selection_names(
    generator: Mapping[str, Any],
    tasks: Sequence[Task],
    selections: Mapping[str, Selection],
    library: Mapping[str, Any],
) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per task id, what ASPERA's primitive-selection metric compares (:mod:`primsel.eval.aspera`):
    ``aspera_selection``, the names of the selected symbols (the selected primitives' names, and the names ASPERA's
    rule found outside the library, recorded by ``aspera_selector``; none for the CCK agent, which selects nothing)
    and ``aspera_gold``, the names ASPERA's substring rule finds in the reference program."""
    protocol = aspera_protocol()
    out = {}
    for task in tasks:
        selection = selections[task.id]
        names: list[str] = []
        if generator.get("agent") != "cck":
            names = [library[p].name for p in selection.ids]
            names += [key[len(OUTSIDE_PREFIX):] for key in selection.usage if key.startswith(OUTSIDE_PREFIX)]
        gold = tuple(protocol.gold_names(task.program))
        out[task.id] = {"aspera_selection": tuple(names), "aspera_gold": gold}
    return out
