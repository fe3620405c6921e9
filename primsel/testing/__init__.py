"""Test doubles shipped with primsel, for its tests, benchmarks and for checking a set-up offline.

:mod:`primsel.testing.fake_server` is a scripted OpenAI-compatible chat-completions server on
127.0.0.1 (``python -m primsel.testing.fake_server`` answers primsel's prompts as a perfect
model would). Nothing else in primsel imports this package.
"""
