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

    def canonical(self):
        """The config that names this one's kernel: configs whose kernels are one and the same (a
        field the kernel takes at launch instead of compiling it in) share one artifact
        (``fa4_mlir.runtime.artifacts.ArtifactKey.for_config``). ``self`` unless a subclass says otherwise."""
        return self

    def validate(self):
        """Raise ConfigError with the reason if ``supported()`` is false; return self."""
        support = self.supported()
        if not support:
            raise ConfigError(f"{self.describe()}: {support.reason}")
        return self
