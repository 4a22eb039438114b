"""``zkop run``'s composition root: the feature registry (:mod:`zkop.operator.registry`), the options
(:mod:`zkop.operator.options`) and the :class:`~zkop.operator.run.Operator` that builds every enabled feature
from the registry into one Manager (controller-runtime's ``main.go``). ``zkop/cmd`` only parses flags into
:class:`~zkop.operator.options.OperatorOptions`.
"""
