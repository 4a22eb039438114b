"""A subtree rendered as one file: ``.properties``, JSON, YAML, env or a sandboxed template (``zkop fetch --out``).

Pure rendering (:mod:`zkop.render.formats`, :mod:`zkop.render.template`) over :class:`~zkop.render.formats.Entry`
values, and one atomic single-file write (:func:`zkop.render.atomic.write_file_atomically`). Imports nothing else
of zkop (the bottom layer beside :mod:`zkop.hooks`).
"""

from zkop.render.atomic import write_file_atomically
from zkop.render.formats import FORMATS, Entry, RenderError, render
from zkop.render.template import SandboxedTemplate, TemplateError

__all__ = ["FORMATS", "Entry", "RenderError", "SandboxedTemplate", "TemplateError", "render", "write_file_atomically"]
