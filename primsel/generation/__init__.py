"""Program generation: prompts, program extraction and the generators.

``extract(answer, mode="primsel" | "aspera")`` takes the program out of one model answer
(:mod:`primsel.generation.extract`; ASPERA's rules: :mod:`primsel.generation.aspera_parser`).

Importing this package registers the generators ``openai``, ``reference`` and ``replay``
(:mod:`primsel.generation.generators`); the chat client they share with the LLM selector is
:mod:`primsel.llm`, and the ``openai`` package itself is imported only when the first request
is sent.
"""

from primsel.generation import generators  # noqa: F401  (registration)
from primsel.generation.extract import Extraction, extract, extract_program
from primsel.generation.generators import OpenAIGenerator, ReferenceGenerator, ReplayGenerator
from primsel.generation.prompts import generation_messages

__all__ = [
    "Extraction",
    "OpenAIGenerator",
    "ReferenceGenerator",
    "ReplayGenerator",
    "extract",
    "extract_program",
    "generation_messages",
]
