"""Builds glnet._glnet with the project's CMake build (pyproject.toml has the rest and says how to install).

Only the module is configured and built (GLNET_APPS_AND_TESTS=OFF: no commands, no test suite): the engine's sources
once, position-independent, then the module. pip shows the build's output with -v (`pip install -v .`); without
it, only "Building wheel ... still running" while CMake works (README: Python says how long it takes).

GLNET_BUILD_DIR names a build directory to use (an already configured one, such as build/, builds only the
module there); by default build/python-<interpreter> is configured for the running interpreter."""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def run(command):
    print("setup.py:", " ".join(command), flush=True)
    subprocess.run(command, check=True)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        build = os.environ.get("GLNET_BUILD_DIR") or os.path.join(ROOT, "build", "python-" + sys.implementation.cache_tag)
        jobs = str(os.cpu_count() or 1)
        print(f"setup.py: building glnet._glnet in {build} with {jobs} jobs (from scratch: minutes, see README: Python)", flush=True)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGLNET_APPS_AND_TESTS=OFF",
                 f"-DPython3_EXECUTABLE={sys.executable}"])
        run(["cmake", "--build", build, "--target", "_glnet", "--parallel", jobs])
        built = os.path.join(build, "python", "glnet", "_glnet" + suffix)
        if not os.path.exists(built):
            sys.exit(f"setup.py: {build} built no _glnet{suffix} for this Python ({sys.executable}); "
                     "its CMake cache names another interpreter: leave GLNET_BUILD_DIR unset")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("glnet._glnet", sources=[])], cmdclass={"build_ext": CMakeBuild})
