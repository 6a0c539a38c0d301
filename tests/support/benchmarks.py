"""A harness of benchmarks/ loaded as a module (its smoke tests, and the server load test that runs
benchmarks/server_load.py small)."""
import importlib.util
import sys

from tests.support.paths import BENCHMARKS


def load(name: str):
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))   # the harness modules import each other by name
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
