"""What every kernel config shares: a ``supported()`` verdict and ``validate()`` that raises it."""

from __future__ import annotations

import dataclasses

from fa4_mlir.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Support:
    """Whether a config can be built, and why not."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


class Checked:
    """Mixin for configs: subclasses implement ``supported()`` and ``describe()`` (which names the
    config and its key values, e.g. "FA4Config bf16 d128 2Q")."""

    def supported(self) -> Support:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def validate(self):
        """Raise ConfigError with the reason if ``supported()`` is false; return self."""
        support = self.supported()
        if not support:
            raise ConfigError(f"{self.describe()}: {support.reason}")
        return self
