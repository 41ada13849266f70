"""Sphinx extension: opbench's reference pages, generated from the code.

* ``.. opbench-api::`` documents every name in ``opbench.__all__`` (autodoc), so a
  name added to the public surface is in the reference without anyone writing it.
* ``.. opbench-cli::`` documents every ``opbench`` command from its argument
  parser (``opbench.integrations.cli.build_parser``): usage, description, options.
* ``.. opbench-pytest-options::`` documents the pytest plugin's options from the
  table that registers them (``pytest_plugin.options.add_options``, and
  ``benchmark_compat``'s for pytest-benchmark's), read through a recording parser.

A docstring written as plain text rather than reStructuredText (most of opbench's
are reStructuredText; a few lay out tables or option lists by hand) is shown as
written, in a literal block, instead of failing ``sphinx-build -W``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import io
import types
from typing import Any

from docutils import nodes
from docutils.core import publish_doctree
from docutils.parsers.rst import roles
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

# Sphinx's Python roles, which plain docutils does not know, read as literals when a
# docstring is checked before Sphinx parses it.
_SPHINX_ROLES = ("func", "class", "meth", "mod", "attr", "exc", "data", "obj", "py:func",
                 "py:class", "py:meth", "py:mod", "py:attr", "py:exc", "option", "ref", "doc")


def _literal_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    return [nodes.literal(rawtext, text)], []


def is_clean_rst(text: str) -> bool:
    """Whether ``text`` parses as reStructuredText with no warning (docutils alone)."""
    saved = {}
    for role in _SPHINX_ROLES:
        saved[role] = roles._roles.get(role)
        roles._roles[role] = _literal_role
    try:
        doctree = publish_doctree(text, settings_overrides={
            "report_level": 5, "halt_level": 5, "warning_stream": io.StringIO(),
            "file_insertion_enabled": False, "raw_enabled": False})
    except Exception:  # a Sphinx role or directive that needs the build: Sphinx will judge
        return True
    finally:
        for role, value in saved.items():
            if value is None:
                roles._roles.pop(role, None)
            else:
                roles._roles[role] = value
    return not any(m["level"] >= 2 for m in doctree.findall(nodes.system_message))


def as_rst(lines: list[str]) -> list[str]:
    """``lines`` themselves when they are clean reStructuredText, else a literal block of them."""
    if is_clean_rst("\n".join(lines)):
        return lines
    body = [f"   {line}" if line.strip() else "" for line in lines]
    return ["::", "", *body, ""]


def _docstring_fallback(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                        lines: list[str]) -> None:
    lines[:] = as_rst(list(lines))


def escape(text: str) -> str:
    """``text`` as reStructuredText that shows it verbatim (inline markup escaped)."""
    return "".join(f"\\{c}" if not (c.isalnum() or c.isspace()) else c for c in text)


def _parse(directive: SphinxDirective, lines: list[str]) -> list[nodes.Node]:
    node = nodes.section() if any(set(line) == {"-"} for line in lines) else nodes.container()
    node.document = directive.state.document
    nested_parse_with_titles(directive.state, StringList(lines, source=directive.get_source_info()[0]),
                             node)
    return list(node.children)


# The reference's sections, in order: what each holds.
_API_SECTIONS = ("Classes", "Functions", "Modules and data", "Errors and warnings")


def _api_section(obj: Any) -> str:
    if inspect.isclass(obj):
        return _API_SECTIONS[3] if issubclass(obj, (BaseException, Warning)) else _API_SECTIONS[0]
    if callable(obj) and not isinstance(obj, types.ModuleType):
        return _API_SECTIONS[1]
    return _API_SECTIONS[2]


def _api_entry(name: str, obj: Any) -> list[str]:
    target = f"opbench.{name}"
    if isinstance(obj, types.ModuleType):
        return [f".. py:data:: {target}", "", f"   The module ``{obj.__name__}``:", "",
                f".. automodule:: {obj.__name__}", "   :no-index:", "",
                ".. py:currentmodule:: None", ""]  # automodule left its module current
    if inspect.isclass(obj):
        return [f".. autoclass:: {target}", "   :members:", "   :show-inheritance:", ""]
    if callable(obj):
        return [f".. autofunction:: {target}", ""]
    return [f".. autodata:: {target}", "   :annotation:", ""]


def api_lines() -> list[str]:
    """The reference of every name in ``opbench.__all__`` as autodoc directives, in
    sections (classes, functions, modules and data, errors and warnings), each in
    ``__all__``'s order."""
    import opbench

    by_section: dict[str, list[str]] = {s: [] for s in _API_SECTIONS}
    for name in opbench.__all__:
        obj = getattr(opbench, name)
        by_section[_api_section(obj)] += _api_entry(name, obj)
    lines: list[str] = []
    for title, entries in by_section.items():
        if entries:
            lines += [title, "-" * len(title), "", *entries]
    return lines


class ApiDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        return _parse(self, api_lines())


def _action_label(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}")
                                 if action.choices else action.dest.upper())
    if action.nargs == "?":
        metavar = f"[{metavar}]"
    return ", ".join(f"{o} {metavar}" for o in action.option_strings)


def _help_text(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:
        fields = {**vars(action), "prog": prog}
        if action.choices is not None:
            fields["choices"] = ", ".join(map(str, action.choices))
        try:
            text = text % fields
        except (KeyError, TypeError, ValueError):
            pass
    return text


def option_lines(program: str, labels_and_help: list[tuple[str, str]]) -> list[str]:
    """``.. option::`` entries (searchable, linkable with ``:option:``) under ``program``."""
    lines = [f".. program:: {program}", ""]
    for label, help_text in labels_and_help:
        lines += [f".. option:: {label}", "", f"   {escape(' '.join(help_text.split()))}", ""]
    return lines


def cli_lines() -> list[str]:
    from opbench.integrations.cli import COMMANDS, build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines: list[str] = []
    for name in COMMANDS:
        sub = subparsers.choices[name]
        program = f"opbench {name}"
        title = f"``{program}``"
        lines += [title, "-" * len(title), ""]
        help_text = next((a.help for a in subparsers._choices_actions if a.dest == name), "")
        if help_text:
            lines += [escape(help_text[0].upper() + help_text[1:]) + ".", ""]
        sub.prog = program  # as installed (`opbench`), whatever runs the build
        usage = sub.format_usage().strip().replace("usage: ", "", 1)
        lines += ["::", "", *(f"   {u}" for u in usage.splitlines()), ""]
        lines += [*as_rst(inspect.cleandoc(sub.description or "").splitlines()), ""]
        entries = [(_action_label(a), _help_text(a, program)) for a in sub._actions
                   if a.help != argparse.SUPPRESS and a.dest != "help"]
        lines += option_lines(program, entries)
    return lines


class CliDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        return _parse(self, cli_lines())


class _Group:
    """Stands in for pytest's option group: records what the plugin registers."""

    def __init__(self, recorder: _Recorder, name: str, description: str) -> None:
        self.name, self.description, self.options = name, description, []
        recorder.groups.append(self)

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))

    _addoption = addoption


class _Recorder:
    def __init__(self) -> None:
        self.groups: list[_Group] = []

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> _Group:
        return next((g for g in self.groups if g.name == name), None) or _Group(self, name,
                                                                                description)

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.getgroup("general").addoption(*names, **kwargs)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def recorded_pytest_options() -> list[_Group]:
    """The plugin's option groups as registered: opbench's own, then pytest-benchmark's
    that opbench serves (where pytest-benchmark is not active)."""
    from opbench.integrations.pytest_plugin import benchmark_compat, options

    recorder = _Recorder()
    options.add_options(recorder)  # type: ignore[arg-type]
    benchmark_compat.pytest_addoption(recorder)  # type: ignore[arg-type]
    return recorder.groups


def pytest_option_lines() -> list[str]:
    lines: list[str] = []
    for group in recorded_pytest_options():
        title = escape(group.description)
        lines += [title, "-" * len(title), ""]
        entries = []
        for names, kwargs in group.options:
            action = argparse.Action(list(names), dest=kwargs.get("dest") or names[0].lstrip("-"),
                                     nargs=0 if kwargs.get("action") in ("store_true", "store_false")
                                     else kwargs.get("nargs"),
                                     default=kwargs.get("default"), choices=kwargs.get("choices"),
                                     help=kwargs.get("help"), metavar=kwargs.get("metavar"))
            action.dest = names[0].lstrip("-").replace("-", "_")
            entries.append((_action_label(action), _help_text(action, "pytest")))
        lines += option_lines("pytest", entries)
    return lines


class PytestOptionsDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        return _parse(self, pytest_option_lines())


def setup(app: Sphinx) -> dict[str, Any]:
    importlib.import_module("opbench")  # fail early, naming the import, if it cannot load
    app.add_directive("opbench-api", ApiDirective)
    app.add_directive("opbench-cli", CliDirective)
    app.add_directive("opbench-pytest-options", PytestOptionsDirective)
    app.connect("autodoc-process-docstring", _docstring_fallback)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
