"""What an operator instance learns about itself when it starts.

The host's first call, ``init``, carries who the instance is and the operator's configuration
(docs/ABI.md section 6; the WIT record ``init-message``); :class:`Context` is that message,
handed to the operator's ``__init__``. Tests build one directly.
"""

from dataclasses import dataclass

from ._errors import WeirError

__all__ = ["Context"]


@dataclass(frozen=True)
class Context:
    """Who this operator instance is and how the job configured it.

    - ``operator``: the operator's name in the job file, for messages;
    - ``subtask``: which of the operator's instances this is, from 0 to ``parallelism - 1``;
    - ``parallelism``: how many instances of the operator run side by side;
    - ``config``: the operator's ``config`` from the job file, as bytes (empty when the job
      gives none). A str given here is encoded as UTF-8.

    ``Context("count")`` is the only instance (subtask 0 of 1) of ``count``, with no config.
    """

    operator: str = "operator"
    subtask: int = 0
    parallelism: int = 1
    config: bytes = b""

    def __post_init__(self):
        if not isinstance(self.operator, str):
            raise WeirError(
                f"a context's operator must be a str, not {type(self.operator).__name__}"
            )
        if isinstance(self.config, str):
            object.__setattr__(self, "config", self.config.encode())
        elif not isinstance(self.config, bytes):
            try:
                object.__setattr__(self, "config", memoryview(self.config).tobytes())
            except TypeError:
                raise WeirError(
                    f"a context's config must be bytes or str, not {type(self.config).__name__}"
                ) from None
        for name in ("subtask", "parallelism"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value < 2**32:
                raise WeirError(
                    f"a context's {name} must be an int from 0 to 2**32-1, not {value!r}"
                )
        if self.subtask >= self.parallelism:
            raise WeirError(
                f"subtask {self.subtask} is not one of the {self.parallelism} instances of "
                f"operator `{self.operator}` (subtasks count from 0)"
            )

    def config_str(self) -> str:
        """The config as text. Raises :class:`~weir.WeirError`, naming the operator, when it is
        not UTF-8."""
        try:
            return self.config.decode()
        except UnicodeDecodeError as e:
            raise WeirError(
                f"the config of operator `{self.operator}` must be UTF-8 text: {e}"
            ) from None
