"""``zkop fetch --template``: a Jinja template over a subtree, in Jinja's immutable sandbox.

The template is the user's file; the values are znode data, only ever substituted as text (a value is never
parsed as a template). The environment is :class:`jinja2.sandbox.ImmutableSandboxedEnvironment`: no attribute
that starts with ``_`` (so no ``''.__class__.__mro__`` escape to Python's objects), no method that changes a
list or dictionary, ``range`` capped at 100000 items. An undefined name is an error (``StrictUndefined``), not
an empty string. The context:

- ``values``: ``{"db/url": "jdbc:…", …}`` — every znode by its path below the root;
- ``tree``: the same as nested dictionaries (``tree.db.url``), as ``--format json`` writes it;
- ``root``: the znode path fetched.
"""

from __future__ import annotations

from collections.abc import Sequence

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from zkop.render.formats import Entry, RenderError, nested, text_of

__all__ = ["SandboxedTemplate", "TemplateError"]


class TemplateError(ValueError):
    """The template file cannot be parsed (a usage error: nothing is fetched)."""


class SandboxedTemplate:
    """A parsed template; :meth:`render` fills it from a subtree.

    Raises:
        TemplateError: ``source`` is not a valid template.
    """

    def __init__(self, source: str, name: str = "template") -> None:
        self.name = name
        self._env = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                                  keep_trailing_newline=True)
        try:
            self._template = self._env.from_string(source)
        except jinja2.TemplateSyntaxError as err:
            raise TemplateError(f"{name}, line {err.lineno}: {err.message}") from None

    def render(self, entries: Sequence[Entry], root: str) -> bytes:
        """The template filled from ``entries`` (UTF-8).

        Raises:
            RenderError: a value is not UTF-8, the tree has a key collision, or the template fails (an undefined
                name, an operation the sandbox refuses, any other error while rendering); nothing is written.
        """
        values = {entry.path: text_of(entry) for entry in entries}
        context = {"values": values, "tree": nested(entries), "root": root}
        try:
            return self._template.render(context).encode("utf-8")
        except jinja2.exceptions.SecurityError as err:
            raise RenderError(f"{self.name}: refused by the template sandbox: {err}; nothing is written") from None
        except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError) as err:
            raise RenderError(f"{self.name}: {type(err).__name__}: {err}; nothing is written") from None
