"""primsel: primitive selection for program-writing digital assistants.

Retrieve the library primitives a request needs, write the program from their documentation,
run it in a simulated environment, and report primitive recall beside task success.
"""

from primsel.registry import available, build, register
from primsel.types import (
    ExecutionResult,
    Generator,
    LearnsFromTasks,
    Primitive,
    Program,
    Qrels,
    ReportsUsage,
    Retriever,
    Run,
    SeesGold,
    Selection,
    Task,
)

__version__ = "0.1.0"

__all__ = [
    "ExecutionResult",
    "Generator",
    "LearnsFromTasks",
    "Primitive",
    "Program",
    "Qrels",
    "ReportsUsage",
    "Retriever",
    "Run",
    "SeesGold",
    "Selection",
    "Task",
    "available",
    "build",
    "register",
]
